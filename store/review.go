package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// The review queue: what a person must look at and decide.
//
//   - mismatch-<id>: a delivery that named a recorded payment with another
//     amount or currency (answered 422; the payment never changes), kept by
//     RecordMismatch; resolved by acknowledging it.
//   - disbursement-<id>: a pending disbursement with review_reason set;
//     resolved by adopt (the provider holds the payout), fail (it holds
//     none) or retry (clear the flag, run the payout job again).
//   - forward-<id>: a River forward job that was discarded; resolved by
//     retry (River's JobRetry) or acknowledge.
//
// Every resolution is recorded in review_resolutions (item, action, note,
// who, when) in the transaction that makes its change.

// Errors of the review queue. Compare them with errors.Is.
var (
	// ErrReviewAction means the action is not one the item's kind allows,
	// or a resolution lacks its note or its author: the request is wrong.
	ErrReviewAction = errors.New("store: review action not allowed")
	// ErrReviewRefused means the item is not in a state the resolution
	// applies to (already resolved, no longer flagged, not discarded), or a
	// check before it failed (package review: the payout provider
	// disagrees or cannot be reached). Nothing changed.
	ErrReviewRefused = errors.New("store: review resolution refused")
)

// ReviewError is a refused resolution or a wrong request, with a reason
// fit to show the person who asked (it names the item and its state, or
// what the provider answered). It wraps ErrReviewRefused or
// ErrReviewAction, and the underlying error if there is one.
type ReviewError struct {
	Reason string
	kind   error
	err    error
}

func (e *ReviewError) Error() string {
	if e.err != nil {
		return e.kind.Error() + ": " + e.Reason + ": " + e.err.Error()
	}
	return e.kind.Error() + ": " + e.Reason
}

// Unwrap returns the sentinel (ErrReviewRefused or ErrReviewAction) and
// the underlying error.
func (e *ReviewError) Unwrap() []error {
	if e.err == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.err}
}

func reviewErr(kind error, format string, args ...any) error {
	return &ReviewError{Reason: fmt.Sprintf(format, args...), kind: kind}
}

// RefuseReview returns a ReviewError wrapping ErrReviewRefused with reason
// and cause (which may be nil), for checks made outside the store (package
// review's provider lookup).
func RefuseReview(reason string, cause error) error {
	return &ReviewError{Reason: reason, kind: ErrReviewRefused, err: cause}
}

// ReviewKind is the kind of a review item.
type ReviewKind string

// Review item kinds.
const (
	ReviewMismatch     ReviewKind = "mismatch"
	ReviewDisbursement ReviewKind = "disbursement"
	ReviewForward      ReviewKind = "forward"
)

// ReviewKinds are the kinds of review items, in listing order.
var ReviewKinds = []ReviewKind{ReviewMismatch, ReviewDisbursement, ReviewForward}

// Resolution actions.
const (
	ActionAcknowledge = "acknowledge" // mismatch, forward: seen, nothing to change
	ActionAdopt       = "adopt"       // disbursement: the provider holds the payout
	ActionFail        = "fail"        // disbursement: the provider holds none
	ActionRetry       = "retry"       // disbursement, forward: run the job again
)

// ReviewActions lists the actions each kind allows.
var ReviewActions = map[ReviewKind][]string{
	ReviewMismatch:     {ActionAcknowledge},
	ReviewDisbursement: {ActionAdopt, ActionFail, ActionRetry},
	ReviewForward:      {ActionRetry, ActionAcknowledge},
}

// Mismatch is a delivery that named a recorded payment (same source and
// transaction id) with another amount or currency.
type Mismatch struct {
	ID            int64
	Source        string
	TransactionID string
	Amount        int64  // as delivered
	Currency      string // as delivered
	EventID       string // the delivery's event id; "" when none
	RequestID     string // the request's X-Request-Id
	Body          []byte // the raw delivery body
	// PaymentID, StoredAmount and StoredCurrency are the stored payment's,
	// read by RecordMismatch when it writes the item (zero if it had gone).
	PaymentID      int64
	StoredAmount   int64
	StoredCurrency string
	CreatedAt      time.Time
}

