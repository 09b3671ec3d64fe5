package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// TestDeliveriesReplayNeedsNoWebhookSecret: a replay skips the signature
// check, so it runs with the database and the sources file alone; the
// source's STRIPE_WEBHOOK_SECRETS, which serve needs, is not set.
func TestDeliveriesReplayNeedsNoWebhookSecret(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sources.yaml")
	stripeSourceFile(t, path, "[payment_intent.succeeded, charge.succeeded]")
	dsn, st := paylocktest.MigratedSchema(t)
	ch := fmt.Sprintf("ch_nosecret_%d", time.Now().UnixNano()) // the lock keys are under the default prefix
	if _, err := st.Deliveries().Keep(context.Background(), store.Delivery{Source: "stripe", EventID: "evt_" + ch,
		Outcome: store.DeliveryIgnored, Status: 200, Body: stripeCharge(ch)}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": dsn, "PAYLOCK_SOURCES_FILE": path}

	code, out, errOut := runCLI(env, "deliveries", "replay", "--source", "stripe", "--since", "1h", "--dry-run")
	if code != 0 || !strings.Contains(out, "stripe: 1 would record") || errOut != "" {
		t.Fatalf("replay --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(env, "deliveries", "replay", "--source", "stripe", "--since", "1h")
	if code != 0 || !strings.Contains(out, "stripe: 1 recorded now") { // stderr has the pipeline's log line
		t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
	}
	if n := testkit.PaymentRows(t, st.Pool(), ch); n != 1 {
		t.Errorf("%d rows of %s, want 1", n, ch)
	}
}

// TestForwardReplayDryRunNeedsOnlyTheDatabase: forward replay --dry-run
// counts with DATABASE_URL alone (no forward URL, no signing secret, no
// source secret); a real replay still refuses without a destination or
// without the secrets to sign it, naming the variable.
func TestForwardReplayDryRunNeedsOnlyTheDatabase(t *testing.T) {
	t.Parallel()
	dsn, st := paylocktest.MigratedSchema(t)
	if _, err := st.Payments().RecordPaymentForwarded(context.Background(), store.Payment{TransactionID: "tx-min", Amount: 100, Currency: "EUR",
		Payload: []byte(`{"id":"tx-min"}`)}, forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": dsn}
	code, out, errOut := runCLI(env, "forward", "replay", "--source", "payments", "--since", "1h", "--dry-run")
	if code != 0 || !strings.Contains(out, "would replay 1 payments") || errOut != "" {
		t.Fatalf("replay --dry-run: exit %d\n%s%s", code, out, errOut)
	}

	code, _, errOut = runCLI(env, "forward", "replay", "--source", "payments", "--since", "1h")
	if code != 2 || !strings.Contains(errOut, "PAYLOCK_FORWARD_URL") {
		t.Errorf("replay without a destination: exit %d %q; want 2 naming PAYLOCK_FORWARD_URL", code, errOut)
	}
	env["PAYLOCK_FORWARD_URL"] = "http://127.0.0.1:1/hook"
	code, _, errOut = runCLI(env, "forward", "replay", "--source", "payments", "--since", "1h")
	if code != 2 || !strings.Contains(errOut, "PAYLOCK_FORWARD_SECRETS") {
		t.Errorf("replay to an http URL without secrets: exit %d %q; want 2 naming PAYLOCK_FORWARD_SECRETS", code, errOut)
	}

	// A source's own http forward_url: the dry run needs no secret, the
	// real replay does.
	path := filepath.Join(t.TempDir(), "sources.yaml")
	file := "sources:\n  payments:\n    forward_url: http://127.0.0.1:1/payments\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env = map[string]string{"DATABASE_URL": dsn, "PAYLOCK_SOURCES_FILE": path}
	if code, out, errOut = runCLI(env, "forward", "replay", "--source", "payments", "--since", "1h", "--dry-run"); code != 0 || errOut != "" {
		t.Errorf("replay --dry-run of a source with its own forward_url: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCLI(env, "forward", "replay", "--source", "payments", "--since", "1h")
	if code != 2 || !strings.Contains(errOut, "PAYLOCK_FORWARD_SECRETS") {
		t.Errorf("replay to the source's http forward_url without secrets: exit %d %q; want 2 naming PAYLOCK_FORWARD_SECRETS", code, errOut)
	}
}

// TestDeliveriesReplayThatQueuesForwardsNeedsTheForwardSecrets: the
// source's http forward_url needs PAYLOCK_FORWARD_SECRETS for a replay
// that records (its forwards are queued), not for a dry run.
func TestDeliveriesReplayThatQueuesForwardsNeedsTheForwardSecrets(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sources.yaml")
	file := "sources:\n  stripe:\n    adapter: stripe\n    signature: stripe\n    secrets_env: STRIPE_WEBHOOK_SECRETS\n" +
		"    events: [charge.succeeded]\n    forward_url: http://127.0.0.1:1/stripe\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn, _ := paylocktest.MigratedSchema(t)
	env := map[string]string{"DATABASE_URL": dsn, "PAYLOCK_SOURCES_FILE": path}
	if code, out, errOut := runCLI(env, "deliveries", "replay", "--source", "stripe", "--since", "1h", "--dry-run"); code != 0 {
		t.Errorf("replay --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(env, "deliveries", "replay", "--source", "stripe", "--since", "1h"); code != 2 || !strings.Contains(errOut, "PAYLOCK_FORWARD_SECRETS") {
		t.Errorf("replay: exit %d %q; want 2 naming PAYLOCK_FORWARD_SECRETS", code, errOut)
	}
}
