package admin_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/internal/testkit"
)

const adminTestToken = "s3cret-admin-token-0123"

// startAdmin serves an Admin with token (TLS when tls) and one mount under
// /admin/river/ that echoes the method and path it was given.
func startAdmin(t *testing.T, token string, tls bool) *httptest.Server {
	t.Helper()
	mount := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "mounted "+r.Method+" "+r.URL.Path)
	})
	h := admin.New(admin.Config{Token: token, Logger: testkit.Logger(),
		Mounts: map[string]http.Handler{"/admin/river/": mount}})
	srv := httptest.NewUnstartedServer(h)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// adminClient follows no redirects, so that tests see the 303s.
func adminClient(srv *httptest.Server) *http.Client {
	c := *srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

type adminAnswer struct {
	status int
	header http.Header
	body   string
	cookie *http.Cookie // the session cookie set, if any
}

func adminDo(t *testing.T, srv *httptest.Server, method, path string, body io.Reader, header map[string]string, cookie *http.Cookie) adminAnswer {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if cookie != nil {
		req.AddCookie(cookie)
		// A session is a browser's, whose page loads ask for HTML.
		if req.Header.Get("Accept") == "" {
			req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
		}
	}
	res, err := adminClient(srv).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	a := adminAnswer{status: res.StatusCode, header: res.Header, body: string(b)}
	for _, c := range res.Cookies() {
		if c.Name == admin.SessionCookie {
			a.cookie = c
		}
	}
	return a
}

// login posts the login form from srv's own origin.
func login(t *testing.T, srv *httptest.Server, token, next string) adminAnswer {
	t.Helper()
	form := url.Values{"token": {token}, "next": {next}}
	return adminDo(t, srv, http.MethodPost, "/admin/login", strings.NewReader(form.Encode()), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Origin": srv.URL, "Sec-Fetch-Site": "same-origin",
	}, nil)
}

// sessionFor builds a session cookie value the way the handler documents
// it: v1.<expiry>.<base64url HMAC-SHA256(token, label + expiry)>.
func sessionFor(token string, expiry time.Time) *http.Cookie {
	exp := strconv.FormatInt(expiry.Unix(), 10)
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("paylock admin session v1\x00" + exp))
	return &http.Cookie{Name: admin.SessionCookie, Value: "v1." + exp + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))}
}

func TestAdminLoginSetsAStrictHttpOnlyCookieThatOpensTheMounts(t *testing.T) {
	t.Parallel()
	for _, tls := range []bool{false, true} {
		t.Run("tls="+strconv.FormatBool(tls), func(t *testing.T) {
			t.Parallel()
			srv := startAdmin(t, adminTestToken, tls)

			form := adminDo(t, srv, http.MethodGet, "/admin/login?next=/admin/river/jobs%3Fstate%3Ddiscarded", nil, nil, nil)
			if form.status != 200 || !strings.Contains(form.body, `<form method="post" action="/admin/login">`) ||
				!strings.Contains(form.body, `value="/admin/river/jobs?state=discarded"`) {
				t.Fatalf("GET /admin/login: %d %s", form.status, form.body)
			}
			if csp := form.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("login page CSP %q", csp)
			}

			wrong := login(t, srv, adminTestToken+"x", "/admin/river/")
			if wrong.status != http.StatusUnauthorized || wrong.cookie != nil || !strings.Contains(wrong.body, "Wrong token") {
				t.Fatalf("wrong token: %d cookie %v", wrong.status, wrong.cookie)
			}

			ok := login(t, srv, adminTestToken, "/admin/river/jobs?state=discarded")
			if ok.status != http.StatusSeeOther || ok.header.Get("Location") != "/admin/river/jobs?state=discarded" {
				t.Fatalf("login: %d Location %q", ok.status, ok.header.Get("Location"))
			}
			c := ok.cookie
			if c == nil {
				t.Fatal("login set no session cookie")
			}
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tls || c.Path != "/" ||
				c.MaxAge != int(admin.DefaultSessionTTL/time.Second) {
				t.Errorf("cookie flags: HttpOnly %v SameSite %v Secure %v (tls %v) Path %q MaxAge %d",
					c.HttpOnly, c.SameSite, c.Secure, tls, c.Path, c.MaxAge)
			}
			if strings.Contains(c.Value, adminTestToken) {
				t.Error("the cookie holds the token itself")
			}

			if a := adminDo(t, srv, http.MethodGet, "/admin/river/", nil, nil, nil); a.status != http.StatusUnauthorized {
				t.Fatalf("without the cookie: %d", a.status)
			}
			if a := adminDo(t, srv, http.MethodGet, "/admin/river/", nil, nil, c); a.status != 200 || a.body != "mounted GET /admin/river/" {
				t.Fatalf("with the cookie: %d %s", a.status, a.body)
			}
			if a := adminDo(t, srv, http.MethodGet, "/admin/river/", nil, map[string]string{"Authorization": "Bearer " + adminTestToken}, nil); a.status != 200 {
				t.Fatalf("with the bearer: %d %s", a.status, a.body)
			}

			out := adminDo(t, srv, http.MethodPost, "/admin/logout", nil, map[string]string{"Origin": srv.URL}, c)
			if out.status != http.StatusSeeOther || out.cookie == nil || out.cookie.MaxAge >= 0 {
				t.Fatalf("logout: %d cookie %+v", out.status, out.cookie)
			}
		})
	}
}