// Resolution is a recorded decision on a review item.
type Resolution struct {
	ItemID string    `json:"item_id"`
	Action string    `json:"action"`
	Note   string    `json:"note"`
	Who    string    `json:"who"`
	At     time.Time `json:"at"`
}

// ReviewItem is one item of the review queue.
type ReviewItem struct {
	ID   string     `json:"id"` // mismatch-<id>, disbursement-<id> or forward-<id>
	Kind ReviewKind `json:"kind"`
	// Since is when the item entered the queue: the mismatching delivery's
	// arrival, the disbursement's flag (its updated_at), the forward job's
	// discard.
	Since   time.Time      `json:"since"`
	Summary string         `json:"summary"`
	Details map[string]any `json:"details"`
	Actions []string       `json:"actions"`
	// Resolution is the item's latest resolution, nil while it is open.
	// Only listings with ReviewFilter.All and ReviewItem return resolved
	// items.
	Resolution *Resolution `json:"resolution,omitempty"`
}

// ReviewFilter selects review items.
type ReviewFilter struct {
	Kind ReviewKind // "": every kind
	All  bool       // resolved items too (acknowledged mismatches and forward jobs)
}

// ParseReviewID splits a review item id into its kind and number. Ids
// that are not mismatch-, disbursement- or forward- followed by a positive
// number are ErrNotFound.
func ParseReviewID(id string) (ReviewKind, int64, error) {
	kind, num, ok := strings.Cut(id, "-")
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || n <= 0 || !slices.Contains(ReviewKinds, ReviewKind(kind)) {
		return "", 0, fmt.Errorf("%w: review item %q", ErrNotFound, id)
	}
	return ReviewKind(kind), n, nil
}

func reviewID(k ReviewKind, id int64) string { return string(k) + "-" + strconv.FormatInt(id, 10) }

const insertMismatchSQL = `
INSERT INTO review_mismatches (source, transaction_id, body_sha256, body, amount, currency, event_id, request_id,
	payment_id, stored_amount, stored_currency)
SELECT $1, $2, $3, $4, $5, $6, nullif($7, ''), $8, p.id, p.amount, p.currency::text
FROM (SELECT 1) AS one LEFT JOIN payments p ON p.source = $1 AND p.transaction_id = $2
ON CONFLICT ON CONSTRAINT review_mismatches_delivery_key DO NOTHING`

// RecordMismatch keeps m (Source, TransactionID, Amount, Currency, EventID,
// RequestID, Body) as a review item, with the stored payment's id, amount
// and currency. The same delivery body for the same transaction is kept
// once: a PSP retrying one wrong delivery makes one item. The stored
// payment is never touched. Errors wrap ErrUnavailable when the database
// failed transiently.
func (s *Store) RecordMismatch(ctx context.Context, m Mismatch) error {
	if m.Source == "" {
		m.Source = DefaultSource
	}
	sum := sha256.Sum256(m.Body)
	body := m.Body
	if body == nil {
		body = []byte{}
	}
	_, err := s.pool.Exec(ctx, insertMismatchSQL, m.Source, m.TransactionID, sum[:], body, m.Amount,
		strings.TrimRight(m.Currency, " "), m.EventID, m.RequestID)
	return translate("record mismatch", err)
}

const mismatchColumns = `m.id, m.source, m.transaction_id, m.amount, m.currency, coalesce(m.event_id, ''), m.request_id, m.body,
	coalesce(m.payment_id, 0), coalesce(m.stored_amount, 0), coalesce(m.stored_currency, ''), m.created_at`

// latestResolution is a lateral join giving each item its latest resolution.
const latestResolutionSQL = `LEFT JOIN LATERAL (
	SELECT r.item_id, r.action, r.note, r.who, r.at FROM review_resolutions r
	WHERE r.item_id = $1 || %s ORDER BY r.at DESC, r.id DESC LIMIT 1) res ON true`

