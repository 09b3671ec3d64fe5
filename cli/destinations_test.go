package cli

import (
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/source"
	"github.com/paylock/paylock/store"
)

var ledgerSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("ledger-forward-secret-0123456789"))

// routedFile is the example: two destinations, a source
// forwarding to both.
const routedFile = `destinations:
  ledger:
    url: https://ledger.internal/hooks
    secrets_env: LEDGER_FORWARD_SECRETS
    types: ["payment.*"]
    filter: 'data.amount >= 1000'
    retry: [1s, 10s, 1m, 10m]
    max_attempts: 20
    timeout: 10s
    concurrency: 8
    rate: 50
    headers: {X-Api-Key: {env: LEDGER_API_KEY}}
  analytics:
    url: nats://127.0.0.1:4222/payments
sources:
  stripe:
    adapter: stripe
    signature: stripe
    secrets_env: STRIPE_WEBHOOK_SECRETS
    forward_to: [ledger, analytics]
`

// routesOf loads file and env as serve does and routes its sources
// (routeForwards), reading the destinations' variables when withSecrets.
func routesOf(t *testing.T, file string, env map[string]string, withSecrets bool) (forward.Routes, error) {
	t.Helper()
	e := map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "STRIPE_WEBHOOK_SECRETS": stripeSecret}
	for k, v := range env {
		e[k] = v
	}
	path := filepath.Join(t.TempDir(), "sources.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	e["PAYLOCK_SOURCES_FILE"] = path
	cfg, _, err := loadConfig("paylock serve", nil, envMap(e))
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	specs, _, err := loadSources(cfg, envMap(e))
	if err != nil {
		return forward.Routes{}, err
	}
	return routeForwards(cfg, specs, withSecrets)
}

func TestTheSourcesFileDefinesDestinationsAndWhereEachSourceForwards(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LEDGER_FORWARD_SECRETS": ledgerSecret, "LEDGER_API_KEY": "k-123",
		"PAYLOCK_FORWARD_URL": "https://all.internal/paylock", "PAYLOCK_FORWARD_SECRETS": forwardSecret}
	r, err := routesOf(t, routedFile, env, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.ForwardTo["stripe"]; !slices.Equal(got, []string{"ledger", "analytics"}) || r.BySource["stripe"] != "ledger" {
		t.Errorf("stripe forwards to %v (replays to %q)", got, r.BySource["stripe"])
	}
	if got := r.ForwardTo["payments"]; !slices.Equal(got, []string{forward.DefaultDestination}) {
		t.Errorf("payments, without forward_to, forwards to %v; want [default] (PAYLOCK_FORWARD_URL)", got)
	}
	p := r.Policies["ledger"]
	if !slices.Equal(p.Retry, []time.Duration{time.Second, 10 * time.Second, time.Minute, 10 * time.Minute}) ||
		p.MaxAttempts != 20 || p.Timeout != 10*time.Second || len(p.Secrets) != 1 || p.Concurrency != 8 || p.Rate != 50 ||
		p.Headers["X-Api-Key"] != (forward.HeaderValue{Env: "LEDGER_API_KEY", Value: "k-123"}) {
		t.Errorf("ledger's policy %+v", p)
	}
	if !r.Router.Takes("ledger", "payment.refunded", map[string]any{"amount": 1500.0}) ||
		r.Router.Takes("ledger", "payment.recorded", map[string]any{"amount": 999.0}) ||
		!r.Router.Takes("analytics", "disbursement.paid", nil) {
		t.Error("the router does not take what the file says")
	}
	// A process that only enqueues needs none of the variables, and agrees
	// with the worker on every fingerprint.
	enqueuer, err := routesOf(t, routedFile, map[string]string{"PAYLOCK_FORWARD_URL": "https://all.internal/paylock", "PAYLOCK_FORWARD_SECRETS": forwardSecret}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ledger", "analytics", forward.DefaultDestination} {
		if a, b := r.Router.Fingerprint(d), enqueuer.Router.Fingerprint(d); a == "" || a != b {
			t.Errorf("%s: worker's fingerprint %q, enqueuer's %q", d, a, b)
		}
	}
}

