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
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Review is the review queue: what a person must look at and decide.
//
//   - mismatch-<id>: a delivery that named a recorded payment with another
//     amount or currency (answered 422; the payment never changes), kept by
//     Payments.RecordMismatch; resolved by acknowledging it.
//   - disbursement-<id>: a pending disbursement with review_reason set
//     (Disbursements.FlagForReview); resolved by adopt (the provider holds
//     the payout), fail (it holds none) or retry (clear the flag, run the
//     payout job again).
//   - forward-<id>: a River forward job that was discarded; resolved by
//     retry (River's JobRetry) or acknowledge.
//   - lifecycle-<id>: a payment whose lifecycle needs a person (ReviewLifecycle):
//     an orphan older than Config.OrphanAfter, or refunds beyond its amount;
//     resolved by acknowledging it.
//   - order-<id>: an order paid twice, overpaid or paid in another
//     currency (ReviewOrder), naming its payments; resolved by
//     acknowledging it.
//
// ReviewItems and ReviewItem list the queue, ReviewQueueStats sizes it, and
// ResolveReview records every resolution in review_resolutions (item,
// action, note, who, when) in the transaction that makes its change. Get it
// from Store.Review; it is safe for concurrent use.
type Review struct {
	*base
	// disbursements runs the status hook in a resolution that changes a
	// disbursement's status.
	disbursements *Disbursements
}

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
var ReviewKinds = []ReviewKind{ReviewMismatch, ReviewDisbursement, ReviewForward, ReviewLifecycle, ReviewOrder}

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
	ReviewLifecycle:    {ActionAcknowledge},
	ReviewOrder:        {ActionAcknowledge},
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
	Since time.Time `json:"since"`
	// Source and TransactionID name the payment the item is about (every
	// kind but a disbursement's, which LoanID and Tranche name instead).
	// Version is the payment's version (its stored state for a mismatch
	// and a lifecycle item, the state the forward carried for a forward),
	// 0 when none applies; Type is the forward's message type
	// (payment.recorded, payment.refunded, disbursement.failed, ...) or a
	// lifecycle item's reason (orphan, over_refunded).
	Source        string         `json:"source,omitempty"`
	TransactionID string         `json:"transaction_id,omitempty"`
	Version       int            `json:"version,omitempty"`
	Type          string         `json:"type,omitempty"`
	LoanID        string         `json:"loan_id,omitempty"`
	Tranche       int            `json:"tranche,omitempty"`
	Summary       string         `json:"summary"`
	Details       map[string]any `json:"details"`
	Actions       []string       `json:"actions"`
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
// that are not a kind of ReviewKinds, a dash and a positive int64 are
// ErrNotFound (the admin API answers them 400 before asking).
func ParseReviewID(id string) (ReviewKind, int64, error) {
	kind, num, ok := strings.Cut(id, "-")
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || n <= 0 || !slices.Contains(ReviewKinds, ReviewKind(kind)) {
		return "", 0, fmt.Errorf("%w: review item %q", ErrNotFound, id)
	}
	return ReviewKind(kind), n, nil
}

func reviewID(k ReviewKind, id int64) string { return string(k) + "-" + strconv.FormatInt(id, 10) }

const mismatchColumns = `m.id, m.source, m.transaction_id, m.amount, m.currency, coalesce(m.event_id, ''), m.request_id, m.body,
	coalesce(m.payment_id, 0), coalesce(m.stored_amount, 0), coalesce(m.stored_currency, ''), m.created_at,
	coalesce((SELECT p.version FROM payments p WHERE p.source = m.source AND p.transaction_id = m.transaction_id), 0),
	coalesce(m.detail, '')`

// latestResolution is a lateral join giving each item its latest resolution.
const latestResolutionSQL = `LEFT JOIN LATERAL (
	SELECT r.item_id, r.action, r.note, r.who, r.at FROM review_resolutions r
	WHERE r.item_id = $1 || %s ORDER BY r.at DESC, r.id DESC LIMIT 1) res ON true`

func scanMismatchItem(row pgx.Row) (ReviewItem, error) {
	var (
		m                        Mismatch
		version                  int
		rItem, rAct, rNote, rWho *string
		rAt                      *time.Time
	)
	if err := row.Scan(&m.ID, &m.Source, &m.TransactionID, &m.Amount, &m.Currency, &m.EventID, &m.RequestID, &m.Body,
		&m.PaymentID, &m.StoredAmount, &m.StoredCurrency, &m.CreatedAt, &version, &m.Detail, &rItem, &rAct, &rNote, &rWho, &rAt); err != nil {
		return ReviewItem{}, err
	}
	it := mismatchItem(m)
	it.Version = version
	if rItem != nil {
		it.Resolution = &Resolution{ItemID: *rItem, Action: *rAct, Note: *rNote, Who: *rWho, At: *rAt}
	}
	return it, nil
}

func mismatchItem(m Mismatch) ReviewItem {
	summary := fmt.Sprintf("%s transaction %s delivered as %d %s, stored as %d %s",
		m.Source, m.TransactionID, m.Amount, m.Currency, m.StoredAmount, m.StoredCurrency)
	if m.Detail != "" {
		summary = fmt.Sprintf("%s transaction %s: event %s contradicts what is recorded: %s",
			m.Source, m.TransactionID, m.EventID, m.Detail)
	}
	return ReviewItem{
		ID: reviewID(ReviewMismatch, m.ID), Kind: ReviewMismatch, Since: m.CreatedAt,
		Source: m.Source, TransactionID: m.TransactionID,
		Summary: summary,
		Details: map[string]any{
			"source": m.Source, "transaction_id": m.TransactionID, "amount": m.Amount, "currency": m.Currency,
			"event_id": m.EventID, "request_id": m.RequestID, "body": string(m.Body),
			"payment_id": m.PaymentID, "stored_amount": m.StoredAmount, "stored_currency": m.StoredCurrency,
			"detail": m.Detail,
		},
		Actions: ReviewActions[ReviewMismatch],
	}
}

