// Package riverdemo puts River jobs in the states River UI shows
// (completed, retryable, discarded, scheduled), on a queue of its own, so
// that scripts/ui-check.sh and the admin listener's tests have something
// real to look at. Its jobs run through River itself (a client started with
// store.StartJobs): a discarded job is one whose worker failed on its last
// attempt, as in production. paylock's own clients never work its queue.
package riverdemo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/paylock/paylock/store"
)

// Queue is the queue the demo jobs are inserted in and worked from.
const Queue = "riverdemo"

// ReportArgs is a job that succeeds.
type ReportArgs struct {
	Name string `json:"name"`
}

// Kind is ReportArgs' River job kind.
func (ReportArgs) Kind() string { return "riverdemo_report" }

// NotifyArgs is a job whose worker always fails: with MaxAttempts 1 River
// discards it after its first attempt, with more it waits to be retried.
type NotifyArgs struct {
	URL string `json:"url"`
}

// Kind is NotifyArgs' River job kind.
func (NotifyArgs) Kind() string { return "riverdemo_notify" }

// errUnreachable is what NotifyArgs' worker returns.
var errUnreachable = errors.New("riverdemo: notification endpoint unreachable (demo failure)")

type reportWorker struct {
	river.WorkerDefaults[ReportArgs]
}

func (reportWorker) Work(context.Context, *river.Job[ReportArgs]) error { return nil }

type notifyWorker struct {
	river.WorkerDefaults[NotifyArgs]
}

func (notifyWorker) Work(context.Context, *river.Job[NotifyArgs]) error { return errUnreachable }

// Jobs are the ids of the jobs Seed inserted, by the state they reached.
type Jobs struct {
	Completed []int64
	Retryable []int64
	Discarded []int64
	Scheduled []int64
}

// Seed inserts the demo jobs, works them with a River client of its own on
// Queue, and returns once each has reached its state (completed,
// retryable, discarded; one stays scheduled an hour ahead), or ctx ends.
func Seed(ctx context.Context, st *store.Store) (Jobs, error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, reportWorker{})
	river.AddWorker(workers, notifyWorker{})
	stop, err := st.StartJobs(ctx, &river.Config{
		Queues:            map[string]river.QueueConfig{Queue: {MaxWorkers: 2}},
		Workers:           workers,
		FetchPollInterval: 100 * time.Millisecond,
		FetchCooldown:     50 * time.Millisecond,
	})
	if err != nil {
		return Jobs{}, err
	}
	defer stop(context.WithoutCancel(ctx))

	c := st.JobClient()
	var jobs Jobs
	insert := func(into *[]int64, args river.JobArgs, opts river.InsertOpts) error {
		opts.Queue = Queue
		res, err := c.Insert(ctx, args, &opts)
		if err != nil {
			return fmt.Errorf("riverdemo: insert %s: %w", args.Kind(), err)
		}
		*into = append(*into, res.Job.ID)
		return nil
	}
	for _, step := range []func() error{
		func() error { return insert(&jobs.Completed, ReportArgs{Name: "daily settlement"}, river.InsertOpts{}) },
		func() error { return insert(&jobs.Completed, ReportArgs{Name: "loan book"}, river.InsertOpts{}) },
		func() error {
			return insert(&jobs.Discarded, NotifyArgs{URL: "https://merchant.invalid/hooks"}, river.InsertOpts{MaxAttempts: 1})
		},
		func() error {
			return insert(&jobs.Retryable, NotifyArgs{URL: "https://ledger.invalid/hooks"}, river.InsertOpts{MaxAttempts: 5})
		},
		func() error {
			return insert(&jobs.Scheduled, ReportArgs{Name: "month end"}, river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
		},
	} {
		if err := step(); err != nil {
			return jobs, err
		}
	}

	want := map[rivertype.JobState][]int64{
		rivertype.JobStateCompleted: jobs.Completed,
		rivertype.JobStateRetryable: jobs.Retryable,
		rivertype.JobStateDiscarded: jobs.Discarded,
		rivertype.JobStateScheduled: jobs.Scheduled,
	}
	for {
		pending := 0
		for state, ids := range want {
			for _, id := range ids {
				j, err := c.JobGet(ctx, id)
				if err != nil {
					return jobs, fmt.Errorf("riverdemo: job %d: %w", id, err)
				}
				if j.State != state {
					pending++
				}
			}
		}
		if pending == 0 {
			return jobs, nil
		}
		select {
		case <-ctx.Done():
			return jobs, fmt.Errorf("riverdemo: %d jobs not in their state yet: %w", pending, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
