package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

func TestPaylockWorkerServesMetricsAndCountsItsAttempts(t *testing.T) {
	t.Parallel()
	env, fake := lendingEnv(t)
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	cfg, _, err := loadConfig("paylock worker", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	mln := testkit.Listen(t)
	testkit.Run(t, "paylock worker", func(ctx context.Context) error {
		return runWorker(ctx, cfg, slog.New(slog.DiscardHandler), mln)
	})
	url := "http://" + mln.Addr().String() + "/metrics"
	ctx := context.Background()

	fake.FailNext(1, http.StatusServiceUnavailable) // one attempt to retry
	for _, loan := range []string{"L-m1", "L-m2"} {
		if _, err := st.Disbursements().AcceptDisbursement(ctx, store.Disbursement{LoanID: loan, Tranche: 1, Amount: 1000, Currency: "JPY", EventID: "evt_" + loan}); err != nil {
			t.Fatal(err)
		}
	}
	waitForStatus(t, st, "L-m1", store.StatusSent)
	waitForStatus(t, st, "L-m2", store.StatusSent)
	var got map[string]float64
	// Observe runs just after the row is saved.
	testkit.WaitFor(t, 5*time.Second, `paylock_payout_attempts_total{outcome="sent"} = 2`, func() bool {
		got = testkit.Scrape(t, url).Map()
		return got[`paylock_payout_attempts_total{outcome="sent"}`] == 2
	})
	for series, want := range map[string]float64{
		`paylock_payout_attempts_total{outcome="sent"}`:   2,
		`paylock_payout_attempts_total{outcome="retry"}`:  1,
		`paylock_payout_attempts_total{outcome="failed"}`: 0,
		`paylock_payout_attempts_total{outcome="error"}`:  0,
		`paylock_payout_attempts_total{outcome="review"}`: 0,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (exported: %v), want %v", series, v, ok, want)
		}
	}
	if _, ok := got[`paylock_db_pool_connections{state="max"}`]; !ok {
		t.Error("paylock worker does not export its Postgres pool statistics")
	}
	if _, ok := got[`paylock_redis_pool_connections{state="total"}`]; ok {
		t.Error("paylock worker has no Redis but exports Redis pool statistics")
	}
}

func TestPaylockWorkerRefusesAMetricsAddressInUse(t *testing.T) {
	t.Parallel()
	env, _ := lendingEnv(t)
	taken := testkit.Listen(t)
	env["PAYLOCK_METRICS_ADDR"] = taken.Addr().String()
	var stderr bytes.Buffer
	code := Main(context.Background(), []string{"worker"}, envMap(env), nil, io.Discard, &stderr)
	msg := strings.TrimSpace(stderr.String())
	if code != 1 || !strings.Contains(msg, "PAYLOCK_METRICS_ADDR") {
		t.Fatalf("exit %d, %q; want 1 naming PAYLOCK_METRICS_ADDR", code, msg)
	}
}

func TestServeExportsDisbursementGaugesAndItsWorkersAttempts(t *testing.T) {
	t.Parallel()
	env, fake := lendingEnv(t)
	env["PAYLOCK_WORKER"] = "true"
	env["PAYLOCK_EVENT_RETENTION"] = "30d"
	env["PAYLOCK_LOG_LEVEL"] = "info"
	cfg, _, err := loadConfig("paylock serve", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	ln, mln := testkit.Listen(t), testkit.Listen(t)
	cfg.Admin.listener = testkit.Listen(t) // not the default port, which every test would share
	var logs testkit.LogBuffer
	running := testkit.Run(t, "serve", func(ctx context.Context) error { return serve(ctx, cfg, cfg.Log.logger(&logs), ln, mln) })
	base := "http://" + ln.Addr().String()
	url := "http://" + mln.Addr().String() + "/metrics"
	testkit.WaitReady(t, base+"/healthz", 10*time.Second, running)

	body := `{"event_id":"evt_m","loan_id":"L-metrics","tranche":1,"amount":500000,"currency":"JPY"}`
	res, err := http.Post(base+"/webhooks/loans", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("loan webhook: %d", res.StatusCode)
	}
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	waitForStatus(t, st, "L-metrics", store.StatusSent)
	if fake.Created("L-metrics-1") != 1 {
		t.Fatalf("%d payouts", fake.Created("L-metrics-1"))
	}
	var got map[string]float64
	testkit.WaitFor(t, 5*time.Second, `paylock_payout_attempts_total{outcome="sent"} = 1`, func() bool {
		got = testkit.Scrape(t, url).Map()
		return got[`paylock_payout_attempts_total{outcome="sent"}`] == 1
	})
	for series, want := range map[string]float64{
		`paylock_payout_attempts_total{outcome="sent"}`: 1,
		`paylock_disbursement_stats_up`:                 1,
		`paylock_disbursements{status="sent"}`:          1,
		`paylock_disbursements{status="pending"}`:       0,
		`paylock_disbursements{status="paid"}`:          0,
		`paylock_disbursements{status="failed"}`:        0,
		`paylock_disbursements_needing_review`:          0,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (exported: %v), want %v", series, v, ok, want)
		}
	}
	if v := got[`paylock_disbursement_oldest_pending_seconds`]; v < 0 || v > 60 {
		t.Errorf("paylock_disbursement_oldest_pending_seconds = %v for a row sent just now", v)
	}
	if !strings.Contains(logs.String(), `"msg":"purging webhook events periodically"`) ||
		!strings.Contains(logs.String(), `"older_than":"30d"`) {
		t.Errorf("serve with PAYLOCK_EVENT_RETENTION=30d did not start purging:\n%s", logs.String())
	}
}
