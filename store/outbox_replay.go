package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// What the admin console and "paylock forward replay" read and do: a
// payment's forward jobs, and its payment.recorded event sent again.

// forwardJobIDsSQL finds the forward jobs of some webhook-ids, newest first.
const forwardJobIDsSQL = `
SELECT id, state::text FROM river_job
WHERE kind = 'forward' AND args->>'id' = ANY($1::text[])
ORDER BY id DESC`

type jobRef struct {
	id    int64
	state string
}

func (s *Outbox) forwardJobRefs(ctx context.Context, webhookIDs ...string) ([]jobRef, error) {
	rows, err := s.pool.Query(ctx, forwardJobIDsSQL, webhookIDs)
	if err != nil {
		return nil, translate("find forward jobs", err)
	}
	refs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobRef, error) {
		var j jobRef
		err := r.Scan(&j.id, &j.state)
		return j, err
	})
	if err != nil {
		return nil, translate("find forward jobs", err)
	}
	return refs, nil
}

// PaymentForwards returns the payment's payment.recorded forward jobs
// (webhook-id PaymentForwardID), newest first, as River holds them: none
// when the source forwards nothing or River already deleted them; then
// its messages in the express lane, waiting or delivered (ID 0: no River
// job; see expressForwards).
func (s *Outbox) PaymentForwards(ctx context.Context, source, transactionID string) ([]ForwardJob, error) {
	return s.forwardJobs(ctx, PaymentForwardID(source, transactionID))
}

// EventForwards returns the forward jobs of the changes of state that the
// lifecycle events eventIDs of source made (webhook-ids EventForwardID),
// newest first, as River holds them.
func (s *Outbox) EventForwards(ctx context.Context, source string, eventIDs []string) ([]ForwardJob, error) {
	ids := make([]string, len(eventIDs))
	for i, e := range eventIDs {
		ids[i] = EventForwardID(source, e)
	}
	return s.forwardJobs(ctx, ids...)
}

// forwardJobs reads the forward jobs of webhookIDs, newest first.
func (s *Outbox) forwardJobs(ctx context.Context, webhookIDs ...string) ([]ForwardJob, error) {
	refs, err := s.forwardJobRefs(ctx, webhookIDs...)
	if err != nil {
		return nil, err
	}
	out := make([]ForwardJob, 0, len(refs))
	for _, ref := range refs {
		row, err := s.jobs.JobGet(ctx, ref.id)
		if errors.Is(err, rivertype.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, translate("read forward job", err)
		}
		j, err := forwardJob(row)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	lane, err := s.expressForwards(ctx, webhookIDs...)
	if err != nil {
		return nil, err
	}
	return append(out, lane...), nil
}

// expressForwardsSQL reads the express lane's messages of some
// webhook-ids: those waiting, then those it delivered (forward_sent).
const expressForwardsSQL = `
SELECT message_id, type, destination, source, transaction_id, 'available', created_at, NULL::timestamptz, max_attempts, claims
FROM forward_express WHERE message_id = ANY($1::text[])
UNION ALL
SELECT message_id, type, destination, source, transaction_id, 'completed', created_at, sent_at, 0, 1
FROM forward_sent WHERE message_id = ANY($1::text[])
ORDER BY 7 DESC`

// expressForwards reads the express lane's messages of webhookIDs as
// forward jobs without a River id (ID 0): waiting ("available", Attempt
// its claims so far) or delivered ("completed" at its FinalizedAt, one
// attempt).
func (s *Outbox) expressForwards(ctx context.Context, webhookIDs ...string) ([]ForwardJob, error) {
	rows, err := s.pool.Query(ctx, expressForwardsSQL, webhookIDs)
	if err != nil {
		return nil, translate("find forwards (express)", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ForwardJob, error) {
		var j ForwardJob
		var sent *time.Time
		err := r.Scan(&j.Args.ID, &j.Args.Type, &j.Args.Destination, &j.Args.Source, &j.Args.TransactionID, &j.State,
			&j.CreatedAt, &sent, &j.MaxAttempts, &j.Attempt)
		if sent != nil {
			j.FinalizedAt, j.AttemptedAt = *sent, *sent
			j.MaxAttempts = j.Attempt
		}
		j.ScheduledAt = j.CreatedAt
		return j, err
	})
	if err != nil {
		return nil, translate("find forwards (express)", err)
	}
	return out, nil
}

// ReplayFilter selects the payments whose forward ReplayForwards sends
// again: those of Source received in [Since, Until) (a zero Until is no
// upper bound), or only TransactionID's when it is set.
type ReplayFilter struct {
	Source        string // "" is DefaultSource
	Since, Until  time.Time
	TransactionID string
	// Destination is where a payment with no forward job left is
	// forwarded (a job River still holds keeps its own); required unless
	// DryRun.
	Destination string
	DryRun      bool // only count
}

// ReplayResult counts what ReplayForwards did (or, for a dry run, would
// do).
type ReplayResult struct {
	Payments int // payments selected
	Retried  int // finished jobs (completed, discarded, cancelled) made available again
	Inserted int // fresh jobs, where River held none
	Pending  int // jobs still waiting or running, left as they are: they will send it anyway
}

const replayPaymentsSQL = `
SELECT id, transaction_id FROM payments
WHERE source = $1 AND amount IS NOT NULL
  AND ($2 = '' OR transaction_id = $2)
  AND ($3::timestamptz IS NULL OR received_at >= $3)
  AND ($4::timestamptz IS NULL OR received_at < $4)
  AND id > $5
ORDER BY id
LIMIT 500`

// ReplayForwards forwards the payment.recorded event of every payment f
// selects again, with its original webhook-id (PaymentForwardID), so that
// receivers deduplicate it. Forward jobs are unique by webhook-id while
// River keeps them, so a payment whose job still exists has that job
// re-run (River's JobRetry, which also takes completed and discarded
// jobs); one whose job River already deleted gets a fresh job to
// f.Destination.
// Errors wrap ErrForward for a bad f, ErrUnavailable when the database
// failed transiently; the result counts what was done before an error.
func (s *Outbox) ReplayForwards(ctx context.Context, f ReplayFilter) (ReplayResult, error) {
	var res ReplayResult
	if f.Source == "" {
		f.Source = DefaultSource
	}
	if f.TransactionID == "" && f.Since.IsZero() {
		return res, fmt.Errorf("%w: a replay needs a start time or a transaction id", ErrForward)
	}
	if !f.DryRun && f.Destination == "" {
		return res, fmt.Errorf("%w: source %q has no forward destination", ErrForward, f.Source)
	}
	var after int64
	for {
		rows, err := s.pool.Query(ctx, replayPaymentsSQL, f.Source, f.TransactionID, nullTime(f.Since), nullTime(f.Until), after)
		if err != nil {
			return res, translate("replay: select payments", err)
		}
		type pay struct {
			id  int64
			txn string
		}
		batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pay, error) {
			var p pay
			err := r.Scan(&p.id, &p.txn)
			return p, err
		})
		if err != nil {
			return res, translate("replay: select payments", err)
		}
		if len(batch) == 0 {
			return res, nil
		}
		for _, p := range batch {
			after = p.id
			res.Payments++
			if err := s.replayOne(ctx, f, p.txn, &res); err != nil {
				return res, err
			}
		}
	}
}

