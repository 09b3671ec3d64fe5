package main

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/store"
)

// disbursementStatsTimeout bounds the query behind one scrape of the
// disbursement gauges, well inside Prometheus's default 10s scrape timeout.
const disbursementStatsTimeout = 2 * time.Second

var (
	disbursementsDesc = prometheus.NewDesc("paylock_disbursements",
		"Disbursements by status (pending, sent, paid, failed), read from the database at scrape time. Every replica reports the same figures: aggregate with max, not sum.",
		[]string{"status"}, nil)
	oldestPendingDesc = prometheus.NewDesc("paylock_disbursement_oldest_pending_seconds",
		"How long the oldest disbursement still pending or sent has been in that status (since status_since, as 'paylock disbursements stuck' measures), leaving out rows awaiting review; 0 when there is none.",
		nil, nil)
	needingReviewDesc = prometheus.NewDesc("paylock_disbursements_needing_review",
		"Pending disbursements flagged for review: the worker will not touch them until a person decides (docs/disbursements.md).",
		nil, nil)
	statsUpDesc = prometheus.NewDesc("paylock_disbursement_stats_up",
		"1 when this scrape read the disbursement figures from the database, 0 when it could not within its timeout; the other disbursement gauges are then left out rather than reported wrong.",
		nil, nil)
)

// disbursementStatser is what the collector needs from the store.
type disbursementStatser interface {
	DisbursementStats(ctx context.Context) (store.DisbursementStats, error)
}

// disbursementCollector reads the disbursement gauges from the database at
// scrape time, with one query bounded by timeout. When the query fails it
// reports paylock_disbursement_stats_up 0 and leaves the other gauges out,
// so that a stale or zero figure never clears an alert.
type disbursementCollector struct {
	st      disbursementStatser
	timeout time.Duration
}

func (c disbursementCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{disbursementsDesc, oldestPendingDesc, needingReviewDesc, statsUpDesc} {
		ch <- d
	}
}

func (c disbursementCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	s, err := c.st.DisbursementStats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(statsUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(statsUpDesc, prometheus.GaugeValue, 1)
	for _, status := range []store.DisbursementStatus{store.StatusPending, store.StatusSent, store.StatusPaid, store.StatusFailed} {
		ch <- prometheus.MustNewConstMetric(disbursementsDesc, prometheus.GaugeValue, float64(s.ByStatus[status]), string(status))
	}
	ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, s.OldestPending.Seconds())
	ch <- prometheus.MustNewConstMetric(needingReviewDesc, prometheus.GaugeValue, float64(s.NeedingReview))
}

// payoutOutcomes are the outcomes the worker reports, each exported from
// the start (at 0) so that rates and ratios exist before the first event.
var payoutOutcomes = []payout.Outcome{
	payout.OutcomeSent, payout.OutcomeAdopted, payout.OutcomeRetry, payout.OutcomeFailed,
	payout.OutcomeReview, payout.OutcomeNotPending, payout.OutcomeError,
}

// payoutMetrics counts the payout worker's attempts; its observe method is
// the worker's Config.Observe.
type payoutMetrics struct {
	attempts *prometheus.CounterVec
}

func newPayoutMetrics(reg prometheus.Registerer) *payoutMetrics {
	m := &payoutMetrics{attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_payout_attempts_total",
		Help: "Payout attempts (River payout jobs worked), by outcome: sent, adopted (found by a lookup of the key: after the key retention, or when a retry was refused), retry (temporary failure: River runs the job again after a backoff), failed (the provider refused), review (flagged for a person), not_pending (the row had moved on: nothing to do), error (the outcome could not be saved; River retries).",
	}, []string{"outcome"})}
	reg.MustRegister(m.attempts)
	for _, o := range payoutOutcomes {
		m.attempts.WithLabelValues(string(o))
	}
	return m
}

func (m *payoutMetrics) observe(ev payout.Event) {
	m.attempts.WithLabelValues(string(ev.Outcome)).Inc()
}

// newWorkerRegistry is what "paylock worker" exports: the Go runtime, the
// process and its Postgres pool (it has no Redis). The disbursement gauges
// stay with serve, which every deployment runs: one query per scrape is
// enough.
func newWorkerRegistry(st *store.Store) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		poolCollector{st: st},
	)
	return reg
}

// serveMetrics serves reg (and pprof, with withPprof) on mln, or on a
// listener of its own at addr when mln is nil; with neither, it does
// nothing. stop closes it.
func serveMetrics(reg *prometheus.Registry, addr string, mln net.Listener, withPprof bool, logger *slog.Logger) (stop func(), err error) {
	if mln == nil && addr == "" {
		return func() {}, nil
	}
	if mln, err = listen(mln, addr, "metrics (PAYLOCK_METRICS_ADDR, off: none)"); err != nil {
		return nil, err
	}
	msrv := newServer(metricsMux(reg, withPprof), logger)
	msrv.WriteTimeout = 0 // a CPU profile streams for as long as it was asked to run
	go msrv.Serve(mln)
	logger.Info("metrics listening", slog.String("url", "http://"+mln.Addr().String()+"/metrics"), slog.Bool("pprof", withPprof))
	return func() { msrv.Close() }, nil
}
