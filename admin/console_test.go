package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

const consoleForwardURL = "https://orders.internal/paylock"

// consoleStore is what the console reads and does: st's payments and
// their forward jobs.
func consoleStore(st *store.Store) admin.ConsoleStore {
	return struct {
		*store.Payments
		*store.Outbox
	}{st.Payments(), st.Outbox()}
}

// startConsole serves an Admin with the console over a migrated store,
// holding a stripe payment with a forward job and a hostile one.
func startConsole(t *testing.T) (*httptest.Server, *store.Store) {
	t.Helper()
	_, st := paylocktest.MigratedSchema(t)
	ctx := context.Background()
	for _, p := range []store.Payment{
		{Source: "stripe", TransactionID: "pi_console_1", Amount: 4200, Currency: "EUR", EventID: "evt_console_1",
			Payload: []byte(`{"id":"pi_console_1","amount":4200,"currency":"eur"}`)},
		{Source: "acme", TransactionID: "tx<script>", Amount: 1, Currency: "USD", EventID: "evt_hostile",
			Payload: []byte(`{"note":"<script>alert(1)</script>","id":"tx<script>"}`)},
	} {
		if _, err := st.Payments().RecordPaymentForwarded(ctx, p, forward.DefaultDestination); err != nil {
			t.Fatal(err)
		}
	}
	h := admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(), Console: consoleStore(st),
		Forwards:     map[string]string{"stripe": forward.DefaultDestination, "acme": forward.DefaultDestination},
		Destinations: forward.Destinations{forward.DefaultDestination: consoleForwardURL}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, st
}

var bearer = map[string]string{"Authorization": "Bearer " + adminTestToken}

// page is bearer asking for HTML, as a browser does.
var page = map[string]string{"Authorization": "Bearer " + adminTestToken, "Accept": "text/html"}

func TestConsoleNeedsTheTokenOrASession(t *testing.T) {
	t.Parallel()
	srv, _ := startConsole(t)
	for _, path := range []string{"/admin/payments", "/admin/payments/stripe/pi_console_1", "/admin/console.css"} {
		if a := adminDo(t, srv, http.MethodGet, path, nil, nil, nil); a.status != http.StatusUnauthorized || strings.Contains(a.body, "pi_console_1") {
			t.Errorf("GET %s without the token: %d", path, a.status)
		}
		a := adminDo(t, srv, http.MethodGet, path, nil, map[string]string{"Accept": "text/html"}, nil)
		if a.status != http.StatusUnauthorized || !strings.Contains(a.body, `action="/admin/login"`) {
			t.Errorf("GET %s from a browser without a session: %d, want 401 and the login form", path, a.status)
		}
		if a := adminDo(t, srv, http.MethodGet, path, nil, page, nil); a.status != http.StatusOK {
			t.Errorf("GET %s with the bearer token: %d", path, a.status)
		}
	}
	l := login(t, srv, adminTestToken, "/admin/payments")
	if l.status != http.StatusSeeOther || l.cookie == nil || l.header.Get("Location") != "/admin/payments" {
		t.Fatalf("login: %d %v", l.status, l.header)
	}
	a := adminDo(t, srv, http.MethodGet, "/admin/payments", nil, nil, l.cookie)
	if a.status != http.StatusOK || !strings.Contains(a.body, "pi_console_1") || strings.Contains(a.body, "<script") {
		t.Fatalf("GET /admin/ with the session: %d", a.status)
	}
	if csp := a.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("CSP %q: want no script allowed", csp)
	}
}

