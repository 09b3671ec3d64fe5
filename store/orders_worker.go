package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/paylock/paylock/order"
)

// The order deriver's River job: the leader inserts one every Interval.
const (
	// OrderDeriveKind is the River job kind of OrderDeriveArgs.
	OrderDeriveKind = "order_derive"
	// OrderDeriveQueue is the queue it runs on.
	OrderDeriveQueue = "orders"
	// DefaultOrderInterval is PAYLOCK_ORDERS_INTERVAL's default.
	DefaultOrderInterval = time.Second
)

// OrderDeriveArgs is one run of the order deriver.
type OrderDeriveArgs struct{}

// Kind is OrderDeriveKind.
func (OrderDeriveArgs) Kind() string { return OrderDeriveKind }

// InsertOpts puts the job on OrderDeriveQueue, tried once (the next
// period's job is the retry), and unique while one waits or runs: a slow
// run makes the leader skip periods, it never piles them up.
func (OrderDeriveArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: OrderDeriveQueue, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{
		ByArgs: true,
		ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
			rivertype.JobStateRunning, rivertype.JobStateScheduled},
	}}
}

// OrderDeriveWorker runs Orders.DeriveOrders with Deriver every Interval
// (a periodic job of River's leader, run on start too), and hands the
// number of orders by status to Observe (paylock_orders{status}) after a
// run that changed an order, else at most every CountEvery.
type OrderDeriveWorker struct {
	river.WorkerDefaults[OrderDeriveArgs]

	Orders   *Orders
	Deriver  OrderDeriver
	Interval time.Duration // 0: DefaultOrderInterval
	Logger   *slog.Logger
	// Observe, when not nil, receives every status's count (0 for none).
	Observe    func(map[order.Status]int64)
	CountEvery time.Duration // 0: 15s

	counted time.Time
}

// Work runs the deriver once.
func (w *OrderDeriveWorker) Work(ctx context.Context, _ *river.Job[OrderDeriveArgs]) error {
	start := time.Now()
	res, err := w.Orders.DeriveOrders(ctx, w.Deriver)
	level := slog.LevelDebug
	if res.Changed > 0 {
		level = slog.LevelInfo
	}
	if err != nil {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.Int("linked", res.Linked), slog.Int("derived", res.Derived), slog.Int("changed", res.Changed),
		slog.Duration("took", time.Since(start))}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	w.Logger.LogAttrs(ctx, level, "orders derived", attrs...)
	every := w.CountEvery
	if every <= 0 {
		every = 15 * time.Second
	}
	if w.Observe != nil && (res.Changed > 0 || w.counted.IsZero() || time.Since(w.counted) >= every) {
		counts, cerr := w.Orders.CountOrders(ctx)
		if cerr == nil {
			w.Observe(counts)
			w.counted = time.Now()
		}
	}
	return err
}

// AddTo adds the worker, its queue and its periodic job to rcfg.
func (w *OrderDeriveWorker) AddTo(rcfg *river.Config) error {
	if err := AddJobWorker(rcfg, w, JobQueue{Name: OrderDeriveQueue, MaxWorkers: 1}); err != nil {
		return fmt.Errorf("store: order deriver: %w", err)
	}
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultOrderInterval
	}
	rcfg.PeriodicJobs = append(rcfg.PeriodicJobs, river.NewPeriodicJob(
		river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return OrderDeriveArgs{}, nil },
		&river.PeriodicJobOpts{ID: OrderDeriveKind, RunOnStart: true},
	))
	return nil
}

// CountOrders counts the orders by status; every status is in the map.
// Errors wrap ErrUnavailable when the database failed transiently.
func (s *Orders) CountOrders(ctx context.Context) (map[order.Status]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM orders GROUP BY status`)
	if err != nil {
		return nil, translate("count orders", err)
	}
	out := make(map[order.Status]int64, len(order.Statuses))
	for _, st := range order.Statuses {
		out[st] = 0
	}
	var (
		status string
		n      int64
	)
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		out[order.Status(status)] = n
		return nil
	})
	if err != nil {
		return nil, translate("count orders", err)
	}
	return out, nil
}
