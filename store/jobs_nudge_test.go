package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/riverqueue/river"
)

// stampWorker notes when each forward job is worked, by transaction id.
type stampWorker struct {
	river.WorkerDefaults[ForwardArgs]
	worked chan string
}

func (w stampWorker) Work(_ context.Context, j *river.Job[ForwardArgs]) error {
	w.worked <- j.Args.TransactionID
	return nil
}

// A job inserted right after another, within the 100ms in which River
// sends its queue no second notification, is worked at once all the same:
// the store notifies the queue again NudgeAfter later, instead of leaving
// the job to the workers' next poll (10s here).
func TestAJobWhoseNotificationRiverLeftOutIsWorkedWithoutWaitingForThePoll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	worked := make(chan string, 16)
	cfg := &river.Config{Queues: map[string]river.QueueConfig{ForwardQueue: {MaxWorkers: 4}}, Workers: river.NewWorkers(),
		Logger: discardLogger, FetchPollInterval: 10 * time.Second, FetchCooldown: 100 * time.Millisecond}
	river.AddWorker(cfg.Workers, stampWorker{worked: worked})
	stop, err := b.store.StartJobs(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop(context.Background()) })
	time.Sleep(500 * time.Millisecond) // the client listening, its first fetch done
	for pair := range 3 {
		first, second := fmt.Sprintf("nudge-%d-a", pair), fmt.Sprintf("nudge-%d-b", pair)
		if _, err := b.store.Payments().RecordPaymentForwarded(ctx, newPayment(first), forwardDest); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond) // River's notification of first is out, and fetched
		if _, err := b.store.Payments().RecordPaymentForwarded(ctx, newPayment(second), forwardDest); err != nil {
			t.Fatal(err)
		}
		inserted := time.Now()
		want := map[string]bool{first: true, second: true}
		deadline := time.After(3 * time.Second)
		for len(want) > 0 {
			select {
			case id := <-worked:
				delete(want, id)
			case <-deadline:
				t.Fatalf("pair %d: %v not worked 3s after its insert (the poll is 10s away)", pair, want)
			}
		}
		t.Logf("pair %d: both worked %v after the second's insert", pair, time.Since(inserted).Round(time.Millisecond))
		time.Sleep(300 * time.Millisecond) // past both clients' cooldowns
	}
}
