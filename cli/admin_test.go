package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/riverdemo"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/store"
)

// TestAdminServesRiverUIBehindTheTokenOrASession runs serve with an admin
// token, puts River jobs in each state (one discarded) and reads them
// through River UI on the admin listener: with the bearer header, and from
// a "browser" that logged in at /admin/login.
func TestAdminServesRiverUIBehindTheTokenOrASession(t *testing.T) {
	const token = "admin-token-of-the-river-ui-test"
	dsn := testkit.Schema(t)
	env := map[string]string{
		"DATABASE_URL":           dsn,
		"REDIS_URL":              testkit.RedisURL(t),
		"PAYLOCK_LOCK_PREFIX":    testkit.Key(t, "") + ":",
		"PAYLOCK_ALLOW_UNSIGNED": "true",
		"PAYLOCK_ADMIN_TOKEN":    token,
	}
	admin := startServe(t, env, serveOptions{metrics: true, admin: true}).admin
	ctx := context.Background()

	st, err := store.Open(ctx, store.Config{URL: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	jobs, err := riverdemo.Seed(sctx, st)
	scancel()
	if err != nil {
		t.Fatal(err)
	}

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, body io.Reader, header map[string]string, cookie *http.Cookie) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, admin+path, body)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	bearer := map[string]string{"Authorization": "Bearer " + token}
	html := map[string]string{"Accept": "text/html"}

	// No token, no cookie: 401 everywhere under /admin/river/.
	for _, path := range []string{"/admin/river/", "/admin/river/jobs?state=discarded", "/admin/river/api/jobs?state=discarded", "/admin/river/api/states"} {
		if res, _ := do(http.MethodGet, path, nil, html, nil); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, res.StatusCode)
		}
		if res, _ := do(http.MethodGet, path, nil, map[string]string{"Authorization": "Bearer " + token + "x"}, nil); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, res.StatusCode)
		}
	}

	// With the bearer: River UI's page, its script, its API.
	res, index := do(http.MethodGet, "/admin/river/", nil, map[string]string{"Authorization": "Bearer " + token, "Accept": "text/html"}, nil)
	if res.StatusCode != 200 || !strings.Contains(index, "<title>River</title>") {
		t.Fatalf("River UI index: %d %.300s", res.StatusCode, index)
	}
	script := regexp.MustCompile(`src="(/admin/river/assets/[^"]+\.js)"`).FindStringSubmatch(index)
	if script == nil {
		t.Fatalf("River UI index names no script under /admin/river/assets/: %.2000s", index)
	}
	if res, _ := do(http.MethodGet, script[1], nil, bearer, nil); res.StatusCode != 200 {
		t.Fatalf("GET %s: %d", script[1], res.StatusCode)
	}
	discarded := func(cookie *http.Cookie, header map[string]string) []int64 {
		t.Helper()
		res, body := do(http.MethodGet, "/admin/river/api/jobs?state=discarded", nil, header, cookie)
		if res.StatusCode != 200 {
			t.Fatalf("GET /admin/river/api/jobs?state=discarded: %d %s", res.StatusCode, body)
		}
		var list struct {
			Data []struct {
				ID    json.Number `json:"id"`
				Kind  string      `json:"kind"`
				State string      `json:"state"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatalf("job list: %v: %s", err, body)
		}
		var ids []int64
		for _, j := range list.Data {
			id, _ := strconv.ParseInt(j.ID.String(), 10, 64)
			if j.State != "discarded" || j.Kind != (riverdemo.NotifyArgs{}).Kind() {
				t.Errorf("discarded list holds %s job %d of kind %s", j.State, id, j.Kind)
			}
			ids = append(ids, id)
		}
		return ids
	}
	if got := discarded(nil, bearer); len(got) != 1 || got[0] != jobs.Discarded[0] {
		t.Fatalf("discarded jobs with the bearer: %v, want %v", got, jobs.Discarded)
	}

	// A browser: log in, then the same pages and API with the cookie only.
	form := url.Values{"token": {token}, "next": {"/admin/river/jobs?state=discarded"}}
	res, _ = do(http.MethodPost, "/admin/login", strings.NewReader(form.Encode()), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Origin": admin, "Sec-Fetch-Site": "same-origin"}, nil)
	var session *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "paylock_admin_session" {
			session = c
		}
	}
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin/river/jobs?state=discarded" || session == nil {
		t.Fatalf("login: %d Location %q cookie %v", res.StatusCode, res.Header.Get("Location"), session)
	}
	if !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Secure {
		t.Errorf("session cookie over plain HTTP: HttpOnly %v SameSite %v Secure %v", session.HttpOnly, session.SameSite, session.Secure)
	}
	if res, page := do(http.MethodGet, "/admin/river/jobs?state=discarded", nil, html, session); res.StatusCode != 200 || !strings.Contains(page, "<title>River</title>") {
		t.Fatalf("River UI page with the session: %d", res.StatusCode)
	}
	if got := discarded(session, nil); len(got) != 1 {
		t.Fatalf("discarded jobs with the session: %v", got)
	}

	// Retrying the discarded job from the page works; the same request
	// from another site is refused and changes nothing.
	retry := `{"ids":["` + strconv.FormatInt(jobs.Discarded[0], 10) + `"]}`
	res, body := do(http.MethodPost, "/admin/river/api/jobs/retry", strings.NewReader(retry), map[string]string{
		"Content-Type": "application/json", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, session)
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site retry with the session: %d %s", res.StatusCode, body)
	}
	if got := discarded(session, nil); len(got) != 1 {
		t.Fatalf("after the refused retry, discarded jobs: %v", got)
	}
	res, body = do(http.MethodPost, "/admin/river/api/jobs/retry", strings.NewReader(retry), map[string]string{
		"Content-Type": "application/json", "Origin": admin, "Sec-Fetch-Site": "same-origin"}, session)
	if res.StatusCode != 200 {
		t.Fatalf("same-origin retry with the session: %d %s", res.StatusCode, body)
	}
	if got := discarded(session, nil); len(got) != 0 {
		t.Fatalf("after the retry, discarded jobs: %v", got)
	}
}
