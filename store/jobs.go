package store

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel/trace"
)

// River over the store's pool: the insert-only client that inserts the
// outbox jobs in the transactions that create their rows, the one loop that
// starts and stops a process's working client, and the one way a worker
// adds itself and its queue to that client's configuration.

var discardLogger = slog.New(slog.DiscardHandler)

// newInsertOnlyClient returns a River client that inserts jobs over pool
// and works none; a job inserted inside a span of tp carries its trace
// context (jobs_trace.go), and its queue is notified again NudgeAfter
// later (jobs_nudge.go).
func newInsertOnlyClient(pool *pgxpool.Pool, tp trace.TracerProvider) (*river.Client[pgx.Tx], error) {
	mw := append(jobMiddleware(tp), newInsertNudge(pool, NudgeAfter))
	c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: discardLogger, Middleware: mw})
	if err != nil {
		return nil, fmt.Errorf("store: river client: %w", err)
	}
	return c, nil
}

// JobClient returns the store's insert-only River client over its pool (it
// works no jobs), for tools that read and manage River's jobs through
// River's own API, such as River UI on the admin listener. Insert jobs
// through the store's methods, which insert them in the transactions that
// create their rows.
func (s *Store) JobClient() *river.Client[pgx.Tx] { return s.jobs }

// StartJobs starts a River client over the store's pool that works cfg's
// queues with cfg's workers, in the current schema, and returns stop, which
// stops it gracefully: no new jobs are fetched and those in hand finish (or
// stop's ctx ends). ctx bounds the start only: the client runs, and its
// jobs' contexts live, until stop is called. Behind a pooler in transaction mode (a pooled ExecMode)
// the client cannot LISTEN: StartJobs sets cfg.PollOnly, and jobs are found
// by polling every cfg.FetchPollInterval. Discarded jobs are kept (cfg's
// DiscardedJobRetentionPeriod -1 unless set): see review_retention.go.
// Every job is worked in a span of Config.TracerProvider linked to the
// span that inserted it (otelriver's middleware, added to cfg: see
// jobs_trace.go). Errors wrap ErrUnavailable when
// the database cannot be reached; nothing is started then.
func (s *Store) StartJobs(ctx context.Context, cfg *river.Config) (stop func(context.Context) error, err error) {
	if s.pooled {
		cfg.PollOnly = true
	}
	keepDiscarded(cfg)
	traceJobs(cfg, s.cfg.TracerProvider)
	c, err := river.NewClient(riverpgxv5.New(s.pool), cfg)
	if err != nil {
		return nil, fmt.Errorf("store: river client: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, translate("start jobs", err)
	}
	// Cancelling Start's context would be River's hard stop, cancelling the
	// jobs in hand: only stop ends the client.
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, translate("start jobs", err)
	}
	return c.Stop, nil
}

// RunJobs works cfg's queues (StartJobs) until ctx is done, then stops
// fetching, lets the jobs in hand finish and returns nil. While the
// database cannot be reached at start it tries again with backoff (logged
// on logger); once started, River reconnects by itself. started, when not
// nil, is called once the client runs. It is the one start/stop loop of
// River in paylock: "paylock worker", serve's jobs and payout.Worker.Run
// all run through it.
func (s *Store) RunJobs(ctx context.Context, cfg *river.Config, logger *slog.Logger, started func()) error {
	bo := &backoff.ExponentialBackOff{
		InitialInterval:     500 * time.Millisecond,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         30 * time.Second,
	}
	bo.Reset()
	var stop func(context.Context) error
	for {
		var err error
		if stop, err = s.StartJobs(ctx, cfg); err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		wait := bo.NextBackOff()
		logger.WarnContext(ctx, "starting the job worker failed; trying again", slog.Any("error", err), slog.Duration("in", wait))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	if started != nil {
		started()
	}
	<-ctx.Done()
	if err := stop(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("store: stop jobs: %w", err)
	}
	return nil
}

// JobQueue is a worker's queue in a process's River client, and the bounds
// its jobs need of the client: see AddJobWorker.
type JobQueue struct {
	Name       string
	MaxWorkers int
	// FetchCooldown, when positive, is the queue's least wait between two
	// fetches (River's QueueConfig.FetchCooldown; the client's otherwise).
	FetchCooldown time.Duration
	// JobTimeout and RescueAfter, when positive, raise the client's
	// JobTimeout and RescueStuckJobsAfter to at least these.
	JobTimeout, RescueAfter time.Duration
}

// AddJobWorker registers w in rcfg (creating its Workers bundle and Queues
// when nil) and adds q, so that one River client per process works the
// payout, forward and reconcile queues side by side. Each worker's AddTo
// calls it. An error (a worker of w's kind is registered already) is
// River's; rcfg's queues are then unchanged.
func AddJobWorker[T river.JobArgs](rcfg *river.Config, w river.Worker[T], q JobQueue) error {
	if rcfg.Workers == nil {
		rcfg.Workers = river.NewWorkers()
	}
	if err := river.AddWorkerSafely(rcfg.Workers, w); err != nil {
		return err
	}
	if rcfg.Queues == nil {
		rcfg.Queues = map[string]river.QueueConfig{}
	}
	qc := river.QueueConfig{MaxWorkers: q.MaxWorkers}
	if q.FetchCooldown > 0 {
		// Never past the queue's poll interval (River refuses that).
		qc.FetchCooldown = min(q.FetchCooldown, cmp.Or(rcfg.FetchPollInterval, q.FetchCooldown))
	}
	rcfg.Queues[q.Name] = qc
	if q.JobTimeout > 0 {
		rcfg.JobTimeout = max(rcfg.JobTimeout, q.JobTimeout)
	}
	if q.RescueAfter > 0 {
		rcfg.RescueStuckJobsAfter = max(rcfg.RescueStuckJobsAfter, q.RescueAfter)
	}
	return nil
}
