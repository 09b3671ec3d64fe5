package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The worker's updates. Each is guarded on status = 'pending': a row that
// moved on (another attempt saved its outcome first, or a status
// notification came) is left alone, and the update returns ErrNotPending.
const (
	beginAttemptSQL = `UPDATE disbursements SET attempts = attempts + 1,
	first_attempt_at = coalesce(first_attempt_at, now()), updated_at = now()
WHERE id = $1 AND status = 'pending' AND review_reason IS NULL
RETURNING ` + disbursementColumns + `, extract(epoch FROM now() - first_attempt_at)::float8`

	pendingGuard = ` WHERE id = $1 AND status = 'pending'`

	markSentSQL = `UPDATE disbursements SET status = $2, provider_ref = $3, status_since = now(),
	updated_at = now()` + pendingGuard + ` RETURNING ` + disbursementColumns

	markFailedSQL = `UPDATE disbursements SET status = 'failed', last_error = $2, status_since = now(),
	updated_at = now()` + pendingGuard + ` RETURNING ` + disbursementColumns

	noteRetrySQL = `UPDATE disbursements SET next_attempt_at = now() + $2 * interval '1 millisecond',
	last_error = $3, updated_at = now()` + pendingGuard

	flagSQL = `UPDATE disbursements SET review_reason = $2, updated_at = now()` + pendingGuard

	selectByIDSQL = `SELECT ` + disbursementColumns + ` FROM disbursements WHERE id = $1`
)

// BeginAttempt counts an attempt of disbursement id's payout (attempts + 1,
// first_attempt_at set on the first) and returns the row, with
// SinceFirstAttempt. A row no longer pending, or flagged for review, is
// returned unchanged with ErrNotPending: there is nothing to attempt. An
// unknown id is ErrNotFound.
func (s *Disbursements) BeginAttempt(ctx context.Context, id int64) (Disbursement, error) {
	var since float64
	d, err := scanDisbursement(s.pool.QueryRow(ctx, beginAttemptSQL, id), &since)
	switch {
	case err == nil:
		d.SinceFirstAttempt = time.Duration(since * float64(time.Second))
		return d, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return Disbursement{}, translate("begin attempt", err)
	}
	cur, err := disbursementByID(ctx, s.pool, id)
	if err != nil {
		return Disbursement{}, err
	}
	return cur, fmt.Errorf("%w: disbursement %d is %s (review: %q)", ErrNotPending, id, cur.Status, cur.ReviewReason)
}

// disbursementByID reads disbursement id through q: ErrNotFound when no
// row has it.
func disbursementByID(ctx context.Context, q querier, id int64) (Disbursement, error) {
	d, err := scanDisbursement(q.QueryRow(ctx, selectByIDSQL, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Disbursement{}, fmt.Errorf("%w: disbursement %d", ErrNotFound, id)
	case err != nil:
		return Disbursement{}, translate("read disbursement", err)
	}
	return d, nil
}

// MarkSent records that the provider accepted the payout as providerRef:
// status becomes sent, or paid or failed when the provider already said so.
// The status hook (OnStatusChange) runs in its transaction.
func (s *Disbursements) MarkSent(ctx context.Context, id int64, providerRef string, status DisbursementStatus) error {
	if status.Rank() < StatusSent.Rank() {
		return fmt.Errorf("store: mark sent: status %q is not sent, paid or failed", status)
	}
	return s.leavePending(ctx, "mark sent", markSentSQL, id, string(status), providerRef)
}

// MarkFailed records that the provider refused the payout: nothing was paid.
// The status hook runs in its transaction.
func (s *Disbursements) MarkFailed(ctx context.Context, id int64, lastErr string) error {
	return s.leavePending(ctx, "mark failed", markFailedSQL, id, lastErr)
}

// NoteRetry keeps lastErr as the row's last_error and notes in
// next_attempt_at when the payout job is due again (after delay, by the
// database's clock). The row stays pending; River schedules the retry.
func (s *Disbursements) NoteRetry(ctx context.Context, id int64, delay time.Duration, lastErr string) error {
	return s.guarded(ctx, "note retry", noteRetrySQL, id, delay.Milliseconds(), lastErr)
}

// FlagForReview sets the row's review_reason: no attempt begins on it any
// more (BeginAttempt) until a person decides.
func (s *Disbursements) FlagForReview(ctx context.Context, id int64, reason string) error {
	return s.guarded(ctx, "flag for review", flagSQL, id, reason)
}

func (s *Disbursements) guarded(ctx context.Context, op, sql string, id int64, args ...any) error {
	tag, err := s.pool.Exec(ctx, sql, append([]any{id}, args...)...)
	if err != nil {
		return translate(op, err)
	}
	if tag.RowsAffected() == 0 {
		return s.notPending(ctx, op, id)
	}
	return nil
}

// notPending explains a guarded update that changed nothing.
func (s *Disbursements) notPending(ctx context.Context, op string, id int64) error {
	cur, err := disbursementByID(ctx, s.pool, id)
	if err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	return fmt.Errorf("%w: %s: disbursement %d is %s", ErrNotPending, op, id, cur.Status)
}

// leavePending moves a pending row to a new status with sql (which returns
// the row) and runs the status hook, in one transaction.
func (s *Disbursements) leavePending(ctx context.Context, op, sql string, id int64, args ...any) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return translate(op+": begin", err)
	}
	d, err := scanDisbursement(tx.QueryRow(ctx, sql, append([]any{id}, args...)...))
	if err == nil {
		err = s.statusChanged(ctx, tx, StatusPending, d)
	} else if errors.Is(err, pgx.ErrNoRows) {
		s.rollback(ctx, tx)
		return s.notPending(ctx, op, id)
	} else {
		err = translate(op, err)
	}
	if err != nil {
		s.rollback(ctx, tx)
		return err
	}
	if err := s.commit(ctx, tx); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// StatusChange is a disbursement's move to another status, as seen inside