func TestBadDestinationsAreRefusedAtStartUp(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LEDGER_FORWARD_SECRETS": ledgerSecret, "LEDGER_API_KEY": "k-123"}
	edit := func(old, new string) string {
		if !strings.Contains(routedFile, old) {
			t.Fatalf("%q is not in the file", old)
		}
		return strings.Replace(routedFile, old, new, 1)
	}
	cases := []struct {
		name  string
		file  string
		env   map[string]string
		want  error  // errors.Is
		field string // in the message
	}{
		{"an unknown destination in forward_to", edit("[ledger, analytics]", "[ledger, ledgr]"), env, forward.ErrUnknownDestination, "forward_to"},
		{"default without PAYLOCK_FORWARD_URL", edit("[ledger, analytics]", "[default]"), env, forward.ErrUnknownDestination, "PAYLOCK_FORWARD_URL"},
		{"a bad type pattern", edit(`["payment.*"]`, `["payments.*"]`), env, forward.ErrTypePattern, "destinations"},
		{"a filter that does not compile", edit(`'data.amount >= 1000'`, `'data.amount >=> 1000'`), env, forward.ErrFilter, "destinations"},
		{"a retry step that is no duration", edit("[1s, 10s, 1m, 10m]", "[1s, soon]"), env, forward.ErrRetry, "destinations.ledger.retry"},
		{"an empty retry", edit("[1s, 10s, 1m, 10m]", "[]"), env, forward.ErrRetry, "destinations.ledger.retry"},
		{"max_attempts of zero", edit("max_attempts: 20", "max_attempts: 0"), env, forward.ErrRetry, "destinations.ledger.max_attempts"},
		{"secrets_env on a broker", edit("    url: nats://127.0.0.1:4222/payments", "    url: nats://127.0.0.1:4222/payments\n    secrets_env: LEDGER_FORWARD_SECRETS"), env, forward.ErrConfig, "destinations.analytics.secrets_env"},
		{"a header's variable unset", routedFile, map[string]string{"LEDGER_FORWARD_SECRETS": ledgerSecret}, errDestinationEnv, "destinations.ledger.headers.X-Api-Key"},
		{"secrets_env unset", routedFile, map[string]string{"LEDGER_API_KEY": "k"}, errDestinationEnv, "destinations.ledger.secrets_env"},
		{"a header paylock sets itself", edit("X-Api-Key", "Webhook-Id"), env, forward.ErrHeader, "destinations"},
		{"an http destination nothing signs", edit("    secrets_env: LEDGER_FORWARD_SECRETS\n", ""), env, nil, "destinations.ledger.url"},
		{"a destination named like a source's forward_url", edit("  analytics:\n", "  stripe2:\n") +
			"  stripe2:\n    adapter: stripe\n    signature: stripe\n    secrets_env: STRIPE2_SECRETS\n    forward_url: https://x.internal/\n",
			mergeEnv(env, map[string]string{"STRIPE2_SECRETS": "whsec_stripe2-test-secret-0123456789", "PAYLOCK_FORWARD_SECRETS": forwardSecret}), forward.ErrDestinationTaken, "destinations.stripe2"},
		{"forward_to with forward_url", edit("    forward_to:", "    forward_url: https://x.internal/\n    forward_to:"), env, nil, "not both"},
		{"concurrency of zero", edit("    concurrency: 8", "    concurrency: 0"), env, forward.ErrConfig, "destinations.ledger.concurrency"},
		{"a rate that is no number", edit("    rate: 50", "    rate: fast"), env, nil, "destinations.ledger.rate"},
		{"an unknown key", edit("    timeout: 10s", "    timeout: 10s\n    timout: 5s"), env, nil, "destinations.ledger.timout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := routesOf(t, c.file, c.env, true)
			if err == nil {
				t.Fatal("accepted")
			}
			var se *source.Error
			if !errors.As(err, &se) || c.want != nil && !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("%v; want a *source.Error wrapping %v naming %s", err, c.want, c.field)
			}
			if strings.Contains(err.Error(), ledgerSecret) || strings.Contains(err.Error(), "k-123") {
				t.Errorf("the error prints a secret: %v", err)
			}
		})
	}
}