func scanMismatchItem(row pgx.Row) (ReviewItem, error) {
	var (
		m                        Mismatch
		rItem, rAct, rNote, rWho *string
		rAt                      *time.Time
	)
	if err := row.Scan(&m.ID, &m.Source, &m.TransactionID, &m.Amount, &m.Currency, &m.EventID, &m.RequestID, &m.Body,
		&m.PaymentID, &m.StoredAmount, &m.StoredCurrency, &m.CreatedAt, &rItem, &rAct, &rNote, &rWho, &rAt); err != nil {
		return ReviewItem{}, err
	}
	it := mismatchItem(m)
	if rItem != nil {
		it.Resolution = &Resolution{ItemID: *rItem, Action: *rAct, Note: *rNote, Who: *rWho, At: *rAt}
	}
	return it, nil
}

func mismatchItem(m Mismatch) ReviewItem {
	return ReviewItem{
		ID: reviewID(ReviewMismatch, m.ID), Kind: ReviewMismatch, Since: m.CreatedAt,
		Summary: fmt.Sprintf("%s transaction %s delivered as %d %s, stored as %d %s",
			m.Source, m.TransactionID, m.Amount, m.Currency, m.StoredAmount, m.StoredCurrency),
		Details: map[string]any{
			"source": m.Source, "transaction_id": m.TransactionID, "amount": m.Amount, "currency": m.Currency,
			"event_id": m.EventID, "request_id": m.RequestID, "body": string(m.Body),
			"payment_id": m.PaymentID, "stored_amount": m.StoredAmount, "stored_currency": m.StoredCurrency,
		},
		Actions: ReviewActions[ReviewMismatch],
	}
}

func disbursementItem(d Disbursement) ReviewItem {
	return ReviewItem{
		ID: reviewID(ReviewDisbursement, d.ID), Kind: ReviewDisbursement, Since: d.UpdatedAt,
		Summary: fmt.Sprintf("disbursement %s (%d %s, key %s) awaits review: %s",
			d.Reference(), d.Amount, d.Currency, d.IdempotencyKey, d.ReviewReason),
		Details: map[string]any{
			"disbursement_id": d.ID, "loan_id": d.LoanID, "tranche": d.Tranche, "amount": d.Amount,
			"currency": d.Currency, "status": string(d.Status), "idempotency_key": d.IdempotencyKey,
			"provider_ref": d.ProviderRef, "attempts": d.Attempts, "last_error": d.LastError,
			"review_reason": d.ReviewReason, "event_id": d.EventID, "created_at": d.CreatedAt,
		},
		Actions: ReviewActions[ReviewDisbursement],
	}
}

func forwardItem(j ForwardJob) ReviewItem {
	return ReviewItem{
		ID: reviewID(ReviewForward, j.ID), Kind: ReviewForward, Since: j.FinalizedAt,
		Summary: fmt.Sprintf("forward %s of %s to %s discarded after %d attempts: %s",
			j.Args.Type, j.Args.ID, j.Args.URL, j.Attempt, j.LastError),
		Details: map[string]any{
			"job_id": j.ID, "state": j.State, "attempt": j.Attempt, "max_attempts": j.MaxAttempts,
			"forward_id": j.Args.ID, "type": j.Args.Type, "url": j.Args.URL, "last_error": j.LastError,
			"created_at": j.CreatedAt, "finalized_at": j.FinalizedAt,
		},
		Actions: ReviewActions[ReviewForward],
	}
}

