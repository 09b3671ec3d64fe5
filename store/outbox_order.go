package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A payment's messages reach each destination in version order: the
// forward worker, before it sends version n of a payment to a destination,
// asks ForwardsBefore whether a forward of an earlier version of the same
// payment to the same destination is still unfinished (it waits) or was
// given up (it holds this one too). River's job table is the truth: no
// sequence of paylock's own can drift from the jobs that carry the
// messages, and versions that forward nothing (a gap) hold nothing.

// Version is the version of the payment state a forward's message
// carries: its State's, or 1 for a payment.recorded without one (a payment
// recorded first, and every job of a paylock that did not version its
// messages). 0 means the forward is not ordered: a disbursement's, whose
// statuses are forwarded once each and say their previous status.
func (a ForwardArgs) Version() int {
	switch {
	case a.TransactionID == "" || a.Disbursement != nil:
		return 0
	case a.State != nil:
		return a.State.Version
	case a.Type == ForwardPaymentRecorded:
		return 1
	}
	return 0
}

// EarlierForwards is what precedes one forward of a payment to a
// destination: the forwards of the same payment to the same destination
// whose version is smaller, as River holds them, completed ones left out.
type EarlierForwards struct {
	// Unfinished counts those River will still run (available, scheduled,
	// retryable, running, pending); DueAt is when the first of them is
	// due (its scheduled_at; in the past when it is due or running).
	Unfinished int
	DueAt      time.Time
	// GivenUpJob is the oldest of those River stopped trying (discarded,
	// or cancelled), when none is unfinished: 0 when none was given up.
	GivenUpJob     int64
	GivenUpVersion int
}

// forwardOrderIndex is the index of River's job table that keeps
// earlierForwardsSQL cheap: the forward jobs not yet completed, by
// payment. It is partial, so it stays small whatever the job table holds;
// applyMigrations creates it after River's own migrations (river_job is
// River's).
const (
	forwardOrderIndex    = "river_job_forward_order_idx"
	forwardOrderIndexSQL = `CREATE INDEX IF NOT EXISTS river_job_forward_order_idx ON river_job
		((args->>'transaction_id'), (args->>'source'))
		WHERE kind = 'forward' AND state <> 'completed'`
	// forwardWaitingIndex is the waiting forward jobs of a destination,
	// oldest first: what the breaker's probe, release and sweep read
	// (outbox_health.go).
	forwardWaitingIndex    = "river_job_forward_waiting_idx"
	forwardWaitingIndexSQL = `CREATE INDEX IF NOT EXISTS river_job_forward_waiting_idx ON river_job
		((args->>'destination'), id)
		WHERE kind = 'forward' AND state IN ('available', 'scheduled', 'retryable')`
)

// earlierForwardsSQL reads, for job $5 of payment ($1, $2) to destination
// $3 (or, for an older job, URL $4) at version $6, the earlier versions'
// jobs that are not completed. A job without a state is version 1 (see
// ForwardArgs.Version); the job itself, sent again by a replay, is left
// out, so it never waits for itself.
const earlierForwardsSQL = `
WITH earlier AS (
	SELECT id, state, scheduled_at, coalesce((args->'state'->>'version')::int, 1) AS version
	FROM river_job
	WHERE kind = 'forward' AND state <> 'completed'
	  AND args->>'transaction_id' = $1 AND args->>'source' = $2
	  AND coalesce(args->>'destination', '') = $3 AND coalesce(args->>'url', '') = $4
	  AND id <> $5
)
SELECT
	count(*) FILTER (WHERE state NOT IN ('discarded', 'cancelled')),
	min(scheduled_at) FILTER (WHERE state NOT IN ('discarded', 'cancelled')),
	(array_agg(id ORDER BY version, id) FILTER (WHERE state IN ('discarded', 'cancelled')))[1],
	(array_agg(version ORDER BY version, id) FILTER (WHERE state IN ('discarded', 'cancelled')))[1]
FROM earlier WHERE version < $6`

// ForwardsBefore reports what precedes forward job jobID, whose arguments
// are a, to its destination (EarlierForwards). A forward that is not
// ordered (a.Version() below 2) has nothing before it, and the database
// is not asked. Errors wrap ErrUnavailable when the database failed
// transiently.
func (s *Payments) ForwardsBefore(ctx context.Context, jobID int64, a ForwardArgs) (EarlierForwards, error) {
	var e EarlierForwards
	v := a.Version()
	if v < 2 {
		return e, nil
	}
	var due *time.Time
	var givenUp *int64
	var givenUpVersion *int
	err := s.pool.QueryRow(ctx, earlierForwardsSQL, a.TransactionID, a.Source, a.Destination, a.URL, jobID, v).
		Scan(&e.Unfinished, &due, &givenUp, &givenUpVersion)
	if err != nil {
		return EarlierForwards{}, translate("read earlier forwards", err)
	}
	if due != nil {
		e.DueAt = *due
	}
	if e.Unfinished == 0 && givenUp != nil {
		e.GivenUpJob, e.GivenUpVersion = *givenUp, *givenUpVersion
	}
	return e, nil
}

// heldForwardsSQL finds the given-up forwards of the payment and
// destination of job $1 whose version is above its own: those that were
// held behind it (or given up on their own, which a retry sends again
// as well, in order).
const heldForwardsSQL = `
SELECT l.id FROM river_job j
JOIN river_job l ON l.kind = 'forward' AND l.state IN ('discarded', 'cancelled')
	AND l.args->>'transaction_id' = j.args->>'transaction_id' AND l.args->>'source' = j.args->>'source'
	AND coalesce(l.args->>'destination', '') = coalesce(j.args->>'destination', '')
	AND coalesce(l.args->>'url', '') = coalesce(j.args->>'url', '')
	AND coalesce((l.args->'state'->>'version')::int, 1) > coalesce((j.args->'state'->>'version')::int, 1)
	AND l.id <> j.id
WHERE j.id = $1 AND j.kind = 'forward' AND j.args->>'transaction_id' <> ''
ORDER BY l.id`

// releaseHeldTx makes available again, in tx, the given-up later versions
// of job id's payment to its destination (heldForwardsSQL), so that a
// retried forward takes the ones it held with it; they wait for it (the
// worker's ForwardsBefore) and go after it, in order. It returns how many
// it put back. Its errors are the driver's: the caller translates them.
func (s *base) releaseHeldTx(ctx context.Context, tx pgx.Tx, id int64) (int, error) {
	rows, err := tx.Query(ctx, heldForwardsSQL, id)
	if err != nil {
		return 0, fmt.Errorf("find held forwards: %w", err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("find held forwards: %w", err)
	}
	for _, h := range held {
		if _, err := s.jobs.JobRetryTx(ctx, tx, h); err != nil {
			return 0, fmt.Errorf("retry held forward %d: %w", h, err)
		}
	}
	return len(held), nil
}
