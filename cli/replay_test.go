package cli

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

func TestForwardReplayResendsWithTheOriginalWebhookIDs(t *testing.T) {
	t.Parallel()
	rc, url := newForwardReceiver(t)
	env := forwardEnv(t, url)
	cfg, _, err := loadConfig("paylock worker", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	mln := testkit.Listen(t)
	testkit.Run(t, "worker", func(ctx context.Context) error { return runWorker(ctx, cfg, slog.New(slog.DiscardHandler), mln) })

	id1, id2 := store.PaymentForwardID("payments", "tx-r1"), store.PaymentForwardID("payments", "tx-r2")
	for _, tx := range []string{"tx-r1", "tx-r2"} {
		if _, err := st.Payments().RecordPaymentForwarded(ctx, store.Payment{TransactionID: tx, Amount: 100, Currency: "EUR",
			Payload: []byte(`{"id":"` + tx + `"}`)}, forward.DefaultDestination); err != nil {
			t.Fatal(err)
		}
	}
	completed := func() bool {
		jobs, err := st.Outbox().ForwardJobs(ctx, store.ForwardJobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.State != "completed" {
				return false
			}
		}
		return len(jobs) == 2
	}
	testkit.WaitFor(t, 15*time.Second, "the first forwards", completed)

	code, out, errOut := runCLI(env, "forward", "replay", "--source", "payments", "--since", "1h", "--dry-run")
	if code != 0 || !strings.Contains(out, "would replay 2 payments") || !strings.Contains(out, "2 forward jobs run again") {
		t.Fatalf("replay --dry-run: exit %d, %q %q", code, out, errOut)
	}
	time.Sleep(300 * time.Millisecond) // room for a forward that should not exist
	if n := idCounts(rc); n[id1] != 1 || n[id2] != 1 {
		t.Fatalf("after the dry run the receiver saw %v, want each id once", n)
	}

	code, out, errOut = runCLI(env, "forward", "replay", "--source=payments", "--transaction", "tx-r1")
	if code != 0 || !strings.Contains(out, "replayed 1 payments") {
		t.Fatalf("replay --transaction: exit %d, %q %q", code, out, errOut)
	}
	testkit.WaitFor(t, 15*time.Second, "tx-r1's replay", func() bool { return idCounts(rc)[id1] == 2 })
	testkit.WaitFor(t, 15*time.Second, "the replayed job completed", completed)
	if n := idCounts(rc); n[id2] != 1 {
		t.Fatalf("--transaction tx-r1 also sent tx-r2: %v", n)
	}

	code, out, errOut = runCLI(env, "forward", "replay", "--source", "payments", "--since", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	if code != 0 || !strings.Contains(out, "replayed 2 payments") {
		t.Fatalf("replay --since: exit %d, %q %q", code, out, errOut)
	}
	testkit.WaitFor(t, 15*time.Second, "the window's replay", func() bool { n := idCounts(rc); return n[id1] == 3 && n[id2] == 2 })
	if types, bad := received(rc); bad != 0 || len(types) != 5 || types[4] != "payment.recorded" {
		t.Errorf("deliveries %v, %d unverified; want five payment.recorded", types, bad)
	}
}

func TestForwardReplayRefusesBadArguments(t *testing.T) {
	t.Parallel()
	env := forwardEnv(t, "http://127.0.0.1:1/")
	for _, args := range [][]string{
		{"--since", "1h"},        // no source
		{"--source", "payments"}, // no window
		{"--source", "payments", "--since", "yesterday"},
		{"--source", "payments", "--since", "1h", "--until", "2h"},
		{"--source", "nope", "--since", "1h"},
		{"--source", "payments", "--since"},
	} {
		code, _, errOut := runCLI(env, append([]string{"forward", "replay"}, args...)...)
		if code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, %q; want 2 and a message", args, code, errOut)
		}
	}
	env["PAYLOCK_FORWARD_URL"], env["PAYLOCK_FORWARD_SECRETS"] = "", ""
	if code, _, errOut := runCLI(env, "forward", "replay", "--source", "payments", "--since", "1h"); code != 2 || !strings.Contains(errOut, "forwards nothing") {
		t.Errorf("without a forward URL: exit %d, %q", code, errOut)
	}
}

func TestParseReplayTime(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"72h":                  now.Add(-72 * time.Hour),
		"90m":                  now.Add(-90 * time.Minute),
		"2026-11-01T00:00:00Z": time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
	} {
		got, err := parseReplayTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1h", "2026-11-01", "soon"} {
		if _, err := parseReplayTime(in, now); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