func mergeEnv(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// serve routes each payment to the destinations of its source's
// forward_to that take it: the big one only to the destination whose
// filter asks for it, signed with that destination's own secret and
// carrying its header.
func TestServeForwardsEachPaymentToTheDestinationsThatTakeIt(t *testing.T) {
	t.Parallel()
	all, allURL := newForwardReceiver(t)
	big := testkit.StartReceiver(t, testkit.ReceiverConfig{Verifier: testkit.Verifier(t, signature.SchemeStandard, ledgerSecret)})
	file := "destinations:\n  big:\n    url: " + big.URL + "\n    secrets_env: LEDGER_FORWARD_SECRETS\n" +
		"    types: [payment.recorded]\n    filter: 'data.amount >= 1000'\n    retry: [50ms]\n    headers: {X-Api-Key: {env: LEDGER_API_KEY}}\n" +
		"sources:\n  payments:\n    forward_to: [default, big]\n"
	path := filepath.Join(t.TempDir(), "sources.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env := forwardEnv(t, allURL)
	env["PAYLOCK_SOURCES_FILE"], env["LEDGER_FORWARD_SECRETS"], env["LEDGER_API_KEY"] = path, ledgerSecret, "k-123"
	base := startServe(t, env, serveOptions{}).base
	for _, body := range []string{`{"transaction_id":"tx-small","amount":700,"currency":"EUR"}`, `{"transaction_id":"tx-big","amount":1500,"currency":"EUR"}`} {
		res, err := http.Post(base+"/webhooks/payments", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("payment: %d", res.StatusCode)
		}
	}
	testkit.WaitFor(t, 15*time.Second, "the forwards", func() bool { return len(all.Attempts()) == 2 && len(big.Attempts()) == 1 })
	time.Sleep(300 * time.Millisecond) // room for a forward that should not exist
	if n := len(big.Attempts()); n != 1 {
		t.Fatalf("big received %d, want tx-big's only", n)
	}
	a := big.Attempts()[0]
	if a.Err != nil || a.Header.Get("X-Api-Key") != "k-123" || a.Header.Get(signature.HeaderWebhookID) != store.PaymentForwardID("payments", "tx-big") {
		t.Errorf("big got %s (verify: %v, X-Api-Key %q)", a.Header.Get(signature.HeaderWebhookID), a.Err, a.Header.Get("X-Api-Key"))
	}
	if _, bad := received(all); bad != 0 || len(all.Attempts()) != 2 {
		t.Errorf("default: %d forwards, %d unverified; want both payments, verified", len(all.Attempts()), bad)
	}
}

func FuzzDestinations(f *testing.F) {
	f.Add([]byte(routedFile))
	f.Add([]byte("destinations: {a: {url: 'kafka://127.0.0.1:9092/t', types: ['*'], filter: 'type == \"order.paid\"'}}"))
	f.Add([]byte("destinations: {a: {url: 'https://x.internal/', retry: [1s, 0s], max_attempts: -3, headers: {'Bad Name': x}}}"))
	f.Add([]byte("destinations: {a: {url: 'https://x.internal/', secrets_env: LEDGER_FORWARD_SECRETS, headers: {X: {env: NOPE}}}}"))
	f.Add([]byte("destinations: [a, b]"))
	env := envMap(map[string]string{"LEDGER_FORWARD_SECRETS": ledgerSecret, "LEDGER_API_KEY": "k-123"})
	f.Fuzz(func(t *testing.T, data []byte) {
		dests, err := parseDestinations("/etc/paylock/sources.yaml", data, env, true)
		if err != nil {
			var se *source.Error
			msg := err.Error()
			if !errors.As(err, &se) || strings.Contains(msg, "\n") || strings.Contains(msg, strings.TrimPrefix(ledgerSecret, "whsec_")) || strings.Contains(msg, "k-123") {
				t.Fatalf("error %T %q: want one line naming the file, no secret", err, msg)
			}
			return
		}
		for name, d := range dests {
			if err := checkForwardURL(d.URL); err != nil || !destinationName.MatchString(name) {
				t.Fatalf("accepted destination %q with URL %q: %v", name, forward.Redact(d.URL), err)
			}
		}
	})
}

// TestOrderMessagesGoToTheDestinationsWhoseTypesTakeThem: a payment
// source forwarding to a ledger (payment.*) and an order service
// (order.*): the payment's payment.recorded goes to the ledger alone, its
// order's order.paid to the order service alone, and nothing to
// PAYLOCK_FORWARD_URL's default, which no source forwards to.
func TestOrderMessagesGoToTheDestinationsWhoseTypesTakeThem(t *testing.T) {
	t.Parallel()
	all, allURL := newForwardReceiver(t)
	ledger, ledgerURL := newForwardReceiver(t)
	orders, ordersURL := newForwardReceiver(t)
	file := "destinations:\n" +
		"  ledger: {url: " + ledgerURL + ", types: [payment.*], retry: [50ms]}\n" +
		"  orders: {url: " + ordersURL + ", types: [order.*], retry: [50ms]}\n" +
		"sources:\n  payments:\n    forward_to: [ledger, orders]\n"
	path := filepath.Join(t.TempDir(), "sources.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env := forwardEnv(t, allURL)
	env["PAYLOCK_SOURCES_FILE"], env["PAYLOCK_ORDERS_INTERVAL"] = path, "200ms"
	st := paylocktest.OpenStore(t, store.Config{URL: env["DATABASE_URL"]})
	base := startServe(t, env, serveOptions{}).base
	if _, _, err := st.Orders().RegisterOrder(t.Context(), store.OrderRegistration{OrderID: "ord-routed", Amount: 1500, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	res, err := http.Post(base+"/webhooks/payments", "application/json",
		strings.NewReader(`{"transaction_id":"tx-routed","amount":1500,"currency":"EUR","order_id":"ord-routed"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("payment: %d", res.StatusCode)
	}
	testkit.WaitFor(t, 20*time.Second, "the forwards", func() bool {
		return len(ledger.Attempts()) == 1 && len(orders.Attempts()) == 1
	})
	time.Sleep(300 * time.Millisecond) // room for a forward that should not exist
	if got, bad := received(ledger); bad != 0 || !slices.Equal(got, []string{"payment.recorded"}) {
		t.Errorf("ledger got %v (%d unverified), want the payment.recorded alone", got, bad)
	}
	if got, bad := received(orders); bad != 0 || !slices.Equal(got, []string{"order.paid"}) {
		t.Errorf("orders got %v (%d unverified), want the order.paid alone", got, bad)
	}
	if n := len(all.Attempts()); n != 0 {
		t.Errorf("default got %d forwards; no source forwards to it, so neither a payment's nor an order's message goes there", n)
	}
}
