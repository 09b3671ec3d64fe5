package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/paylock/paylock/store"
)

// Queue is the River queue of the periodic reconciliation jobs, and Kind
// their job kind.
const (
	Queue = "reconcile"
	Kind  = "reconcile_payments"
)

// JobArgs is one periodic reconciliation of one source.
type JobArgs struct {
	Source string `json:"source"`
}

// Kind is the job's kind.
func (JobArgs) Kind() string { return Kind }

// InsertOpts puts the job on Queue, tried once: the next period's job is
// the retry.
func (JobArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 1}
}

// Worker runs the periodic reconciliations: River's leader inserts one
// JobArgs per source every Interval (river.PeriodicJob, so one replica at a
// time schedules them), and any replica's client with Queue works them.
type Worker struct {
	river.WorkerDefaults[JobArgs]

	// Sources are the reconciliations by source name.
	Sources map[string]Payments
	// Interval is how often each source is reconciled; Window how far back
	// each run lists the provider's events.
	Interval, Window time.Duration
	// Logger gets one line per run.
	Logger *slog.Logger
	// Observe, when set, sees each run's report (its metrics).
	Observe func(source string, rep Report, err error)
}

// Timeout bounds a run: a window of events may take a while to list.
func (w *Worker) Timeout(*river.Job[JobArgs]) time.Duration { return 10 * time.Minute }

// Work reconciles the job's source over the last Window. A run that finds
// a missing or mismatched payment succeeds (it is logged and counted); one
// whose listing fails returns the error (River records it; the next period
// runs again).
func (w *Worker) Work(ctx context.Context, job *river.Job[JobArgs]) error {
	p, ok := w.Sources[job.Args.Source]
	if !ok {
		return river.JobCancel(fmt.Errorf("reconcile: no source %q to reconcile", job.Args.Source))
	}
	since := time.Now().Add(-w.Window)
	rep, err := p.Run(ctx, since)
	if w.Observe != nil {
		w.Observe(job.Args.Source, rep, err)
	}
	level := slog.LevelInfo
	if !rep.Clean() || err != nil {
		level = slog.LevelError
	}
	attrs := []slog.Attr{
		slog.String("source", job.Args.Source), slog.Time("since", since),
		slog.Int("seen", rep.Seen), slog.Int("already_recorded", rep.AlreadyRecorded),
		slog.Int("recorded_now", rep.RecordedNow), slog.Any("recorded", rep.Recorded),
		slog.Int("mismatched", len(rep.Mismatched)), slog.Int("errors", len(rep.Errors)),
	}
	for _, d := range rep.Mismatched {
		attrs = append(attrs, slog.String("mismatch_"+d.EventID, d.Err.Error()))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	w.Logger.LogAttrs(ctx, level, "payments reconciled", attrs...)
	return err
}

// AddTo adds the worker, its queue and one periodic job per source to
// rcfg.
func (w *Worker) AddTo(rcfg *river.Config) error {
	if err := store.AddJobWorker(rcfg, w, store.JobQueue{Name: Queue, MaxWorkers: 1}); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	for name := range w.Sources {
		rcfg.PeriodicJobs = append(rcfg.PeriodicJobs, river.NewPeriodicJob(
			river.PeriodicInterval(w.Interval),
			func() (river.JobArgs, *river.InsertOpts) { return JobArgs{Source: name}, nil },
			&river.PeriodicJobOpts{ID: Kind + ":" + name, RunOnStart: true},
		))
	}
	return nil
}
