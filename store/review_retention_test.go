package store

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/paylock/paylock/internal/testkit"
)

// canaryArgs is a job kind the retention test works nothing of: its
// completed row is what shows River's cleaner has run.
type canaryArgs struct{}

func (canaryArgs) Kind() string { return "retention_canary" }

type canaryWorker struct {
	river.WorkerDefaults[canaryArgs]
}

func (canaryWorker) Work(context.Context, *river.Job[canaryArgs]) error { return nil }

func TestDiscardedForwardsOutliveRiversCleanerUntilResolved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, id := range []string{"keep-open", "keep-resolved"} {
		if _, err := b.store.Payments().RecordPaymentForwarded(ctx, newPayment(id), forwardDest); err != nil {
			t.Fatal(err)
		}
	}
	// Discarded a month ago: past River's 7-day default for discarded jobs.
	testkit.Exec(t, b.admin, `UPDATE river_job SET state = 'discarded', finalized_at = now() - interval '30 days', attempt = max_attempts WHERE kind = 'forward'`)
	items, err := b.store.Review().ReviewItems(ctx, ReviewFilter{Kind: ReviewForward})
	if err != nil || len(items) != 2 {
		t.Fatalf("items %+v, %v; want 2", items, err)
	}
	resolved := items[1]
	if _, err := b.store.Review().ResolveReview(ctx, resolved.ID, Resolve{Action: ActionAcknowledge, Note: "receiver retired", Who: "ann"}); err != nil {
		t.Fatal(err)
	}
	// A completed job a month old: River's cleaner deletes it on its first
	// run, so its absence says the cleaner ran.
	testkit.Exec(t, b.admin, `INSERT INTO river_job (kind, args, state, attempt, max_attempts, finalized_at, queue, priority)
		VALUES ('retention_canary', '{}', 'completed', 1, 1, now() - interval '30 days', 'retention_canary', 1)`)

	cfg := &river.Config{Queues: map[string]river.QueueConfig{"retention_canary": {MaxWorkers: 1}}, Workers: river.NewWorkers(),
		Logger: discardLogger}
	river.AddWorker(cfg.Workers, canaryWorker{})
	stop, err := b.store.StartJobs(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(context.Background()) })
	testkit.WaitFor(t, 60*time.Second, "River's cleaner to run", func() bool {
		return testkit.Count(t, b.admin, `SELECT count(*) FROM river_job WHERE kind = 'retention_canary'`) == 0
	})
	open, err := b.store.Review().ReviewItems(ctx, ReviewFilter{Kind: ReviewForward})
	if err != nil || len(open) != 1 || open[0].ID != items[0].ID {
		t.Fatalf("open forward items after River's cleaner ran: %+v, %v; want %s still there", open, err, items[0].ID)
	}

	// paylock's purge deletes the resolved one only, once its resolution
	// is old enough.
	if n, err := b.store.Review().PurgeResolvedForwards(ctx, ResolvedForwardRetention); err != nil || n != 0 {
		t.Fatalf("purge of a resolution made now: %d, %v; want nothing", n, err)
	}
	testkit.Exec(t, b.admin, `UPDATE review_resolutions SET at = now() - interval '8 days' WHERE item_id = $1`, resolved.ID)
	testkit.Exec(t, b.admin, `UPDATE river_job SET finalized_at = now() - interval '9 days' WHERE kind = 'forward'`)
	if n, err := b.store.Review().PurgeResolvedForwards(ctx, ResolvedForwardRetention); err != nil || n != 1 {
		t.Fatalf("purge of a resolution 8 days old: %d, %v; want 1", n, err)
	}
	if open, _ := b.store.Review().ReviewItems(ctx, ReviewFilter{Kind: ReviewForward}); len(open) != 1 || open[0].ID != items[0].ID {
		t.Fatalf("the unresolved item after the purge: %+v", open)
	}
}