func (s *Outbox) replayOne(ctx context.Context, f ReplayFilter, txn string, res *ReplayResult) error {
	refs, err := s.forwardJobRefs(ctx, PaymentForwardID(f.Source, txn))
	if err != nil {
		return err
	}
	if len(refs) == 0 {
		res.Inserted++
		if f.DryRun {
			return nil
		}
		args := ForwardArgs{ID: PaymentForwardID(f.Source, txn), Type: ForwardPaymentRecorded, Destination: f.Destination, Source: f.Source, TransactionID: txn}
		if args.State, err = s.replayState(ctx, f.Source, txn); err != nil {
			return err
		}
		if _, err := s.jobs.Insert(ctx, args, &river.InsertOpts{MaxAttempts: s.cfg.ForwardMaxAttempts}); err != nil {
			return translate("replay: insert forward job", err)
		}
		return nil
	}
	switch j := refs[0]; rivertype.JobState(j.state) {
	case rivertype.JobStateCompleted, rivertype.JobStateDiscarded, rivertype.JobStateCancelled:
		res.Retried++
		if f.DryRun {
			return nil
		}
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := s.jobs.JobRetryTx(ctx, tx, j.id); err != nil {
				return err
			}
			_, err := s.releaseHeldTx(ctx, tx, j.id)
			return err
		})
		if err != nil {
			return translate("replay: retry forward job", err)
		}
	default:
		res.Pending++
	}
	return nil
}

// replayState is the state a fresh payment.recorded job of a payment
// carries when it is sent again: nil for a payment still succeeded at
// version 1 (what a job without state says), else its current state and
// version. A state is the same for a version wherever it is sent, so a
// receiver ordering by version is not misled.
func (s *Outbox) replayState(ctx context.Context, source, txn string) (*ForwardedState, error) {
	var st ForwardedState
	err := s.pool.QueryRow(ctx, `SELECT status, amount, currency::text, amount_refunded, coalesce(dispute, ''), version, coalesce(event_id, '')
		FROM payments WHERE source = $1 AND transaction_id = $2 AND amount IS NOT NULL`, source, txn).Scan(
		&st.Status, &st.Amount, &st.Currency, &st.AmountRefunded, &st.Dispute, &st.Version, &st.EventID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, translate("replay: read payment state", err)
	case st.Version == 1 && st.Status == "succeeded":
		return nil, nil
	}
	return &st, nil
}