func TestAdminSessionCookieRefusesCrossOriginWrites(t *testing.T) {
	t.Parallel()
	srv := startAdmin(t, adminTestToken, false)
	c := login(t, srv, adminTestToken, "").cookie
	if c == nil {
		t.Fatal("login set no session cookie")
	}
	for _, tc := range []struct {
		name   string
		method string
		header map[string]string
		cookie bool
		want   int
	}{
		{"same-origin fetch", http.MethodPost, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": srv.URL}, true, 200},
		{"old browser, Origin only", http.MethodDelete, map[string]string{"Origin": srv.URL}, true, 200},
		{"another site", http.MethodPost, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, true, 403},
		{"a sibling subdomain", http.MethodPut, map[string]string{"Sec-Fetch-Site": "same-site"}, true, 403},
		{"foreign Origin only", http.MethodPost, map[string]string{"Origin": "https://evil.example"}, true, 403},
		{"neither header", http.MethodPost, nil, true, 403},
		{"cross-site read", http.MethodGet, map[string]string{"Sec-Fetch-Site": "cross-site"}, true, 200},
		{"bearer from a tool", http.MethodPost, map[string]string{"Authorization": "Bearer " + adminTestToken}, false, 200},
		{"wrong bearer beside a good cookie", http.MethodPost, map[string]string{"Authorization": "Bearer nope", "Origin": srv.URL}, true, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cookie := c
			if !tc.cookie {
				cookie = nil
			}
			a := adminDo(t, srv, tc.method, "/admin/river/api/jobs/retry", nil, tc.header, cookie)
			if a.status != tc.want {
				t.Fatalf("%s: %d %s, want %d", tc.method, a.status, a.body, tc.want)
			}
			if tc.want == 200 && a.body != "mounted "+tc.method+" /admin/river/api/jobs/retry" {
				t.Fatalf("body %q", a.body)
			}
		})
	}
	t.Run("login from another site", func(t *testing.T) {
		form := url.Values{"token": {adminTestToken}}
		a := adminDo(t, srv, http.MethodPost, "/admin/login", strings.NewReader(form.Encode()), map[string]string{
			"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example",
		}, nil)
		if a.status != http.StatusForbidden || a.cookie != nil {
			t.Fatalf("cross-site login: %d cookie %v", a.status, a.cookie)
		}
	})
}

func TestAdminRefusesForgedExpiredAndForeignSessions(t *testing.T) {
	t.Parallel()
	srv := startAdmin(t, adminTestToken, false)
	future := time.Now().Add(time.Hour)
	good := sessionFor(adminTestToken, future)
	if a := adminDo(t, srv, http.MethodGet, "/admin/river/", nil, nil, good); a.status != 200 {
		t.Fatalf("a session made as documented: %d %s", a.status, a.body)
	}
	tampered := *good
	tampered.Value = strings.Replace(good.Value, strconv.FormatInt(future.Unix(), 10), strconv.FormatInt(future.Add(240*time.Hour).Unix(), 10), 1)
	for name, c := range map[string]*http.Cookie{
		"expired":             sessionFor(adminTestToken, time.Now().Add(-time.Second)),
		"another token's":     sessionFor("the-previous-admin-token", future),
		"expiry pushed later": &tampered,
		"the token itself":    {Name: admin.SessionCookie, Value: adminTestToken},
		"garbage":             {Name: admin.SessionCookie, Value: "v1.x.y"},
	} {
		if a := adminDo(t, srv, http.MethodGet, "/admin/river/", nil, nil, c); a.status != http.StatusUnauthorized {
			t.Errorf("%s session: %d, want 401", name, a.status)
		}
	}
	// A browser's page load gets a 401 page that links to the form; other
	// clients get problem+json.
	a := adminDo(t, srv, http.MethodGet, "/admin/river/jobs", nil, map[string]string{"Accept": "text/html,*/*"}, nil)
	if a.status != http.StatusUnauthorized || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(a.body, `value="/admin/river/jobs"`) {
		t.Fatalf("browser without a session: %d %s %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	if a := adminDo(t, srv, http.MethodGet, "/admin/river/jobs", nil, nil, nil); a.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("tool without a token: %s", a.header.Get("Content-Type"))
	}
}

func TestAdminLoginNeverRedirectsOffSite(t *testing.T) {
	t.Parallel()
	srv := startAdmin(t, adminTestToken, false)
	for next, want := range map[string]string{
		"":                                  "/admin/river/",
		"/admin/river/queues":               "/admin/river/queues",
		"https://evil.example/":             "/admin/river/",
		"//evil.example/x":                  "/admin/river/",
		"/\\evil.example":                   "/admin/river/",
		"javascript:alert(1)":               "/admin/river/",
		"/admin/login":                      "/admin/river/",
		"/admin/river/jobs?state=discarded": "/admin/river/jobs?state=discarded",
	} {
		if a := login(t, srv, adminTestToken, next); a.status != http.StatusSeeOther || a.header.Get("Location") != want {
			t.Errorf("next %q: %d Location %q, want %q", next, a.status, a.header.Get("Location"), want)
		}
	}
}

func TestAdminWithoutATokenNeedsNoLogin(t *testing.T) {
	t.Parallel()
	srv := startAdmin(t, "", false)
	if a := adminDo(t, srv, http.MethodGet, "/admin/river/", nil, nil, nil); a.status != 200 {
		t.Fatalf("GET /admin/river/: %d", a.status)
	}
	if a := adminDo(t, srv, http.MethodGet, "/admin/login?next=/admin/river/queues", nil, nil, nil); a.status != http.StatusSeeOther ||
		a.header.Get("Location") != "/admin/river/queues" || a.cookie != nil {
		t.Fatalf("GET /admin/login: %d %q", a.status, a.header.Get("Location"))
	}
}
