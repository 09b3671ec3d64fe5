package store

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StatsTimeout bounds the query behind one scrape of the gauges read from
// the database at scrape time (DisbursementCollector, ReviewCollector),
// well inside Prometheus's default 10s scrape timeout.
const StatsTimeout = 2 * time.Second

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
	reviewItemsDesc = prometheus.NewDesc("paylock_review_queue_items",
		"Open review items by kind (mismatch, disbursement, forward, lifecycle), read from the database at scrape time ('paylock review list'). Every replica reports the same figures: aggregate with max, not sum.",
		[]string{"kind"}, nil)
	reviewOldestDesc = prometheus.NewDesc("paylock_review_queue_oldest_seconds",
		"How long the oldest open review item has waited; 0 when the queue is empty.",
		nil, nil)
	dbConns = prometheus.NewDesc("paylock_db_pool_connections",
		"Postgres pool connections by state (acquired, idle, constructing) and the pool's maximum (max).", []string{"state"}, nil)
	dbAcquires = prometheus.NewDesc("paylock_db_pool_acquires_total",
		"Connections acquired from the Postgres pool.", nil, nil)
	dbAcquireWait = prometheus.NewDesc("paylock_db_pool_acquire_wait_seconds_total",
		"Time spent waiting for a Postgres pool connection.", nil, nil)
	dbEmptyAcquires = prometheus.NewDesc("paylock_db_pool_empty_acquires_total",
		"Acquires that had to wait because the Postgres pool was empty.", nil, nil)
)

// PoolCollector exports the statistics of the store's connection pool,
// read at scrape time, and the histogram of rows per recording statement
// (paylock_db_batch_rows) when batching is on.
type PoolCollector struct {
	Store *Store
}

// Describe implements prometheus.Collector.
func (c PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dbConns, dbAcquires, dbAcquireWait, dbEmptyAcquires} {
		ch <- d
	}
	if b := c.Store.payments.batch; b != nil {
		b.rows.Describe(ch)
		b.stalls.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.Store.Pool().Stat()
	ch <- prometheus.MustNewConstMetric(dbConns, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(dbConns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(dbConns, prometheus.GaugeValue, float64(s.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(dbConns, prometheus.GaugeValue, float64(s.MaxConns()), "max")
	ch <- prometheus.MustNewConstMetric(dbAcquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(dbAcquireWait, prometheus.CounterValue, s.AcquireDuration().Seconds())
	ch <- prometheus.MustNewConstMetric(dbEmptyAcquires, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	if b := c.Store.payments.batch; b != nil {
		b.rows.Collect(ch)
		b.stalls.Collect(ch)
	}
}

// DisbursementCollector exports the disbursement gauges, read with one
// query (DisbursementStats) bounded by Timeout at each scrape. When the
// query fails it reports paylock_disbursement_stats_up 0 and leaves the
// other gauges out, so that a stale or zero figure never clears an alert.
type DisbursementCollector struct {
	Disbursements *Disbursements
	Timeout       time.Duration // 0: StatsTimeout
}

// Describe implements prometheus.Collector.
func (c DisbursementCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{disbursementsDesc, oldestPendingDesc, needingReviewDesc, statsUpDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c DisbursementCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout(c.Timeout))
	defer cancel()
	s, err := c.Disbursements.DisbursementStats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(statsUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(statsUpDesc, prometheus.GaugeValue, 1)
	for _, status := range []DisbursementStatus{StatusPending, StatusSent, StatusPaid, StatusFailed} {
		ch <- prometheus.MustNewConstMetric(disbursementsDesc, prometheus.GaugeValue, float64(s.ByStatus[status]), string(status))
	}
	ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, s.OldestPending.Seconds())
	ch <- prometheus.MustNewConstMetric(needingReviewDesc, prometheus.GaugeValue, float64(s.NeedingReview))
}

// ReviewCollector exports the review queue gauges, read with one query
// (ReviewQueueStats) bounded by Timeout at each scrape; when it fails the
// gauges are left out (never reported as an empty queue).
type ReviewCollector struct {
	Review  *Review
	Timeout time.Duration // 0: StatsTimeout
}

// Describe implements prometheus.Collector.
func (c ReviewCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- reviewItemsDesc
	ch <- reviewOldestDesc
}

// Collect implements prometheus.Collector.
func (c ReviewCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout(c.Timeout))
	defer cancel()
	stats, err := c.Review.ReviewQueueStats(ctx)
	if err != nil {
		return
	}
	var oldest time.Time
	for _, k := range ReviewKinds {
		s := stats[k]
		ch <- prometheus.MustNewConstMetric(reviewItemsDesc, prometheus.GaugeValue, float64(s.Items), string(k))
		if s.Items > 0 && (oldest.IsZero() || s.Oldest.Before(oldest)) {
			oldest = s.Oldest
		}
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(time.Since(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(reviewOldestDesc, prometheus.GaugeValue, age)
}

func statsTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return StatsTimeout
	}
	return d
}