func disbursementItem(d Disbursement) ReviewItem {
	return ReviewItem{
		ID: reviewID(ReviewDisbursement, d.ID), Kind: ReviewDisbursement, Since: d.UpdatedAt,
		LoanID: d.LoanID, Tranche: d.Tranche,
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
	a := j.Args
	it := ReviewItem{
		ID: reviewID(ReviewForward, j.ID), Kind: ReviewForward, Since: j.FinalizedAt, Type: a.Type,
		Details: map[string]any{
			"job_id": j.ID, "state": j.State, "attempt": j.Attempt, "max_attempts": j.MaxAttempts,
			"forward_id": a.ID, "type": a.Type, "destination": a.Target(), "last_error": j.LastError,
			"created_at": j.CreatedAt, "finalized_at": j.FinalizedAt,
		},
		Actions: ReviewActions[ReviewForward],
	}
	subject := a.Source + " transaction " + a.TransactionID
	switch {
	case a.Order != nil:
		subject = fmt.Sprintf("order %s (version %d)", a.Order.OrderID, a.Order.Version)
		it.Version = a.Order.Version
		it.Details["order_id"], it.Details["version"] = a.Order.OrderID, a.Order.Version
	case a.Disbursement != nil:
		it.LoanID, it.Tranche = a.Disbursement.LoanID, a.Disbursement.Tranche
		subject = fmt.Sprintf("loan %s tranche %d", it.LoanID, it.Tranche)
		it.Details["loan_id"], it.Details["tranche"] = it.LoanID, it.Tranche
	default:
		it.Source, it.TransactionID, it.Version = a.Source, a.TransactionID, 1
		if a.State != nil {
			it.Version = a.State.Version
		}
		subject += fmt.Sprintf(" (version %d)", it.Version)
		it.Details["source"], it.Details["transaction_id"], it.Details["version"] = it.Source, it.TransactionID, it.Version
	}
	it.Summary = fmt.Sprintf("forward %s of %s to %s discarded after %d attempts: %s",
		a.Type, subject, a.Target(), j.Attempt, j.LastError)
	return it
}

// ReviewItems lists the review queue, oldest first: open items, or with
// f.All resolved ones too. Errors wrap ErrUnavailable when the database
// failed transiently.
func (s *Review) ReviewItems(ctx context.Context, f ReviewFilter) ([]ReviewItem, error) {
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
	if want(ReviewLifecycle) {
		items, err := s.paymentItems(ctx, f.All)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	if want(ReviewOrder) {
		items, err := s.orderItems(ctx, f.All)
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
func (s *Review) forwardItems(ctx context.Context, all bool) ([]ReviewItem, error) {
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
func (s *Review) latestResolution(ctx context.Context, q querier, item string, since time.Time) (*Resolution, error) {
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
func (s *Review) ReviewItem(ctx context.Context, id string) (ReviewItem, error) {
	return s.reviewItem(ctx, s.pool, id)
}

func (s *Review) reviewItem(ctx context.Context, q querier, id string) (ReviewItem, error) {
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
		d, err := disbursementByID(ctx, q, n)
		if err != nil {
			return ReviewItem{}, err
		}
		if d.ReviewReason == "" || d.Status != StatusPending {
			return ReviewItem{}, fmt.Errorf("%w (disbursement %d is %s and not flagged for review)", notFound, n, d.Status)
		}
		return disbursementItem(d), nil
	case ReviewLifecycle:
		return s.paymentItem(ctx, q, id, n)
	case ReviewOrder:
		return s.orderItem(ctx, q, id, n)
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

// ReviewQueueStat is the size of one kind's part of the open review queue.
type ReviewQueueStat struct {
	Items  int
	Oldest time.Time // zero when Items is 0
}

// ReviewQueueStats counts the open review items of each kind and finds the
// oldest, for metrics. Every kind of ReviewKinds is in the map.
func (s *Review) ReviewQueueStats(ctx context.Context) (map[ReviewKind]ReviewQueueStat, error) {
	rows, err := s.pool.Query(ctx, `
SELECT 'mismatch', count(*), min(m.created_at) FROM review_mismatches m
	WHERE NOT EXISTS (SELECT 1 FROM review_resolutions r WHERE r.item_id = 'mismatch-' || m.id)
UNION ALL
SELECT 'disbursement', count(*), min(updated_at) FROM disbursements WHERE review_reason IS NOT NULL AND status = 'pending'
UNION ALL
SELECT 'forward', count(*), min(j.finalized_at) FROM river_job j WHERE j.kind = $1 AND j.state = 'discarded'
	AND NOT EXISTS (SELECT 1 FROM review_resolutions r WHERE r.item_id = 'forward-' || j.id
		AND r.action = 'acknowledge' AND r.at >= j.finalized_at)
UNION ALL
SELECT 'lifecycle', count(*), min(a.since) FROM payment_attention a
	WHERE (a.reason <> 'orphan' OR a.since < now() - $2::bigint * interval '1 millisecond')
	AND NOT EXISTS (SELECT 1 FROM review_resolutions r WHERE r.item_id = 'lifecycle-' || a.id)
UNION ALL
SELECT 'order', count(*), min(a.since) FROM order_attention a
	WHERE NOT EXISTS (SELECT 1 FROM review_resolutions r WHERE r.item_id = 'order-' || a.id)`, ForwardKind, s.cfg.OrphanAfter.Milliseconds())
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
