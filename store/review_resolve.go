package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"
)

// Resolve is a person's decision on a review item.
type Resolve struct {
	Action string // one of ReviewActions[kind]
	Note   string // why; required
	Who    string // who decided; required
	// Payout is what the payout provider answered to a lookup of the
	// disbursement's idempotency key, made by the caller just before:
	// adopt needs the payout it found (Ref and Status), fail needs
	// NoneFound. ResolveReview refuses adopt and fail without it.
	Payout ProviderPayout
}

// ProviderPayout is the provider's answer to a lookup of a key.
type ProviderPayout struct {
	Ref       string             // the payout's id
	Status    DisbursementStatus // sent (the provider's pending), paid or failed
	NoneFound bool               // the provider has no payout for the key
}

// ResolveReview applies r to item id and records it (review_resolutions),
// in one transaction, and returns the item as it stands after (with the
// resolution; a resolved disbursement is returned as the row stands,
// no longer flagged). Each resolution checks the item first:
//
//   - mismatch acknowledge: the item is open. The payment is not touched.
//   - disbursement adopt: the row is pending and flagged, r.Payout.Ref is
//     set; the row becomes sent (or the provider's paid/failed) with that
//     provider_ref, the flag cleared, the status hook run.
//   - disbursement fail: pending, flagged and r.Payout.NoneFound; the row
//     becomes failed, the flag cleared, last_error noting the review.
//   - disbursement retry: pending and flagged; the flag is cleared and the
//     payout job made available again (River's JobRetry, or a new job if
//     it is gone), with the same idempotency key.
//   - forward retry / acknowledge: the job is discarded (and, for
//     acknowledge, not acknowledged since).
//
// Errors: ErrNotFound (no such item), ErrReviewAction (an action the kind
// does not allow, no note, no author), ErrReviewRefused (the item is not in
// a state the action applies to, or the provider's answer does not allow
// it), ErrUnavailable. On any error nothing changed.
func (s *Review) ResolveReview(ctx context.Context, id string, r Resolve) (ReviewItem, error) {
	kind, n, err := ParseReviewID(id)
	if err != nil {
		return ReviewItem{}, err
	}
	switch {
	case !slices.Contains(ReviewActions[kind], r.Action):
		return ReviewItem{}, reviewErr(ErrReviewAction, "%q on a %s item (allowed: %s)", r.Action, kind,
			strings.Join(ReviewActions[kind], ", "))
	case strings.TrimSpace(r.Note) == "":
		return ReviewItem{}, reviewErr(ErrReviewAction, "a note saying why is required")
	case strings.TrimSpace(r.Who) == "":
		return ReviewItem{}, reviewErr(ErrReviewAction, "who resolves the item is required")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return ReviewItem{}, translate("resolve review: begin", err)
	}
	var it ReviewItem
	switch kind {
	case ReviewMismatch:
		it, err = s.resolveMismatch(ctx, tx, id, n)
	case ReviewDisbursement:
		it, err = s.resolveDisbursement(ctx, tx, n, r)
	case ReviewLifecycle:
		it, err = s.resolvePayment(ctx, tx, id, n)
	case ReviewOrder:
		it, err = s.resolveOrder(ctx, tx, id, n)
	default:
		it, err = s.resolveForward(ctx, tx, id, n, r)
	}
	if err == nil {
		var res Resolution
		err = tx.QueryRow(ctx, `INSERT INTO review_resolutions (item_id, action, note, who) VALUES ($1, $2, $3, $4)
			RETURNING item_id, action, note, who, at`, id, r.Action, r.Note, r.Who).
			Scan(&res.ItemID, &res.Action, &res.Note, &res.Who, &res.At)
		err = translate("record review resolution", err)
		it.Resolution = &res
	}
	if err != nil {
		s.rollback(ctx, tx)
		return ReviewItem{}, err
	}
	if err := s.commit(ctx, tx); err != nil {
		return ReviewItem{}, fmt.Errorf("resolve review: %w", err)
	}
	return it, nil
}

func (s *Review) resolveMismatch(ctx context.Context, tx pgx.Tx, id string, n int64) (ReviewItem, error) {
	return lockUnresolved(ctx, tx, "review_mismatches", id, n, func() (ReviewItem, error) { return s.reviewItem(ctx, tx, id) })
}

// lockUnresolved locks row n of table (one of the review tables, a
// constant: never input) for the transaction, so that two resolutions of
// item id are serialised, then reads the item with read and refuses it
// when it was resolved already (ErrReviewRefused). A missing row is
// ErrNotFound.
func lockUnresolved(ctx context.Context, tx pgx.Tx, table, id string, n int64, read func() (ReviewItem, error)) (ReviewItem, error) {
	var one int
	if err := tx.QueryRow(ctx, `SELECT 1 FROM `+table+` WHERE id = $1 FOR UPDATE`, n).Scan(&one); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return ReviewItem{}, fmt.Errorf("%w: review item %q", ErrNotFound, id)
		}
		return ReviewItem{}, translate("resolve review item "+id, err)
	}
	it, err := read()
	if err != nil {
		return ReviewItem{}, err
	}
	if it.Resolution != nil {
		return ReviewItem{}, reviewErr(ErrReviewRefused, "%s was already resolved (%s by %s at %s)", id,
			it.Resolution.Action, it.Resolution.Who, it.Resolution.At.Format(time.RFC3339))
	}
	return it, nil
}

const flaggedGuard = ` WHERE id = $1 AND status = 'pending' AND review_reason IS NOT NULL`

