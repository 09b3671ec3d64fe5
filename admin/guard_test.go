package admin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/internal/testkit"
)

// adminHostDo is adminDo with the Host header set to host.
func adminHostDo(t *testing.T, srv *httptest.Server, method, path, host string, header map[string]string) adminAnswer {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := adminClient(srv).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return adminAnswer{status: res.StatusCode, header: res.Header}
}

func TestAdminAnswersOnlyForLoopbackNamesIPsAndItsHostsWithOrWithoutAToken(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"", adminTestToken} {
		h := admin.New(admin.Config{Token: token, Logger: testkit.Logger(), Hosts: []string{"paylock-admin.internal"},
			Mounts: map[string]http.Handler{"/admin/river/": http.NotFoundHandler()}})
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		auth := map[string]string{"Authorization": "Bearer " + adminTestToken}
		for host, want := range map[string]int{
			"evil.example":                 http.StatusForbidden, // a rebound name
			"evil.example:9091":            http.StatusForbidden,
			"localhost.evil.example":       http.StatusForbidden,
			"localhost:9091":               http.StatusNotFound,
			"admin.localhost":              http.StatusNotFound,
			"127.0.0.1:9091":               http.StatusNotFound,
			"[::1]:9091":                   http.StatusNotFound,
			"10.1.2.3:9091":                http.StatusNotFound,
			"PAYLOCK-ADMIN.internal:9091":  http.StatusNotFound,
			"paylock-admin.internal.evil.": http.StatusForbidden,
		} {
			for _, path := range []string{"/admin/river/api/jobs", "/admin/login", "/nothing"} {
				a := adminHostDo(t, srv, http.MethodGet, path, host, auth)
				if path == "/admin/login" && want != http.StatusForbidden {
					continue // the form or a redirect: served
				}
				if a.status != want {
					t.Errorf("token %v: GET %s with Host %s: %d, want %d", token != "", path, host, a.status, want)
				}
			}
		}
	}
}

func TestAdminWithoutATokenRefusesWritesFromOtherSites(t *testing.T) {
	t.Parallel()
	srv := startAdmin(t, "", false)
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"a page of another site", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}, http.StatusForbidden},
		{"an old browser on another site", map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}, http.StatusForbidden},
		{"a sibling site", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"this origin", map[string]string{"Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}, http.StatusOK},
		{"a tool (no browser headers)", nil, http.StatusOK},
	} {
		a := adminDo(t, srv, http.MethodPost, "/admin/river/api/jobs/delete", strings.NewReader(`{"job_ids":[1]}`), tc.header, nil)
		if a.status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, a.status, a.body, tc.want)
		}
	}
}

func TestEveryAdminAnswerForbidsFraming(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"", adminTestToken} {
		srv := startAdmin(t, token, false)
		for _, path := range []string{"/admin/river/", "/admin/river/jobs", "/nothing", "/admin/login"} {
			a := adminDo(t, srv, http.MethodGet, path, nil, nil, nil)
			if a.header.Get("X-Frame-Options") != "DENY" || !strings.Contains(a.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
				t.Errorf("token %v: GET %s (%d): X-Frame-Options %q, CSP %q", token != "", path, a.status,
					a.header.Get("X-Frame-Options"), a.header.Get("Content-Security-Policy"))
			}
		}
	}
}

func TestLogoutEndsTheSessionOnTheServer(t *testing.T) {
	t.Parallel()
	srv := startAdmin(t, adminTestToken, false)
	c := login(t, srv, adminTestToken, "").cookie
	if c == nil {
		t.Fatal("login set no session cookie")
	}
	if a := adminDo(t, srv, http.MethodGet, "/admin/river/", nil, nil, c); a.status != 200 {
		t.Fatalf("with the session: %d", a.status)
	}
	if out := adminDo(t, srv, http.MethodPost, "/admin/logout", nil, map[string]string{"Origin": srv.URL}, c); out.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", out.status)
	}
	// A copy of the cookie (a browser that kept it, a stolen one) no
	// longer opens anything.
	if a := adminDo(t, srv, http.MethodGet, "/admin/river/", nil, nil, c); a.status != http.StatusUnauthorized {
		t.Fatalf("the same cookie after logout: %d, want 401", a.status)
	}
}

func TestWrongAdminTokensAreThrottledPerClientAndLoggedAtABoundedRate(t *testing.T) {
	t.Parallel()
	var logs testkit.LogBuffer
	h := admin.New(admin.Config{Token: adminTestToken, Logger: logs.Logger(),
		Mounts: map[string]http.Handler{"/admin/river/": http.NotFoundHandler()}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	const guesses = 200
	throttled := 0
	for i := range guesses {
		hdr := map[string]string{"Authorization": "Bearer wrong-token-" + string(rune('a'+i%26))}
		a := adminDo(t, srv, http.MethodGet, "/admin/river/", nil, hdr, nil)
		switch a.status {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			throttled++
			if a.header.Get("Retry-After") == "" || a.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("429 without Retry-After or problem+json: %v", a.header)
			}
		default:
			t.Fatalf("wrong token %d: %d", i, a.status)
		}
	}
	if throttled < guesses/2 {
		t.Fatalf("%d of %d wrong tokens throttled", throttled, guesses)
	}
	// Throttled, the right token is refused too: guessing gains nothing.
	if a := adminDo(t, srv, http.MethodGet, "/admin/river/", nil, map[string]string{"Authorization": "Bearer " + adminTestToken}, nil); a.status != http.StatusTooManyRequests {
		t.Fatalf("the right token from a throttled client: %d, want 429", a.status)
	}
	if a := login(t, srv, adminTestToken, ""); a.status != http.StatusTooManyRequests {
		t.Fatalf("the login form from a throttled client: %d, want 429", a.status)
	}
	if n := strings.Count(logs.String(), "wrong token refused"); n == 0 || n > 10 {
		t.Fatalf("%d log lines for %d wrong tokens, want a few", n, guesses)
	}
}