func TestConsoleSearch(t *testing.T) {
	t.Parallel()
	srv, _ := startConsole(t)
	tests := []struct {
		name, query string
		status      int
		want, not   []string
	}{
		{"ByTransactionID", "transaction_id=pi_console_1", 200, []string{`href="/admin/payments/stripe/pi_console_1"`, "4200 EUR", "evt_console_1"}, []string{"evt_hostile"}},
		{"ByEventID", "event_id=evt_hostile", 200, []string{`href="/admin/payments/acme/tx%3Cscript%3E"`, "tx&lt;script&gt;"}, []string{"pi_console_1"}},
		{"BySourceAndRange", "source=stripe&since=1h&until=" + url.QueryEscape("2999-01-01T00:00:00Z"), 200, []string{"pi_console_1"}, []string{"evt_hostile"}},
		{"NoMatch", "transaction_id=nope", 200, []string{"No payment matches."}, []string{"pi_console_1"}},
		{"BadTime", "since=yesterday", 400, []string{"From: want"}, nil},
		{"BadLimit", "limit=0", 400, []string{"Page size"}, nil},
		{"LimitIsBounded", "limit=100000", 200, []string{`value="200"`}, nil},
		{"Everything", "", 200, []string{"pi_console_1", "tx&lt;script&gt;"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := adminDo(t, srv, http.MethodGet, "/admin/payments?"+tc.query, nil, page, nil)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			for _, w := range tc.want {
				if !strings.Contains(a.body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(a.body, n) {
					t.Errorf("page has %q", n)
				}
			}
			if strings.Contains(a.body, "<script") {
				t.Error("page holds an unescaped <script")
			}
		})
	}
}

func TestConsolePaymentPageEscapesAHostilePayload(t *testing.T) {
	t.Parallel()
	srv, _ := startConsole(t)
	a := adminDo(t, srv, http.MethodGet, "/admin/payments/acme/"+url.PathEscape("tx<script>"), nil, page, nil)
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	if strings.Contains(a.body, "<script") {
		t.Fatalf("the page holds an unescaped <script: %s", a.body)
	}
	for _, w := range []string{`&#34;note&#34;: &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;`, "evt_hostile", store.PaymentForwardID("acme", "tx<script>")} {
		if !strings.Contains(a.body, w) {
			t.Errorf("page lacks %q", w)
		}
	}
	if a := adminDo(t, srv, http.MethodGet, "/admin/payments/acme/nope", nil, page, nil); a.status != http.StatusNotFound {
		t.Errorf("an unknown payment: %d, want 404", a.status)
	}
}

func TestConsolePaymentPageShowsItsForwardJobs(t *testing.T) {
	t.Parallel()
	srv, st := startConsole(t)
	jobs, err := st.Outbox().PaymentForwards(context.Background(), "stripe", "pi_console_1")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs %v, %v", jobs, err)
	}
	a := adminDo(t, srv, http.MethodGet, "/admin/payments/stripe/pi_console_1", nil, page, nil)
	for _, w := range []string{`href="/admin/river/jobs/` + strconv.FormatInt(jobs[0].ID, 10) + `"`, "available", "0/25", jobs[0].Args.ID,
		"2026", "&#34;amount&#34;: 4200", consoleForwardURL} {
		if !strings.Contains(a.body, w) {
			t.Errorf("page lacks %q", w)
		}
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestConsolePOSTNeedsTheCSRFToken(t *testing.T) {
	t.Parallel()
	srv, st := startConsole(t)
	l := login(t, srv, adminTestToken, "/admin/payments")
	page := adminDo(t, srv, http.MethodGet, "/admin/payments/stripe/pi_console_1", nil, nil, l.cookie)
	m := csrfField.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("no csrf field on the payment page: %s", page.body)
	}
	other := sessionFor(adminTestToken, time.Now().Add(time.Hour))
	sameOrigin := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}
	replay := "/admin/payments/stripe/pi_console_1/replay"
	tests := []struct {
		name   string
		form   url.Values
		cookie *http.Cookie
		header map[string]string
		status int
	}{
		{"NoToken", url.Values{}, l.cookie, sameOrigin, http.StatusForbidden},
		{"WrongToken", url.Values{"csrf": {"forged"}}, l.cookie, sameOrigin, http.StatusForbidden},
		{"AnotherSessionsToken", url.Values{"csrf": {m[1]}}, other, sameOrigin, http.StatusForbidden},
		{"CrossOrigin", url.Values{"csrf": {m[1]}}, l.cookie, map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"TheSessionsToken", url.Values{"csrf": {m[1]}}, l.cookie, sameOrigin, http.StatusSeeOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := adminDo(t, srv, http.MethodPost, replay, strings.NewReader(tc.form.Encode()), tc.header, tc.cookie)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
		})
	}
	// The refused ones did nothing: the job is still the one available job
	// (a replay of a waiting job leaves it as it is).
	a := adminDo(t, srv, http.MethodGet, "/admin/payments/stripe/pi_console_1?replay=pending", nil, nil, l.cookie)
	if !strings.Contains(a.body, "still waiting") {
		t.Errorf("the replay's result is not shown")
	}
	jobs, err := st.Outbox().PaymentForwards(context.Background(), "stripe", "pi_console_1")
	if err != nil || len(jobs) != 1 || jobs[0].State != "available" {
		t.Fatalf("jobs %+v, %v", jobs, err)
	}
	// A tool with the bearer header needs no CSRF field.
	b := adminDo(t, srv, http.MethodPost, replay, nil, bearer, nil)
	if b.status != http.StatusSeeOther || !strings.HasSuffix(b.header.Get("Location"), "?replay=pending") {
		t.Fatalf("bearer POST: %d %v", b.status, b.header)
	}
}

func TestConsoleShowsAForwardsDestinationWithoutItsCredentials(t *testing.T) {
	t.Parallel()
	_, st := paylocktest.MigratedSchema(t)
	p := store.Payment{Source: "acme", TransactionID: "tx-dest", Amount: 1, Currency: "EUR", Payload: []byte(`{}`)}
	if _, err := st.Payments().RecordPaymentForwarded(context.Background(), p, "acme"); err != nil {
		t.Fatal(err)
	}
	h := admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(), Console: consoleStore(st),
		Forwards:     map[string]string{"acme": "acme"},
		Destinations: forward.Destinations{"acme": "https://paylock:s3cret@acme.internal/hook?token=s3cret"}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	a := adminDo(t, srv, http.MethodGet, "/admin/payments/acme/tx-dest", nil, page, nil)
	if a.status != http.StatusOK || strings.Contains(a.body, "s3cret") {
		t.Fatalf("payment page: %d, credentials shown: %v", a.status, strings.Contains(a.body, "s3cret"))
	}
	if !strings.Contains(a.body, "<code>acme</code> <code>https://paylock:xxxxx@acme.internal/hook?token=xxxxx</code>") {
		t.Errorf("the job's destination is not shown by name and redacted URL: %s", a.body)
	}
}
