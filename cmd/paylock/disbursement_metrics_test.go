package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylock/paylock/internal/testenv"
	"github.com/paylock/paylock/store"
)

// gathered returns every series of reg as "name{labels}" → value, with the
// labels in the text format's order.
func gathered(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			name := f.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Gauge != nil:
				out[name] = m.Gauge.GetValue()
			case m.Counter != nil:
				out[name] = m.Counter.GetValue()
			}
		}
	}
	return out
}

// scraped fetches url (a /metrics page) and returns its series as gathered
// does.
func scraped(t *testing.T, url string) map[string]float64 {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func TestDisbursementGaugesReportCountsAndTheOldestAge(t *testing.T) {
	t.Parallel()
	st := migratedStore(t, testenv.Schema(t))
	ctx := context.Background()
	for i, set := range []string{
		"", // pending, new
		"status_since = now() - interval '90 minutes'",                                      // pending for 1.5h: the oldest
		"review_reason = 'lookup found nothing', status_since = now() - interval '5 hours'", // awaiting review: not "oldest"
		"status = 'sent', provider_ref = 'po_3', status_since = now() - interval '20 minutes'",
		"status = 'paid', provider_ref = 'po_4', status_since = now() - interval '9 days'",
		"status = 'paid', provider_ref = 'po_5', status_since = now() - interval '9 days'",
	} {
		loan := fmt.Sprintf("L-%d", i)
		if _, err := st.Disbursements().AcceptDisbursement(ctx, store.Disbursement{LoanID: loan, Tranche: 1, Amount: 1, Currency: "JPY", EventID: "evt_" + loan}); err != nil {
			t.Fatal(err)
		}
		if set != "" {
			if _, err := st.Pool().Exec(ctx, "UPDATE disbursements SET "+set+" WHERE loan_id = $1", loan); err != nil {
				t.Fatal(err)
			}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(disbursementCollector{st: st.Disbursements(), timeout: disbursementStatsTimeout})
	got := gathered(t, reg)
	for series, want := range map[string]float64{
		`paylock_disbursement_stats_up`:               1,
		`paylock_disbursements{status="pending"}`:     3,
		`paylock_disbursements{status="sent"}`:        1,
		`paylock_disbursements{status="paid"}`:        2,
		`paylock_disbursements{status="failed"}`:      0,
		`paylock_disbursements_needing_review`:        1,
		`paylock_disbursement_oldest_pending_seconds`: 90 * 60,
	} {
		v, ok := got[series]
		if !ok {
			t.Errorf("%s is not exported", series)
			continue
		}
		if math.Abs(v-want) > 30 {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
}

func TestDisbursementGaugesOfAnEmptyTableAreZero(t *testing.T) {
	t.Parallel()
	st := migratedStore(t, testenv.Schema(t))
	reg := prometheus.NewRegistry()
	reg.MustRegister(disbursementCollector{st: st.Disbursements(), timeout: disbursementStatsTimeout})
	got := gathered(t, reg)
	if got[`paylock_disbursement_stats_up`] != 1 || len(got) != 7 {
		t.Fatalf("want stats_up 1 and 6 zero gauges, got %v", got)
	}
	for series, v := range got {
		if series != `paylock_disbursement_stats_up` && v != 0 {
			t.Errorf("%s = %v on an empty table", series, v)
		}
	}
}

func TestAScrapeBlockedByTheDatabaseEndsInTimeWithStatsDown(t *testing.T) {
	t.Parallel()
	dsn := testenv.Schema(t)
	st := migratedStore(t, dsn)
	ctx := context.Background()
	// Another session holds the table: the stats query would wait for it.
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE disbursements IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(disbursementCollector{st: st.Disbursements(), timeout: 200 * time.Millisecond})
	start := time.Now()
	got := gathered(t, reg)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the scrape took %v with a 200ms timeout", took)
	}
	if v, ok := got[`paylock_disbursement_stats_up`]; !ok || v != 0 || len(got) != 1 {
		t.Errorf("want only paylock_disbursement_stats_up 0, got %v", got)
	}
}

func TestPaylockWorkerServesMetricsAndCountsItsAttempts(t *testing.T) {
	t.Parallel()
	env, fake := lendingEnv(t)
	st := migratedStore(t, env["DATABASE_URL"])
	cfg, _, err := loadConfig("paylock worker", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runWorker(ctx, cfg, slog.New(slog.DiscardHandler), mln) }()
	url := "http://" + mln.Addr().String() + "/metrics"

	fake.FailNext(1, http.StatusServiceUnavailable) // one attempt to retry
	for _, loan := range []string{"L-m1", "L-m2"} {
		if _, err := st.Disbursements().AcceptDisbursement(ctx, store.Disbursement{LoanID: loan, Tranche: 1, Amount: 1000, Currency: "JPY", EventID: "evt_" + loan}); err != nil {
			t.Fatal(err)
		}
	}
	waitForStatus(t, st, "L-m1", store.StatusSent)
	waitForStatus(t, st, "L-m2", store.StatusSent)
	var got map[string]float64
	deadline := time.Now().Add(5 * time.Second)
	for { // Observe runs just after the row is saved
		got = scraped(t, url)
		if got[`paylock_payout_attempts_total{outcome="sent"}`] == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the worker did not stop")
	}
}

func TestPaylockWorkerRefusesAMetricsAddressInUse(t *testing.T) {
	t.Parallel()
	env, _ := lendingEnv(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	env["PAYLOCK_METRICS_ADDR"] = taken.Addr().String()
	var stderr bytes.Buffer
	code := Run(context.Background(), []string{"worker"}, envMap(env), nil, io.Discard, &stderr)
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, newLogger(cfg, &logs), ln, mln) }()
	base := "http://" + ln.Addr().String()
	url := "http://" + mln.Addr().String() + "/metrics"

	body := `{"event_id":"evt_m","loan_id":"L-metrics","tranche":1,"amount":500000,"currency":"JPY"}`
	var res *http.Response
	for i := 0; ; i++ {
		res, err = http.Post(base+"/webhooks/loans", "application/json", strings.NewReader(body))
		if err == nil || i > 100 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("loan webhook: %d", res.StatusCode)
	}
	st := migratedStore(t, env["DATABASE_URL"])
	waitForStatus(t, st, "L-metrics", store.StatusSent)
	if fake.Created("L-metrics-1") != 1 {
		t.Fatalf("%d payouts", fake.Created("L-metrics-1"))
	}
	var got map[string]float64
	deadline := time.Now().Add(5 * time.Second)
	for {
		got = scraped(t, url)
		if got[`paylock_payout_attempts_total{outcome="sent"}`] == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}
