package store

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
)

type testJobArgs struct{}

func (testJobArgs) Kind() string { return "store_test" }

type testJobWorker struct {
	river.WorkerDefaults[testJobArgs]
}

func (testJobWorker) Work(context.Context, *river.Job[testJobArgs]) error { return nil }

func TestAddJobWorkerAddsItsQueueAndRaisesTheClientsBounds(t *testing.T) {
	t.Parallel()
	rcfg := &river.Config{JobTimeout: time.Minute, RescueStuckJobsAfter: time.Hour}
	q := JobQueue{Name: "q", MaxWorkers: 3, JobTimeout: 2 * time.Minute, RescueAfter: time.Minute}
	if err := AddJobWorker(rcfg, testJobWorker{}, q); err != nil {
		t.Fatal(err)
	}
	if got := rcfg.Queues["q"].MaxWorkers; got != 3 {
		t.Errorf("queue q has %d workers, want 3", got)
	}
	if rcfg.JobTimeout != 2*time.Minute || rcfg.RescueStuckJobsAfter != time.Hour {
		t.Errorf("JobTimeout %v, RescueStuckJobsAfter %v; want 2m0s (raised) and 1h0m0s (kept)", rcfg.JobTimeout, rcfg.RescueStuckJobsAfter)
	}
	if err := AddJobWorker(rcfg, testJobWorker{}, JobQueue{Name: "other", MaxWorkers: 1}); err == nil {
		t.Error("a second worker of the same kind was accepted")
	}
	if _, ok := rcfg.Queues["other"]; ok {
		t.Error("a refused worker's queue was added")
	}
}

func TestAddJobWorkerWithoutBoundsLeavesTheClientsAlone(t *testing.T) {
	t.Parallel()
	rcfg := &river.Config{JobTimeout: -1} // River: no timeout
	if err := AddJobWorker(rcfg, testJobWorker{}, JobQueue{Name: "q", MaxWorkers: 1}); err != nil {
		t.Fatal(err)
	}
	if rcfg.JobTimeout != -1 || rcfg.RescueStuckJobsAfter != 0 {
		t.Errorf("JobTimeout %v, RescueStuckJobsAfter %v; want them unchanged", rcfg.JobTimeout, rcfg.RescueStuckJobsAfter)
	}
}
