package paypal

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/storetest"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

// verifierWith is a verifier for webhookID of a source whose settings are
// settings (JSON).
func verifierWith(t testing.TB, webhookID, settings string) *signature.Verifier {
	t.Helper()
	var s map[string]json.RawMessage
	if err := json.Unmarshal([]byte(settings), &s); err != nil {
		t.Fatal(err)
	}
	secrets, err := signature.ParseSecrets(Scheme, webhookID)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifierWith(Scheme, secrets, 0, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// countingTransport counts the requests that reach it.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func TestNewRefusesACertHostsThatIsNotAListOfHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw string
		ok  bool
	}{
		{`["api.paypal.com"]`, true},
		{`["API.PayPal.com", "api-m.paypal.com"]`, true},
		{`["localhost:8443"]`, true},
		{`["127.0.0.1:443"]`, true},
		{`[]`, false},
		{`"api.paypal.com"`, false},
		{`[1]`, false},
		{`["https://api.paypal.com"]`, false},
		{`["api.paypal.com/v1"]`, false},
		{`["user@api.paypal.com"]`, false},
		{`["api.paypal.com:0"]`, false},
		{`["api.paypal.com:99999"]`, false},
		{`["api.paypal.com:"]`, false},
		{`[""]`, false},
		{`["-bad.paypal.com"]`, false},
		{`["api.paypal.com?x=1"]`, false},
	} {
		_, err := Provider{}.New(provider.Config{Source: "paypal", Settings: provider.Settings{KeyCertHosts: json.RawMessage(tc.raw)}})
		var se *provider.SettingError
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v, want accepted", tc.raw, err)
		case !tc.ok && (!errors.As(err, &se) || se.Key != KeyCertHosts):
			t.Errorf("%s: %v, want a *provider.SettingError naming %s", tc.raw, err, KeyCertHosts)
		}
		if _, _, err := configure(map[string]json.RawMessage{KeyCertHosts: json.RawMessage(tc.raw)}); (err == nil) != tc.ok {
			t.Errorf("configure(%s): %v, want ok %v", tc.raw, err, tc.ok)
		}
	}
	if _, err := (Provider{}).New(provider.Config{Source: "paypal", Settings: provider.Settings{"hosts": json.RawMessage(`[]`)}}); err == nil {
		t.Error("an unknown key was accepted")
	}
}

// TestASourcesCertHostsAreItsOnlyAllowlist: a verifier whose source names
// only the test host verifies the sample; the same delivery with a cert URL
// on one of PayPal's default hosts is refused before any request, Verify
// and Precheck alike; a source naming another host refuses the test host
// (which the package's default allowlist holds) without a request to it.
func TestASourcesCertHostsAreItsOnlyAllowlist(t *testing.T) {
	t.Parallel()
	body := sample("payment_capture_completed.json")
	srv, _ := url.Parse(pki.srv.URL)
	// localhost too: a list of its own, whose fetcher the pipeline test's
	// counting does not touch.
	pinned := verifierWith(t, sampleWebhookID, `{"cert_hosts": ["`+srv.Host+`", "localhost"]}`)
	now := time.Now()
	if res, err := pinned.Verify(signed(t, sampleWebhookID, now, body, ""), body); err != nil || res.SecretIndex != 0 {
		t.Fatalf("the sample from the named host: %v, %v", res, err)
	}
	onPayPal := signed(t, sampleWebhookID, now, body, "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-1d93a270")
	if _, err := pinned.Verify(onPayPal, body); !errors.Is(err, ErrCertURL) || !errors.Is(err, signature.ErrNoMatch) {
		t.Errorf("a cert URL on PayPal's host: %v, want ErrCertURL and signature.ErrNoMatch", err)
	}
	if err := pinned.Precheck(onPayPal); !errors.Is(err, ErrCertURL) {
		t.Errorf("Precheck of a cert URL on PayPal's host: %v, want ErrCertURL", err)
	}
	off, _ := url.Parse(pki.offlist.URL)
	elsewhere := verifierWith(t, sampleWebhookID, `{"cert_hosts": ["`+off.Host+`"]}`)
	const path = "/v1/notifications/certs/CERT-configured-elsewhere"
	if _, err := elsewhere.Verify(signed(t, sampleWebhookID, now, body, pki.srv.URL+path), body); !errors.Is(err, ErrCertURL) {
		t.Errorf("the package's default test host, not named: %v, want ErrCertURL", err)
	}
	if n := hits(path); n != 0 {
		t.Errorf("%d requests reached a host the source does not name, want none", n)
	}
	if res, err := verifierWith(t, sampleWebhookID, `{}`).Verify(signed(t, sampleWebhookID, now, body, ""), body); err != nil || res.SecretIndex != 0 {
		t.Errorf("a source without cert_hosts: %v, %v; want verified as before", res, err)
	}
}

// TestTheWebhookRefusesACertURLOffItsSourcesCertHosts: through the real
// pipeline, a source whose cert_hosts names only the test host records
// the authentic sample, and answers the same delivery naming a cert URL
// on PayPal's own host 401 with no request made by its fetcher; a source
// without cert_hosts records as before.
func TestTheWebhookRefusesACertURLOffItsSourcesCertHosts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, st := storetest.MigratedSchema(t)
	srvURL, _ := url.Parse(pki.srv.URL)
	// The fetcher of this host list (no other test names the same list)
	// counts the requests it makes.
	pinned := verifierWith(t, sampleWebhookID, `{"cert_hosts": ["`+srvURL.Host+`"]}`)
	f := fetcherFor([]string{srvURL.Host})
	var pinnedRequests atomic.Int64
	f.client.Transport = countingTransport{next: f.client.Transport, n: &pinnedRequests}

	rdb, prefix := testkit.Redis(t), testkit.Key(t, "")+":"
	h, err := handler.New(handler.Config{LockPrefix: prefix, Logger: testkit.Logger(), Sources: []handler.Source{
		{Name: "pinned", Provider: "paypal", Verifier: pinned,
			Settings: provider.Settings{KeyCertHosts: json.RawMessage(`["` + srvURL.Host + `"]`)}},
		{Name: "plain", Provider: "paypal", Verifier: verifier(t, sampleWebhookID)},
	}}, lock.New(rdb), st.Payments())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(source string, hdr http.Header, body []byte) int {
		return testkit.PostJSON(t, ctx, srv.URL+"/webhooks/"+source, hdr, body)
	}
	rows := func() int {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM payments) + (SELECT count(*) FROM payment_events)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	body := sample("payment_capture_completed.json")
	now := time.Now()
	onPayPal := signed(t, sampleWebhookID, now, body, "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-1d93a270")
	if code := post("pinned", onPayPal, body); code != http.StatusUnauthorized {
		t.Fatalf("a cert URL on PayPal's host, not in cert_hosts: %d, want 401", code)
	}
	if n := pinnedRequests.Load(); n != 0 {
		t.Fatalf("%d requests made for a cert URL off cert_hosts, want none", n)
	}
	if n := rows(); n != 0 {
		t.Fatalf("%d rows written for a refused delivery", n)
	}
	if code := post("pinned", signed(t, sampleWebhookID, now, body, ""), body); code != http.StatusOK {
		t.Fatalf("the authentic sample from the named host: %d, want 200", code)
	}
	if code := post("plain", signed(t, sampleWebhookID, now, body, ""), body); code != http.StatusOK {
		t.Fatalf("a source without cert_hosts: %d, want 200", code)
	}
	if n := rows(); n != 2 {
		t.Fatalf("%d rows, want the sample recorded once per source", n)
	}
}
