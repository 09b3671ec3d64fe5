package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/store"
)

// JanitorQueue is the River queue of the janitor's periodic runs, and
// JanitorKind their job kind.
const (
	JanitorQueue = "sync"
	JanitorKind  = "sync_unsettled_payments"
)

// JanitorArgs is one run of the janitor.
type JanitorArgs struct{}

// Kind is the job's kind.
func (JanitorArgs) Kind() string { return JanitorKind }

// InsertOpts puts the job on JanitorQueue, tried once: the next period's
// run is the retry.
func (JanitorArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: JanitorQueue, MaxAttempts: 1}
}

// Unsettled is what the janitor lists its payments from (*store.Payments).
type Unsettled interface {
	UnsettledPayments(ctx context.Context, sources []string, before time.Time, limit int) ([]store.PaymentRef, error)
}

// StuckOrders is what the janitor lists its orders from (*store.Orders).
type StuckOrders interface {
	StuckOrders(ctx context.Context, before, since time.Time, limit int) ([]string, error)
}

// JanitorInterval is how often River's leader schedules the janitor.
const JanitorInterval = time.Minute

// OrderSearchWindow is how long after PendingAfter an order unpaid is
// still looked for at the provider: an order nobody paid within it is an
// abandoned checkout, not a lost webhook.
const OrderSearchWindow = 7 * 24 * time.Hour

// Janitor syncs the payments still pending or authorized PendingAfter
// after their last change, of the sources with a status API, from their
// provider's API (Sync.Payment): the payments whose webhook was late or
// lost. With Orders, it also looks for the payments of the orders still
// awaiting payment (or expired) PendingAfter after their registration
// with no payment naming them (a webhook lost, and a checkout that never
// synced): at each source whose fetcher is a provider.OrderFinder, by the
// source's OrderPointers entry, and syncs each payment found, so the order
// deriver can say it paid.
//
// River's leader inserts one run every JanitorInterval
// (river.PeriodicJob: one replica at a time schedules it); each run makes
// at most Rate provider calls a second (a sync, or an order's search), and
// no more than fit in the interval: the payments first, the longest
// unchanged first, then the orders, the newest first. A payment the
// provider still has pending is synced again by a later run; an order is
// looked for by every run until it is paid or OrderSearchWindow has passed.
type Janitor struct {
	river.WorkerDefaults[JanitorArgs]

	Sync         *Sync
	Payments     Unsettled
	PendingAfter time.Duration
	Rate         float64 // provider calls per second, > 0
	Logger       *slog.Logger
	// Orders and OrderPointers, when set, have the janitor look for the
	// payments of stuck orders; OrderPointers holds, per source, where its
	// payments name their order (RFC 6901 tokens).
	Orders        StuckOrders
	OrderPointers map[string][]string
	// Observe, when set, sees each payment synced: its source and result
	// ("processed", "duplicate", "ignored", "not_final" or "error").
	Observe func(source, result string)
}

// sources are the names of the sources the janitor syncs.
func (j *Janitor) sources() []string {
	var out []string
	for _, s := range j.Sync.Sources {
		if j.Sync.HasAPI(s) {
			out = append(out, s)
		}
	}
	return out
}

// finders are the sources whose payments can be found by their order.
func (j *Janitor) finders() map[string]provider.OrderFinder {
	out := map[string]provider.OrderFinder{}
	if j.Orders == nil {
		return out
	}
	for _, s := range j.sources() {
		if f, ok := j.Sync.Fetchers[s].(provider.OrderFinder); ok && len(j.OrderPointers[s]) > 0 {
			out[s] = f
		}
	}
	return out
}

// Timeout bounds a run to its interval.
func (j *Janitor) Timeout(*river.Job[JanitorArgs]) time.Duration { return JanitorInterval }

// janitorRun is one run's budget of provider calls, their pace and what
// they came to.
type janitorRun struct {
	left   int
	gap    time.Duration
	calls  int
	counts map[string]int
}

// call waits for the pace (not before the first call) and takes one call
// from the budget; false when none is left or ctx is done.
func (r *janitorRun) call(ctx context.Context) bool {
	if r.left <= 0 {
		return false
	}
	if r.calls > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(r.gap):
		}
	}
	r.left--
	r.calls++
	return true
}