// ReviewItems lists the review queue, oldest first: open items, or with
// f.All resolved ones too. Errors wrap ErrUnavailable when the database
// failed transiently.
func (s *Store) ReviewItems(ctx context.Context, f ReviewFilter) ([]ReviewItem, error) {
	var out []ReviewItem
	want := func(k ReviewKind) bool { return f.Kind == "" || f.Kind == k }
	if want(ReviewMismatch) {
		rows, err := s.pool.Query(ctx, `SELECT `+mismatchColumns+`, res.* FROM review_mismatches m `+
			fmt.Sprintf(latestResolutionSQL, "m.id")+` WHERE $2 OR res.item_id IS NULL ORDER BY m.created_at, m.id`,
			string(ReviewMismatch)+"-", f.All)
		if err != nil {
			return nil, translate("list mismatches", err)
		}
		items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReviewItem, error) { return scanMismatchItem(r) })
		if err != nil {
			return nil, translate("list mismatches", err)
		}
		out = append(out, items...)
	}
	if want(ReviewDisbursement) {
		rows, err := s.pool.Query(ctx, `SELECT `+disbursementColumns+` FROM disbursements
			WHERE review_reason IS NOT NULL AND status = 'pending' ORDER BY updated_at, id`)
		if err != nil {
			return nil, translate("list flagged disbursements", err)
		}
		ds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Disbursement, error) { return scanDisbursement(r) })
		if err != nil {
			return nil, translate("list flagged disbursements", err)
		}
		for _, d := range ds {
			out = append(out, disbursementItem(d))
		}
	}
	if want(ReviewForward) {
		items, err := s.forwardItems(ctx, f.All)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	slices.SortStableFunc(out, func(a, b ReviewItem) int { return a.Since.Compare(b.Since) })
	return out, nil
}

// forwardItems lists the discarded forward jobs, those acknowledged since
// their discard only with all.
func (s *Store) forwardItems(ctx context.Context, all bool) ([]ReviewItem, error) {
	p := river.NewJobListParams().Kinds(ForwardKind).States(rivertype.JobStateDiscarded).First(10000).
		OrderBy(river.JobListOrderByID, river.SortOrderAsc)
	res, err := s.jobs.JobList(ctx, p)
	if err != nil {
		return nil, translate("list discarded forward jobs", err)
	}
	var out []ReviewItem
	for _, row := range res.Jobs {
		j, err := forwardJob(row)
		if err != nil {
			return nil, err
		}
		it := forwardItem(j)
		if it.Resolution, err = s.latestResolution(ctx, s.pool, it.ID, j.FinalizedAt); err != nil {
			return nil, err
		}
		if all || it.Resolution == nil {
			out = append(out, it)
		}
	}
	return out, nil
}

// latestResolution returns item's latest resolution made at or after
// since, nil when none.
func (s *Store) latestResolution(ctx context.Context, q querier, item string, since time.Time) (*Resolution, error) {
	var r Resolution
	err := q.QueryRow(ctx, `SELECT item_id, action, note, who, at FROM review_resolutions
		WHERE item_id = $1 AND at >= $2 ORDER BY at DESC, id DESC LIMIT 1`, item, since).
		Scan(&r.ItemID, &r.Action, &r.Note, &r.Who, &r.At)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, translate("read review resolution", err)
	}
	return &r, nil
}

// ReviewItem returns the item with the given id, open or resolved. An id
// that names no item (a disbursement not flagged, a forward job not
// discarded) is ErrNotFound.
func (s *Store) ReviewItem(ctx context.Context, id string) (ReviewItem, error) {
	return s.reviewItem(ctx, s.pool, id)
}