func (s *Review) resolveDisbursement(ctx context.Context, tx pgx.Tx, n int64, r Resolve) (ReviewItem, error) {
	d, err := scanDisbursement(tx.QueryRow(ctx, `SELECT `+disbursementColumns+` FROM disbursements`+flaggedGuard+` FOR UPDATE`, n))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		cur, err := disbursementByID(ctx, tx, n)
		if err != nil {
			return ReviewItem{}, err
		}
		return ReviewItem{}, reviewErr(ErrReviewRefused, "disbursement %d is %s and not flagged for review", n, cur.Status)
	case err != nil:
		return ReviewItem{}, translate("resolve disbursement", err)
	}
	switch r.Action {
	case ActionAdopt:
		if r.Payout.Ref == "" || r.Payout.Status.Rank() < StatusSent.Rank() {
			return ReviewItem{}, reviewErr(ErrReviewRefused, "adopt needs the payout the provider holds under %s", d.IdempotencyKey)
		}
		d, err = scanDisbursement(tx.QueryRow(ctx, `UPDATE disbursements SET status = $2, provider_ref = $3,
			review_reason = NULL, status_since = now(), updated_at = now()`+flaggedGuard+` RETURNING `+disbursementColumns,
			n, string(r.Payout.Status), r.Payout.Ref))
		if err != nil {
			return ReviewItem{}, translate("adopt disbursement", err)
		}
		err = s.disbursements.statusChanged(ctx, tx, StatusPending, d)
	case ActionFail:
		if !r.Payout.NoneFound {
			return ReviewItem{}, reviewErr(ErrReviewRefused, "fail needs the provider's word that it holds no payout under %s", d.IdempotencyKey)
		}
		d, err = scanDisbursement(tx.QueryRow(ctx, `UPDATE disbursements SET status = 'failed', last_error = $2,
			review_reason = NULL, status_since = now(), updated_at = now()`+flaggedGuard+` RETURNING `+disbursementColumns,
			n, fmt.Sprintf("failed on review by %s: the provider holds no payout for the key (%s)", r.Who, r.Note)))
		if err != nil {
			return ReviewItem{}, translate("fail disbursement", err)
		}
		err = s.disbursements.statusChanged(ctx, tx, StatusPending, d)
	default: // ActionRetry
		d, err = scanDisbursement(tx.QueryRow(ctx, `UPDATE disbursements SET review_reason = NULL, updated_at = now()`+
			flaggedGuard+` RETURNING `+disbursementColumns, n))
		if err != nil {
			return ReviewItem{}, translate("retry disbursement", err)
		}
		var (
			job   int64
			state string
		)
		err = tx.QueryRow(ctx, `SELECT id, state::text FROM river_job WHERE kind = $1 AND args->>'disbursement_id' = $2
			ORDER BY id DESC LIMIT 1`, PayoutKind, strconv.FormatInt(n, 10)).Scan(&job, &state)
		switch {
		case err == nil && state == string(rivertype.JobStateRunning):
			// Its attempt is ending (it found the row flagged): River
			// leaves a running job alone, so the retry would be lost.
			err = reviewErr(ErrReviewRefused, "the payout job %d of disbursement %d is still running; retry in a moment", job, n)
		case errors.Is(err, pgx.ErrNoRows):
			_, err = s.jobs.InsertTx(ctx, tx, PayoutArgs{DisbursementID: n}, nil)
			err = translate("retry disbursement: insert payout job", err)
		case err != nil:
			err = translate("retry disbursement: find payout job", err)
		default:
			_, err = s.jobs.JobRetryTx(ctx, tx, job)
			err = translate("retry disbursement: retry payout job", err)
		}
	}
	if err != nil {
		return ReviewItem{}, err
	}
	return disbursementItem(d), nil
}

func (s *Review) resolveForward(ctx context.Context, tx pgx.Tx, id string, n int64, r Resolve) (ReviewItem, error) {
	// The job row lock serialises two resolutions of one job.
	var state string
	if err := tx.QueryRow(ctx, `SELECT state::text FROM river_job WHERE id = $1 AND kind = $2 FOR UPDATE`, n, ForwardKind).Scan(&state); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return ReviewItem{}, fmt.Errorf("%w: review item %q", ErrNotFound, id)
		}
		return ReviewItem{}, translate("resolve forward", err)
	}
	if state != string(rivertype.JobStateDiscarded) {
		return ReviewItem{}, reviewErr(ErrReviewRefused, "forward job %d is %s, not discarded", n, state)
	}
	row, err := s.jobs.JobGetTx(ctx, tx, n)
	if err != nil {
		return ReviewItem{}, translate("resolve forward: get", err)
	}
	j, err := forwardJob(row)
	if err != nil {
		return ReviewItem{}, err
	}
	if prev, err := s.latestResolution(ctx, tx, id, j.FinalizedAt); err != nil {
		return ReviewItem{}, err
	} else if prev != nil && prev.Action == ActionAcknowledge {
		return ReviewItem{}, reviewErr(ErrReviewRefused, "%s was already acknowledged by %s", id, prev.Who)
	}
	if r.Action == ActionRetry {
		if row, err = s.jobs.JobRetryTx(ctx, tx, n); err != nil {
			return ReviewItem{}, translate("retry forward job", err)
		}
		if _, err := s.releaseHeldTx(ctx, tx, n); err != nil {
			return ReviewItem{}, translate("retry forward job", err)
		}
		if j, err = forwardJob(row); err != nil {
			return ReviewItem{}, err
		}
	}
	return forwardItem(j), nil
}
