package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river"

	"github.com/paylock/paylock/store"
)

// A payment's messages reach each destination in version order: version
// n+1 is not sent before version n was delivered, or given up. River runs
// a destination's jobs Concurrency at a time, in any order, on every
// replica; so before a payment's message of version n goes out, the worker
// asks the job table (Store.ForwardsBefore) about the same payment's
// earlier versions to the same destination:
//
//   - one is unfinished (due, scheduled, retrying, running, pending): this
//     one is snoozed, which spends none of its attempts, and asked again
//     after a short wait (snoozeFor), or when the earlier one is due;
//   - one was given up (discarded after its attempts, or cancelled): this
//     one is held, cancelled with ErrHeld, and so is every later one. The
//     given-up one is in the review queue; retrying it (paylock forward
//     retry, the console) puts the ones it held back too, and they follow
//     it in order.
//
// A message of version 1 (every payment.recorded of a payment recorded
// first, and every job of an older paylock, which carried no version) has
// nothing before it: it costs no query. A disbursement's messages are not
// ordered (store.ForwardArgs.Version). A replayed job is not held by
// itself.

// ErrHeld means a payment's message was held back, as given up, because
// an earlier version of the same payment to the same destination was given
// up: retrying that one sends both, in order.
var ErrHeld = errors.New("forward: held behind a given-up earlier version")

// Snoozes while an earlier version is unfinished: from snoozeMin, doubled
// per snooze up to snoozeMax; a wait for an earlier version due later (a
// retry's backoff) lasts until it is due, up to snoozeDueMax.
const (
	snoozeMin    = 25 * time.Millisecond
	snoozeMax    = 2 * time.Second
	snoozeDueMax = 30 * time.Second
)

// inOrder returns nil when job may be sent now, and otherwise what Work
// returns: a snooze, or the cancellation of a held job.
func (w *Worker) inOrder(ctx context.Context, job *river.Job[store.ForwardArgs]) error {
	a := job.Args
	if a.Version() < 2 {
		return nil
	}
	e, err := w.st.ForwardsBefore(ctx, job.ID, a)
	switch {
	case err != nil:
		ev := Event{JobID: job.ID, Attempt: job.Attempt, Type: a.Type, WebhookID: a.ID, Destination: a.Target(),
			Outcome: OutcomeFailedAttempt, Err: fmt.Errorf("forward: read earlier versions: %w", err)}
		if job.Attempt >= job.MaxAttempts {
			ev.Outcome = OutcomeDiscarded
		}
		w.done(ctx, a, ev)
		return ev.Err
	case e.Unfinished > 0:
		d := snoozeFor(time.Now(), e.DueAt, snoozes(job.Metadata))
		w.log.DebugContext(ctx, "forward waits for an earlier version", slog.Int64("job_id", job.ID), slog.String("webhook_id", a.ID),
			slog.Int("version", a.Version()), slog.Int("earlier_unfinished", e.Unfinished), slog.Duration("snooze", d))
		return river.JobSnooze(d)
	case e.GivenUpJob != 0:
		err := fmt.Errorf("%w: version %d of this payment to %s was given up (forward job %d); retrying it sends this one after it",
			ErrHeld, e.GivenUpVersion, a.Target(), e.GivenUpJob)
		w.done(ctx, a, Event{JobID: job.ID, Attempt: job.Attempt, Type: a.Type, WebhookID: a.ID, Destination: a.Target(),
			Outcome: OutcomeDiscarded, Err: err})
		return river.JobCancel(err)
	}
	return nil
}

// snoozeFor is how long a job that snoozed n times already waits, at now,
// for an earlier version first due at due.
func snoozeFor(now, due time.Time, n int) time.Duration {
	d := snoozeMin << min(n, 7)
	d = min(d, snoozeMax)
	if until := due.Sub(now); until > d {
		d = min(until, snoozeDueMax)
	}
	return d + rand.N(d/4+1) // not in step with the others waiting
}

// snoozes is how many times River snoozed a job (its metadata's
// "snoozes").
func snoozes(metadata []byte) int {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(metadata, &m)
	return m.Snoozes
}