// the transaction that makes it.
type StatusChange struct {
	From         DisbursementStatus
	Disbursement Disbursement // as it stands after the change
}

// StatusHook runs inside every transaction that changes a disbursement's
// status (MarkSent, MarkFailed, ApplyPayoutStatus), after the update and
// before COMMIT; an error rolls the change back and is returned to the
// caller. It is the seam for what must follow a status change exactly when
// it commits, such as forwarding it (a River job inserted with tx). Use tx
// for that only; never commit or roll it back.
type StatusHook func(ctx context.Context, tx pgx.Tx, c StatusChange) error

// OnStatusChange sets the status hook (nil: none). Set it before the store
// is used; it is not safe to change concurrently with status changes.
func (s *Disbursements) OnStatusChange(h StatusHook) { s.onStatus = h }

func (s *Disbursements) statusChanged(ctx context.Context, tx pgx.Tx, from DisbursementStatus, d Disbursement) error {
	if s.onStatus == nil {
		return nil
	}
	if err := s.onStatus(ctx, tx, StatusChange{From: from, Disbursement: d}); err != nil {
		return fmt.Errorf("store: status hook for disbursement %d (%s → %s): %w", d.ID, from, d.Status, err)
	}
	return nil
}

const selectByRefSQL = `SELECT ` + disbursementColumns + ` FROM disbursements WHERE provider_ref = $1`

const applyStatusSQL = `
UPDATE disbursements SET status = $3, status_since = now(), updated_at = now(),
	last_error = CASE WHEN $3 = 'failed' THEN coalesce(nullif($4, ''), 'the provider reported the payout failed') ELSE last_error END
WHERE provider_ref = $1 AND status = $2
RETURNING ` + disbursementColumns

// ApplyPayoutStatus records a provider's status event for payout payoutID
// and moves its disbursement forward, in one transaction. status must be
// paid or failed; reason is kept as last_error of a failed payout.
//
// It returns the disbursement as it stands afterwards and whether the event
// changed it: an event whose status does not rank above the current one
// (stale, out of order, or after another terminal status) changes nothing
// but is recorded as received. Errors:
//
//   - ErrNotFound: no disbursement has this provider_ref (yet). Nothing is
//     recorded, so the provider's retry is processed afresh;
//   - ErrEventSeen (and ErrDuplicate): the event id was received before for
//     this payout; nothing changed;
//   - ErrMismatch: the event id was received before for another payout;
//   - ErrCommitUnknown, ErrUnavailable and plain errors as AcceptDisbursement.
func (s *Disbursements) ApplyPayoutStatus(ctx context.Context, eventID, payoutID string, status DisbursementStatus, reason string) (Disbursement, bool, error) {
	if status.Rank() != StatusPaid.Rank() {
		return Disbursement{}, false, fmt.Errorf("store: apply payout status: %q is not paid or failed", status)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Disbursement{}, false, translate("apply payout status: begin", err)
	}
	d, applied, err := s.applyStatusTx(ctx, tx, eventID, payoutID, status, reason)
	if err != nil {
		s.rollback(ctx, tx)
		return d, false, err
	}
	if err := s.commit(ctx, tx); err != nil {
		return Disbursement{}, false, fmt.Errorf("apply payout status: %w", err)
	}
	return d, applied, nil
}

func (s *Disbursements) applyStatusTx(ctx context.Context, tx pgx.Tx, eventID, payoutID string, status DisbursementStatus, reason string) (Disbursement, bool, error) {
	fresh, err := insertEvent(ctx, tx, SourcePayouts, eventID, payoutID)
	if err != nil {
		return Disbursement{}, false, err
	}
	if !fresh {
		return Disbursement{}, false, fmt.Errorf("%w: payout event %q for %q", ErrEventSeen, eventID, payoutID)
	}
	// Compare and set: the update applies only if the status read is still
	// current. A concurrent change makes it miss; read again and decide again.
	for range 3 {
		cur, err := scanDisbursement(tx.QueryRow(ctx, selectByRefSQL, payoutID))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return Disbursement{}, false, fmt.Errorf("%w: no disbursement has payout %q", ErrNotFound, payoutID)
		case err != nil:
			return Disbursement{}, false, translate("apply payout status: read", err)
		}
		if status.Rank() <= cur.Status.Rank() {
			return cur, false, nil
		}
		d, err := scanDisbursement(tx.QueryRow(ctx, applyStatusSQL, payoutID, string(cur.Status), string(status), reason))
		switch {
		case err == nil:
			if err := s.statusChanged(ctx, tx, cur.Status, d); err != nil {
				return Disbursement{}, false, err
			}
			return d, true, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return Disbursement{}, false, translate("apply payout status: update", err)
		}
	}
	return Disbursement{}, false, fmt.Errorf("%w: payout %q keeps changing", ErrUnavailable, payoutID)
}