// Work syncs one batch of unsettled payments, then looks for the payments
// of stuck orders. A payment whose sync fails, or an order whose search
// fails, is logged and counted, and the run goes on; a listing that fails
// is the job's error.
func (j *Janitor) Work(ctx context.Context, _ *river.Job[JanitorArgs]) error {
	// The calls fit in 5/6 of the interval at Rate.
	run := &janitorRun{left: max(1, int(math.Floor(j.Rate*JanitorInterval.Seconds()*5/6))),
		gap: time.Duration(float64(time.Second) / j.Rate), counts: map[string]int{}}
	refs, err := j.Payments.UnsettledPayments(ctx, j.sources(), time.Now().Add(-j.PendingAfter), run.left)
	if err != nil {
		return fmt.Errorf("reconcile: listing the unsettled payments: %w", err)
	}
	for _, p := range refs {
		if !run.call(ctx) {
			return ctx.Err()
		}
		j.syncOne(ctx, run, p.Source, p.TransactionID)
	}
	if len(refs) > 0 {
		j.Logger.InfoContext(ctx, "janitor: unsettled payments synced", slog.Int("payments", len(refs)),
			slog.Int("recorded_now", run.counts["processed"]), slog.Int("unchanged", run.counts["duplicate"]+run.counts["ignored"]),
			slog.Int("not_final", run.counts["not_final"]), slog.Int("errors", run.counts["error"]))
	}
	return j.findOrders(ctx, run)
}

// syncOne syncs one payment and counts its result.
func (j *Janitor) syncOne(ctx context.Context, run *janitorRun, source, ref string) {
	res, err := j.Sync.Payment(ctx, source, ref)
	result := res.Result
	if err != nil {
		result = "error"
		j.Logger.WarnContext(ctx, "janitor: a payment could not be synced", slog.String("source", source),
			slog.String("transaction_id", ref), slog.Any("error", err))
	}
	run.counts[result]++
	if j.Observe != nil {
		j.Observe(source, result)
	}
}

// findOrders looks for the payments of the stuck orders at each source
// that can find them, and syncs each payment found, within run's budget.
func (j *Janitor) findOrders(ctx context.Context, run *janitorRun) error {
	finders := j.finders()
	if len(finders) == 0 || run.left <= 0 {
		return nil
	}
	before := time.Now().Add(-j.PendingAfter)
	ids, err := j.Orders.StuckOrders(ctx, before, before.Add(-OrderSearchWindow), run.left)
	if err != nil {
		return fmt.Errorf("reconcile: listing the stuck orders: %w", err)
	}
	sources := make([]string, 0, len(finders))
	for s := range finders {
		sources = append(sources, s)
	}
	slices.Sort(sources)
	found, synced := 0, run.counts["processed"]
	for _, id := range ids {
		for _, source := range sources {
			if !run.call(ctx) {
				return ctx.Err()
			}
			refs, err := finders[source].FindByOrder(ctx, j.OrderPointers[source], id)
			if err != nil {
				j.Logger.WarnContext(ctx, "janitor: an order's payments could not be looked for", slog.String("source", source),
					slog.String("order_id", id), slog.Any("error", err))
				continue
			}
			for _, ref := range refs {
				if !run.call(ctx) {
					return ctx.Err()
				}
				found++
				j.syncOne(ctx, run, source, ref)
			}
		}
	}
	if len(ids) > 0 {
		j.Logger.InfoContext(ctx, "janitor: stuck orders looked for at the provider", slog.Int("orders", len(ids)),
			slog.Int("payments_found", found), slog.Int("recorded_now", run.counts["processed"]-synced))
	}
	return nil
}

// AddTo adds the janitor, its queue and its periodic job to rcfg.
func (j *Janitor) AddTo(rcfg *river.Config) error {
	if j.Rate <= 0 {
		return fmt.Errorf("reconcile: janitor rate %v: want more than 0 a second", j.Rate)
	}
	if err := store.AddJobWorker(rcfg, j, store.JobQueue{Name: JanitorQueue, MaxWorkers: 1}); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	rcfg.PeriodicJobs = append(rcfg.PeriodicJobs, river.NewPeriodicJob(
		river.PeriodicInterval(JanitorInterval),
		func() (river.JobArgs, *river.InsertOpts) { return JanitorArgs{}, nil },
		&river.PeriodicJobOpts{ID: JanitorKind, RunOnStart: true},
	))
	return nil
}
