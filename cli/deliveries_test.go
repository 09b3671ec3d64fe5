package cli

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
)

// stripeSourceFile writes a sources file with one Stripe-signed source
// "stripe" recording events.
func stripeSourceFile(t *testing.T, path, events string) {
	t.Helper()
	file := `
sources:
  stripe:
    adapter: stripe
    signature: stripe
    secrets_env: STRIPE_WEBHOOK_SECRETS
    events: ` + events + `
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
}

// postStripe posts a Stripe Event to serve's stripe source, signed unless
// unsigned, and returns the status.
func postStripe(t *testing.T, base string, body []byte, unsigned bool) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if !unsigned {
		secrets, err := signature.ParseSecrets(signature.SchemeStripe, stripeSecret)
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range signature.Sign(signature.SchemeStripe, secrets[0], "", time.Now(), body) {
			req.Header[k] = vs
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func stripeCharge(ch string) []byte {
	return []byte(`{"id":"evt_` + ch + `","object":"event","created":1764500000,"type":"charge.succeeded","livemode":false,` +
		`"data":{"object":{"id":"` + ch + `","object":"charge","amount":1500,"currency":"jpy","payment_intent":null}}}`)
}

// TestDeliveriesReplayRecordsWhatTheWidenedSourceNowTakes is issue 21's
// "done when": a source that records only payment_intent.succeeded keeps
// the charges it ignores and the event it refuses, never an unsigned one;
// once widened, a replay records the charges once, a second records
// nothing new, and the refused one stays refused and listed.
func TestDeliveriesReplayRecordsWhatTheWidenedSourceNowTakes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sources.yaml")
	stripeSourceFile(t, path, "[payment_intent.succeeded]")
	dsn, st := paylocktest.MigratedSchema(t)
	env := map[string]string{
		"DATABASE_URL": dsn, "REDIS_URL": testkit.RedisURL(t), "PAYLOCK_LOCK_PREFIX": testkit.Key(t, "") + ":",
		"PAYLOCK_SOURCES_FILE": path, "STRIPE_WEBHOOK_SECRETS": stripeSecret, "PAYLOCK_LOG_LEVEL": "error",
		"PAYLOCK_ADMIN_ADDR": "off",
	}
	s := startServe(t, env, serveOptions{metrics: true})
	for _, ch := range []string{"ch_a", "ch_b", "ch_a"} {
		if code := postStripe(t, s.base, stripeCharge(ch), false); code != http.StatusOK {
			t.Fatalf("charge %s: %d, want 200 (ignored)", ch, code)
		}
	}
	refused := []byte(`{"id":"evt_pi_str","object":"event","created":1764500000,"type":"payment_intent.succeeded","livemode":false,` +
		`"data":{"object":{"id":"pi_str","object":"payment_intent","amount":"2000","amount_received":"2000","currency":"jpy"}}}`)
	if code := postStripe(t, s.base, refused, false); code < 400 || code >= 500 {
		t.Fatalf("a string amount: %d, want a 4xx", code)
	}
	for i := range 25 {
		if code := postStripe(t, s.base, stripeCharge(fmt.Sprint("ch_unsigned_", i)), true); code != http.StatusUnauthorized {
			t.Fatalf("an unsigned delivery: %d, want 401", code)
		}
	}
	m := testkit.Scrape(t, s.metrics+"/metrics")
	for series, want := range map[string]float64{
		`paylock_delivery_log_items{outcome="ignored",source="stripe"}`:  2,
		`paylock_delivery_log_items{outcome="refused",source="stripe"}`:  1,
		`paylock_delivery_log_items{outcome="mismatch",source="stripe"}`: 0,
	} {
		if got, ok := m.Value(series); !ok || got != want {
			t.Errorf("%s = %v (%v), want %v", series, got, ok, want)
		}
	}
	if got := m.Sum("paylock_signature_failures_total", `source="stripe"`); got != 25 {
		t.Errorf("paylock_signature_failures_total{source=stripe} = %v, want the 25 unsigned deliveries", got)
	}
	code, out, errOut := runCLI(env, "deliveries", "list", "--source", "stripe")
	if code != 0 || !strings.Contains(out, "3 deliveries") || strings.Count(out, " ignored ") != 2 || strings.Count(out, " refused ") != 1 ||
		strings.Contains(out, "ch_unsigned") {
		t.Fatalf("deliveries list: exit %d\n%s%s", code, out, errOut)
	}

	stripeSourceFile(t, path, "[payment_intent.succeeded, charge.succeeded]")
	code, out, errOut = runCLI(env, "deliveries", "replay", "--source", "stripe", "--since", "1h", "--dry-run")
	if code != 1 || !strings.Contains(out, "stripe: 2 would record, 0 already recorded, 1 still not recorded") {
		t.Fatalf("replay --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	for round, want := range []string{"2 recorded now, 0 already recorded, 1 still not recorded", "0 recorded now, 2 already recorded, 1 still not recorded"} {
		code, out, errOut = runCLI(env, "deliveries", "replay", "--source", "stripe", "--since", "1h")
		if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "still_refused") {
			t.Fatalf("replay #%d: exit %d, want 1 and %q\n%s%s", round+1, code, want, out, errOut)
		}
	}
	for _, tx := range []string{"ch_a", "ch_b"} {
		if n := testkit.PaymentRows(t, st.Pool(), tx); n != 1 {
			t.Errorf("%d rows of %s, want 1", n, tx)
		}
	}
	code, out, errOut = runCLI(env, "deliveries", "replay", "--source", "stripe", "--since", "1h", "--outcome", "ignored")
	if code != 0 || !strings.Contains(out, "0 recorded now, 2 already recorded, 0 still not recorded") {
		t.Fatalf("replay --outcome ignored: exit %d, want 0\n%s%s", code, out, errOut)
	}
	if code, _, errOut = runCLI(env, "deliveries", "replay", "--source", "stripe", "--id", "999999"); code != 1 || !strings.Contains(errOut, "no ignored or refused delivery 999999") {
		t.Fatalf("replay --id of no kept delivery: exit %d %q, want 1 and why", code, errOut)
	}
	code, out, errOut = runCLI(env, "deliveries", "list", "--outcome", "refused")
	if code != 0 || !strings.Contains(out, "1 deliveries") || !strings.Contains(out, "evt_pi_str") || !strings.Contains(out, "still refused") {
		t.Fatalf("the refused one after the replays: exit %d\n%s%s", code, out, errOut)
	}
	id := strings.Fields(strings.Split(out, "\n")[1])[0]
	code, out, errOut = runCLI(env, "deliveries", "show", id)
	if code != 0 || !strings.Contains(out, `"amount":"2000"`) || !strings.Contains(out, "Content-Type: application/json") ||
		strings.Contains(out, "Stripe-Signature") {
		t.Fatalf("deliveries show %s: exit %d\n%s%s", id, code, out, errOut)
	}
}

func TestDeliveriesCommandsRefuseBadArguments(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/none", "PAYLOCK_ALLOW_UNSIGNED": "true"}
	for _, args := range [][]string{
		{"replay", "--since", "1h"},                                      // no source
		{"replay", "--source", "payments"},                               // no window
		{"replay", "--source", "payments", "--since", "1h", "--id", "3"}, // both
		{"replay", "--source", "payments", "--since", "1h", "--outcome", "mismatch"},
		{"replay", "--source", "nope", "--since", "1h"},
		{"replay", "--source", "payments", "--since", "1h", "--until", "2h"},
		{"list", "--outcome", "lost"},
		{"list", "--dry-run"},
		{"show"},
		{"show", "abc"},
	} {
		code, _, errOut := runCLI(env, append([]string{"deliveries"}, args...)...)
		if code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, %q; want 2 and a message", args, code, errOut)
		}
	}
}

// TestACapOfZeroKeepsNoDeliveryAndRedactionIsConfigured: with
// PAYLOCK_DELIVERY_LOG_CAP=0 serve keeps nothing in the delivery log (the
// store's default cap does not take over), and PAYLOCK_DELIVERY_LOG_REDACT
// reaches the handler of a serve that keeps; a bad pointer is refused at
// start-up.
func TestACapOfZeroKeepsNoDeliveryAndRedactionIsConfigured(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sources.yaml")
	stripeSourceFile(t, path, "[payment_intent.succeeded]")
	dsn, st := paylocktest.MigratedSchema(t)
	env := map[string]string{
		"DATABASE_URL": dsn, "REDIS_URL": testkit.RedisURL(t), "PAYLOCK_LOCK_PREFIX": testkit.Key(t, "") + ":",
		"PAYLOCK_SOURCES_FILE": path, "STRIPE_WEBHOOK_SECRETS": stripeSecret, "PAYLOCK_LOG_LEVEL": "error",
		"PAYLOCK_ADMIN_ADDR": "off", "PAYLOCK_DELIVERY_LOG_CAP": "0",
	}
	s := startServe(t, env, serveOptions{})
	if code := postStripe(t, s.base, stripeCharge("ch_none"), false); code != http.StatusOK {
		t.Fatalf("an ignored charge: %d, want 200", code)
	}
	if n := testkit.Count(t, st.Pool(), `SELECT count(*) FROM delivery_log`); n != 0 {
		t.Fatalf("%d deliveries kept with PAYLOCK_DELIVERY_LOG_CAP=0; want none", n)
	}

	env["PAYLOCK_DELIVERY_LOG_CAP"] = "10"
	env["PAYLOCK_DELIVERY_LOG_REDACT"] = "stripe:/data/object/currency, /data/object/amount"
	s = startServe(t, env, serveOptions{})
	if code := postStripe(t, s.base, stripeCharge("ch_kept"), false); code != http.StatusOK {
		t.Fatalf("an ignored charge: %d, want 200", code)
	}
	if n := testkit.Count(t, st.Pool(), `SELECT count(*) FROM delivery_log WHERE position('"currency":"[redacted]"' in convert_from(body, 'UTF8')) > 0
		AND position('"amount":"[redacted]"' in convert_from(body, 'UTF8')) > 0`); n != 1 {
		t.Fatalf("%d kept deliveries with both pointers redacted; want the charge", n)
	}
	env["PAYLOCK_DELIVERY_LOG_REDACT"] = "data/object"
	if code, _, errOut := runCLI(env, "deliveries", "list"); code != 2 || !strings.Contains(errOut, "PAYLOCK_DELIVERY_LOG_REDACT") {
		t.Fatalf("a pointer without /: exit %d %q; want 2 naming the variable", code, errOut)
	}
}
