package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
)

// DefaultDeliveryLogRetention is how long a kept delivery stays after it
// was first seen (PAYLOCK_DELIVERY_LOG_RETENTION's default): longer than
// any provider retries, so that a fix has time to be replayed.
const DefaultDeliveryLogRetention = 30 * 24 * time.Hour

// Each statement of PurgeDeliveries deletes at most purgeDeliveriesRows
// rows and, past the first, purgeDeliveriesBytes bytes of bodies: a batch
// of large bodies stays well within the statement timeout.
const (
	purgeDeliveriesRows        = 1000
	purgeDeliveriesBytes int64 = 32 << 20
)

// purgeDeliveriesSQL deletes one batch of the deliveries first seen before
// $1, oldest first along delivery_log_received_idx: at most $2 rows, and
// no row once $3 bytes of bodies come before it in the batch (the first
// always goes). Rows another purger holds are skipped. octet_length reads
// a body's size without fetching it.
const purgeDeliveriesSQL = `
WITH batch AS (
	SELECT id, received_at, octet_length(body) AS n FROM delivery_log
	WHERE received_at < $1 ORDER BY received_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
), sized AS (
	SELECT id, sum(n) OVER (ORDER BY received_at, id) - n AS before FROM batch
)
DELETE FROM delivery_log d USING sized WHERE d.id = sized.id AND sized.before < $3`

// PurgeDeliveries deletes the kept deliveries first seen more than
// olderThan ago (by the database's clock), however often they were seen
// since: a body sent again and again does not stay. It deletes in
// statements bounded by rows and bytes (purgeDeliveriesSQL) and returns
// how many it deleted (also alongside an error). It touches nothing but
// delivery_log. olderThan must be positive.
func (s *Deliveries) PurgeDeliveries(ctx context.Context, olderThan time.Duration) (int64, error) {
	return s.purgeDeliveries(ctx, olderThan, purgeDeliveriesRows, purgeDeliveriesBytes)
}

func (s *Deliveries) purgeDeliveries(ctx context.Context, olderThan time.Duration, rows int, bytes int64) (int64, error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("store: purge deliveries: retention %s is not positive", olderThan)
	}
	var before time.Time
	err := s.pool.QueryRow(ctx, `SELECT now() - $1 * interval '1 millisecond'`, olderThan.Milliseconds()).Scan(&before)
	if err != nil {
		return 0, translate("purge deliveries: cutoff", err)
	}
	var deleted int64
	for {
		tag, err := s.pool.Exec(ctx, purgeDeliveriesSQL, before, rows, bytes)
		if err != nil {
			return deleted, translate("purge deliveries", err)
		}
		deleted += tag.RowsAffected()
		if tag.RowsAffected() == 0 {
			return deleted, nil
		}
	}
}

// sweepOrphansSQL keeps each event of an orphan older than $1 ms (a
// payment known only by events whose success has not arrived) that became
// one within the last $2 ms (older ones were kept and purged already):
// its stored payload is the body, once (the body's hash is the key).
const sweepOrphansSQL = `
INSERT INTO delivery_log (source, event_id, outcome, status, problem_detail, body_sha256, body, request_id, received_at)
SELECT e.source, e.event_id, 'orphan', 200,
	'a ' || e.kind || ' event of ' || e.transaction_id || ' whose payment has not arrived',
	sha256(convert_to(e.payload::text, 'UTF8')), convert_to(e.payload::text, 'UTF8'), '', e.received_at
FROM payment_attention a
JOIN payment_events e ON e.source = a.source AND e.transaction_id = a.transaction_id
WHERE a.reason = 'orphan'
  AND a.since < now() - $1::bigint * interval '1 millisecond'
  AND a.since > now() - ($1::bigint + $2::bigint) * interval '1 millisecond'
ON CONFLICT (source, body_sha256) DO NOTHING`

// SweepOrphans keeps in the log the events of the payments that have been
// orphans for longer than Config.OrphanAfter (outcome DeliveryOrphan),
// each once; those orphaned before retention ago are left out. It returns
// how many it added.
func (s *Deliveries) SweepOrphans(ctx context.Context, retention time.Duration) (int64, error) {
	tag, err := s.pool.Exec(ctx, sweepOrphansSQL, s.cfg.OrphanAfter.Milliseconds(), retention.Milliseconds())
	if err != nil {
		return 0, translate("sweep orphans into the delivery log", err)
	}
	return tag.RowsAffected(), nil
}

// DeliveryCount is how many deliveries the log holds of one source and
// outcome.
type DeliveryCount struct {
	Source  string
	Outcome DeliveryOutcome
	Items   int64
}

