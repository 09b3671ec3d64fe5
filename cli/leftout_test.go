package cli

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stripeLifecycle are the Stripe event types of a payment's lifecycle, as
// its documentation (provider/stripe's Keys) lists them.
var stripeLifecycle = []string{"payment_intent.amount_capturable_updated", "charge.captured",
	"payment_intent.payment_failed", "payment_intent.canceled", "charge.expired", "charge.refunded",
	"refund.created", "refund.updated", "refund.failed", "charge.refund.updated",
	"charge.dispute.created", "charge.dispute.closed"}

// leftOutWarnings serves the sources of file with handlerSources and
// returns the left_out of each warning about left-out types, by source.
func leftOutWarnings(t *testing.T, file string) map[string][]string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sources.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env := envMap(map[string]string{"PAYLOCK_SOURCES_FILE": path, "STRIPE_A": stripeSecret,
		"STRIPE_B": stripeSecret + "b", "STRIPE_C": stripeSecret + "c", "STRIPE_D": stripeSecret + "d"})
	cfg, _, err := loadConfig("paylock serve", nil, env)
	if err != nil {
		t.Fatal(err)
	}
	cfg.getenv = env
	var buf bytes.Buffer
	if _, _, err := handlerSources(cfg, slog.New(slog.NewJSONHandler(&buf, nil))); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var l struct {
			Level   string   `json:"level"`
			Msg     string   `json:"msg"`
			Source  string   `json:"source"`
			LeftOut []string `json:"left_out"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if l.LeftOut == nil {
			continue
		}
		if l.Level != "WARN" {
			t.Errorf("%s: want WARN", line)
		}
		if _, twice := out[l.Source]; twice {
			t.Errorf("source %s warned twice", l.Source)
		}
		out[l.Source] = l.LeftOut
	}
	return out
}

func TestSourceLeavingOutLifecycleTypesWarnsOnceNamingThem(t *testing.T) {
	t.Parallel()
	all, _ := json.Marshal(append([]string{"payment_intent.succeeded", "charge.succeeded"}, stripeLifecycle...))
	got := leftOutWarnings(t, `
sources:
  narrow: {adapter: stripe, signature: stripe, secrets_env: STRIPE_A, events: [payment_intent.succeeded]}
  refunds: {adapter: stripe, signature: stripe, secrets_env: STRIPE_B, events: [payment_intent.succeeded, charge.refunded, charge.dispute.created]}
  default: {adapter: stripe, signature: stripe, secrets_env: STRIPE_C}
  every: {adapter: stripe, signature: stripe, secrets_env: STRIPE_D, events: `+string(all)+`}
`)
	if want := stripeLifecycle; !slices.Equal(got["narrow"], want) {
		t.Errorf("narrow left out %q, want %q", got["narrow"], want)
	}
	want := slices.DeleteFunc(slices.Clone(stripeLifecycle), func(s string) bool { return s == "charge.refunded" || s == "charge.dispute.created" })
	if !slices.Equal(got["refunds"], want) {
		t.Errorf("refunds left out %q, want %q", got["refunds"], want)
	}
	for _, s := range []string{"default", "every"} {
		if l, ok := got[s]; ok {
			t.Errorf("source %s records every type and warned: %q", s, l)
		}
	}
	if len(got) != 2 {
		t.Errorf("warnings for %d sources, want 2: %v", len(got), got)
	}
}