func (s *Store) reviewItem(ctx context.Context, q querier, id string) (ReviewItem, error) {
	kind, n, err := ParseReviewID(id)
	if err != nil {
		return ReviewItem{}, err
	}
	notFound := fmt.Errorf("%w: review item %q", ErrNotFound, id)
	switch kind {
	case ReviewMismatch:
		it, err := scanMismatchItem(q.QueryRow(ctx, `SELECT `+mismatchColumns+`, res.* FROM review_mismatches m `+
			fmt.Sprintf(latestResolutionSQL, "m.id")+` WHERE m.id = $2`, string(ReviewMismatch)+"-", n))
		if errors.Is(err, pgx.ErrNoRows) {
			return ReviewItem{}, notFound
		}
		return it, translate("read mismatch", err)
	case ReviewDisbursement:
		d, err := s.disbursementByID(ctx, q, n)
		if err != nil {
			return ReviewItem{}, err
		}
		if d.ReviewReason == "" || d.Status != StatusPending {
			return ReviewItem{}, fmt.Errorf("%w (disbursement %d is %s and not flagged for review)", notFound, n, d.Status)
		}
		return disbursementItem(d), nil
	default:
		row, err := s.jobs.JobGet(ctx, n)
		switch {
		case errors.Is(err, rivertype.ErrNotFound):
			return ReviewItem{}, notFound
		case err != nil:
			return ReviewItem{}, translate("read forward job", err)
		case row.Kind != ForwardKind || row.State != rivertype.JobStateDiscarded:
			return ReviewItem{}, fmt.Errorf("%w (job %d is a %s job, %s)", notFound, n, row.Kind, row.State)
		}
		j, err := forwardJob(row)
		if err != nil {
			return ReviewItem{}, err
		}
		it := forwardItem(j)
		it.Resolution, err = s.latestResolution(ctx, q, it.ID, j.FinalizedAt)
		return it, err
	}
}

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
func (s *Store) ResolveReview(ctx context.Context, id string, r Resolve) (ReviewItem, error) {
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

func (s *Store) resolveMismatch(ctx context.Context, tx pgx.Tx, id string, n int64) (ReviewItem, error) {
	// The row lock serialises two resolutions of one item.
	var one int
	if err := tx.QueryRow(ctx, `SELECT 1 FROM review_mismatches WHERE id = $1 FOR UPDATE`, n).Scan(&one); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return ReviewItem{}, fmt.Errorf("%w: review item %q", ErrNotFound, id)
		}
		return ReviewItem{}, translate("resolve mismatch", err)
	}
	it, err := s.reviewItem(ctx, tx, id)
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

func (s *Store) resolveDisbursement(ctx context.Context, tx pgx.Tx, n int64, r Resolve) (ReviewItem, error) {
	d, err := scanDisbursement(tx.QueryRow(ctx, `SELECT `+disbursementColumns+` FROM disbursements`+flaggedGuard+` FOR UPDATE`, n))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		cur, err := s.disbursementByID(ctx, tx, n)
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
		err = s.statusChanged(ctx, tx, StatusPending, d)
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
		err = s.statusChanged(ctx, tx, StatusPending, d)
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

func (s *Store) resolveForward(ctx context.Context, tx pgx.Tx, id string, n int64, r Resolve) (ReviewItem, error) {
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
		if j, err = forwardJob(row); err != nil {
			return ReviewItem{}, err
		}
	}
	return forwardItem(j), nil
}

// ReviewQueueStat is the size of one kind's part of the open review queue.
type ReviewQueueStat struct {
	Items  int
	Oldest time.Time // zero when Items is 0
}

// ReviewQueueStats counts the open review items of each kind and finds the
// oldest, for metrics. Every kind of ReviewKinds is in the map.
func (s *Store) ReviewQueueStats(ctx context.Context) (map[ReviewKind]ReviewQueueStat, error) {
	rows, err := s.pool.Query(ctx, `
SELECT 'mismatch', count(*), min(m.created_at) FROM review_mismatches m
	WHERE NOT EXISTS (SELECT 1 FROM review_resolutions r WHERE r.item_id = 'mismatch-' || m.id)
UNION ALL
SELECT 'disbursement', count(*), min(updated_at) FROM disbursements WHERE review_reason IS NOT NULL AND status = 'pending'
UNION ALL
SELECT 'forward', count(*), min(j.finalized_at) FROM river_job j WHERE j.kind = $1 AND j.state = 'discarded'
	AND NOT EXISTS (SELECT 1 FROM review_resolutions r WHERE r.item_id = 'forward-' || j.id
		AND r.action = 'acknowledge' AND r.at >= j.finalized_at)`, ForwardKind)
	if err != nil {
		return nil, translate("review queue stats", err)
	}
	out := make(map[ReviewKind]ReviewQueueStat, len(ReviewKinds))
	var (
		kind   string
		st     ReviewQueueStat
		oldest *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&kind, &st.Items, &oldest}, func() error {
		s := st
		if oldest != nil {
			s.Oldest = *oldest
		}
		out[ReviewKind(kind)] = s
		return nil
	})
	if err != nil {
		return nil, translate("review queue stats", err)
	}
	return out, nil
}