// DeliveryCounts counts the kept deliveries by source and outcome.
func (s *Deliveries) DeliveryCounts(ctx context.Context) ([]DeliveryCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT source, outcome, count(*) FROM delivery_log GROUP BY 1, 2 ORDER BY 1, 2`)
	if err != nil {
		return nil, translate("count deliveries", err)
	}
	defer rows.Close()
	var out []DeliveryCount
	for rows.Next() {
		var c DeliveryCount
		if err := rows.Scan(&c.Source, &c.Outcome, &c.Items); err != nil {
			return nil, translate("count deliveries", err)
		}
		out = append(out, c)
	}
	return out, translate("count deliveries", rows.Err())
}

// The delivery log's maintenance job.
const (
	DeliveryLogQueue = "maintenance"
	DeliveryLogKind  = "delivery_log_maintenance"
)

// DeliveryLogArgs is one run of the delivery log's maintenance.
type DeliveryLogArgs struct{}

// Kind is the job's kind.
func (DeliveryLogArgs) Kind() string { return DeliveryLogKind }

// InsertOpts puts the job on DeliveryLogQueue, tried once: the next
// period's job is the retry.
func (DeliveryLogArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: DeliveryLogQueue, MaxAttempts: 1}
}

// DeliveryLogWorker keeps the delivery log bounded: River's leader inserts
// one DeliveryLogArgs every Interval (a periodic job, run on start too),
// and the run keeps the orphans past their time (SweepOrphans) and purges
// the deliveries first seen more than Retention ago (PurgeDeliveries).
type DeliveryLogWorker struct {
	river.WorkerDefaults[DeliveryLogArgs]

	Deliveries *Deliveries
	Retention  time.Duration // 0: DefaultDeliveryLogRetention
	Interval   time.Duration // 0: an hour
	Logger     *slog.Logger
}

// Work runs the maintenance once.
func (w *DeliveryLogWorker) Work(ctx context.Context, _ *river.Job[DeliveryLogArgs]) error {
	retention := w.Retention
	if retention <= 0 {
		retention = DefaultDeliveryLogRetention
	}
	kept, err := w.Deliveries.SweepOrphans(ctx, retention)
	if err != nil {
		return err
	}
	purged, err := w.Deliveries.PurgeDeliveries(ctx, retention)
	level := slog.LevelDebug
	if kept > 0 || purged > 0 {
		level = slog.LevelInfo
	}
	w.Logger.LogAttrs(ctx, level, "delivery log maintained", slog.Int64("orphans_kept", kept),
		slog.Int64("purged", purged), slog.String("older_than", FormatRetention(retention)))
	return err
}

// AddTo adds the worker, its queue and its periodic job to rcfg.
func (w *DeliveryLogWorker) AddTo(rcfg *river.Config) error {
	if err := AddJobWorker(rcfg, w, JobQueue{Name: DeliveryLogQueue, MaxWorkers: 1}); err != nil {
		return fmt.Errorf("store: delivery log: %w", err)
	}
	interval := w.Interval
	if interval <= 0 {
		interval = time.Hour
	}
	rcfg.PeriodicJobs = append(rcfg.PeriodicJobs, river.NewPeriodicJob(
		river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return DeliveryLogArgs{}, nil },
		&river.PeriodicJobOpts{ID: DeliveryLogKind, RunOnStart: true},
	))
	return nil
}

var deliveryLogItemsDesc = prometheus.NewDesc("paylock_delivery_log_items",
	"Verified deliveries that recorded nothing, kept in the delivery log, by source and outcome (ignored, refused, mismatch, orphan), read from the database at scrape time ('paylock deliveries list'). Every replica reports the same figures: aggregate with max, not sum.",
	[]string{"source", "outcome"}, nil)

// DeliveryLogCollector exports paylock_delivery_log_items, read with one
// query (DeliveryCounts) bounded by Timeout at each scrape; when it fails
// the gauge is left out. Each of Sources has a series per outcome, 0 when
// the log holds none, so that the first refused delivery is a change.
type DeliveryLogCollector struct {
	Deliveries *Deliveries
	Sources    []string
	Timeout    time.Duration // 0: StatsTimeout
}

// Describe implements prometheus.Collector.
func (c DeliveryLogCollector) Describe(ch chan<- *prometheus.Desc) { ch <- deliveryLogItemsDesc }

// Collect implements prometheus.Collector.
func (c DeliveryLogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout(c.Timeout))
	defer cancel()
	counts, err := c.Deliveries.DeliveryCounts(ctx)
	if err != nil {
		return
	}
	type key struct{ source, outcome string }
	items := map[key]int64{}
	for _, s := range c.Sources {
		for _, o := range DeliveryOutcomes {
			items[key{s, string(o)}] = 0
		}
	}
	for _, n := range counts {
		items[key{n.Source, string(n.Outcome)}] = n.Items
	}
	for k, n := range items {
		ch <- prometheus.MustNewConstMetric(deliveryLogItemsDesc, prometheus.GaugeValue, float64(n), k.source, k.outcome)
	}
}
