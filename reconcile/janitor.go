package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/riverqueue/river"

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

// JanitorInterval is how often River's leader schedules the janitor.
const JanitorInterval = time.Minute

// Janitor syncs the payments still pending or authorized PendingAfter
// after their last change, of the sources with a status API, from their
// provider's API (Sync.Payment): the payments whose webhook was late or
// lost. River's leader inserts one run every JanitorInterval
// (river.PeriodicJob: one replica at a time schedules it); each run syncs
// at most Rate payments a second, and no more than fit in the interval, the
// longest unchanged first. A payment the provider still has pending is
// synced again by a later run.
type Janitor struct {
	river.WorkerDefaults[JanitorArgs]

	Sync         *Sync
	Payments     Unsettled
	PendingAfter time.Duration
	Rate         float64 // payments per second, > 0
	Logger       *slog.Logger
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

// Timeout bounds a run to its interval.
func (j *Janitor) Timeout(*river.Job[JanitorArgs]) time.Duration { return JanitorInterval }

// Work syncs one batch of unsettled payments. A payment whose sync fails
// is logged and counted, and the run goes on; a listing that fails is the
// job's error.
func (j *Janitor) Work(ctx context.Context, _ *river.Job[JanitorArgs]) error {
	// The batch fits in 5/6 of the interval at Rate.
	limit := max(1, int(math.Floor(j.Rate*JanitorInterval.Seconds()*5/6)))
	refs, err := j.Payments.UnsettledPayments(ctx, j.sources(), time.Now().Add(-j.PendingAfter), limit)
	if err != nil {
		return fmt.Errorf("reconcile: listing the unsettled payments: %w", err)
	}
	gap := time.Duration(float64(time.Second) / j.Rate)
	counts := map[string]int{}
	for i, p := range refs {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(gap):
			}
		}
		res, err := j.Sync.Payment(ctx, p.Source, p.TransactionID)
		result := res.Result
		if err != nil {
			result = "error"
			j.Logger.WarnContext(ctx, "janitor: a payment could not be synced", slog.String("source", p.Source),
				slog.String("transaction_id", p.TransactionID), slog.Any("error", err))
		}
		counts[result]++
		if j.Observe != nil {
			j.Observe(p.Source, result)
		}
	}
	if len(refs) > 0 {
		j.Logger.InfoContext(ctx, "janitor: unsettled payments synced", slog.Int("payments", len(refs)),
			slog.Int("recorded_now", counts["processed"]), slog.Int("unchanged", counts["duplicate"]+counts["ignored"]),
			slog.Int("not_final", counts["not_final"]), slog.Int("errors", counts["error"]))
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
