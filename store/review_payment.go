package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReviewLifecycle is the kind of a payment whose lifecycle needs a person
// (payment_attention), ids lifecycle-<id>: one known only by events whose payment has not
// arrived for Config.OrphanAfter (an orphan: a refund or a dispute of a
// payment paylock never recorded), or one whose refunds exceed its amount
// (amount_refunded is capped, the refunds kept). Resolved by acknowledging
// it; an orphan whose payment arrives leaves the queue by itself.
const ReviewLifecycle ReviewKind = "lifecycle"

// DefaultOrphanAfter is Config.OrphanAfter when 0.
const DefaultOrphanAfter = 24 * time.Hour

// paymentItemSQL selects the payment items, with their latest resolution.
// $3 is Config.OrphanAfter in milliseconds.
var paymentItemSQL = `SELECT a.id, a.source, a.transaction_id, a.reason, a.since, p.status, coalesce(p.amount, 0),
	p.amount_refunded, coalesce(p.dispute, ''), p.version, coalesce(a.detail, ''), res.*
FROM payment_attention a
JOIN payments p ON p.source = a.source AND p.transaction_id = a.transaction_id
` + fmt.Sprintf(latestResolutionSQL, "a.id") + `
WHERE (a.reason <> 'orphan' OR a.since < now() - $3::bigint * interval '1 millisecond')`

func scanPaymentItem(row pgx.Row) (ReviewItem, error) {
	var (
		id                       int64
		source, tx, reason, st   string
		dispute, detail          string
		since                    time.Time
		amount, refunded         int64
		version                  int
		rItem, rAct, rNote, rWho *string
		rAt                      *time.Time
	)
	if err := row.Scan(&id, &source, &tx, &reason, &since, &st, &amount, &refunded, &dispute, &version, &detail,
		&rItem, &rAct, &rNote, &rWho, &rAt); err != nil {
		return ReviewItem{}, err
	}
	summary := fmt.Sprintf("%s transaction %s: refunds exceed its amount %d (refunded capped at %d)", source, tx, amount, refunded)
	switch {
	case reason == "orphan":
		summary = fmt.Sprintf("%s transaction %s: events recorded since %s, its payment never arrived",
			source, tx, since.UTC().Format(time.RFC3339))
	case reason != "over_refunded" && detail != "":
		summary = fmt.Sprintf("%s transaction %s: %s", source, tx, detail)
	}
	it := ReviewItem{ID: reviewID(ReviewLifecycle, id), Kind: ReviewLifecycle, Since: since, Summary: summary,
		Source: source, TransactionID: tx, Version: version, Type: reason,
		Details: map[string]any{"source": source, "transaction_id": tx, "reason": reason, "status": st,
			"amount": amount, "amount_refunded": refunded, "dispute": dispute, "version": version, "detail": detail},
		Actions: ReviewActions[ReviewLifecycle]}
	if rItem != nil {
		it.Resolution = &Resolution{ItemID: *rItem, Action: *rAct, Note: *rNote, Who: *rWho, At: *rAt}
	}
	return it, nil
}

// paymentItems lists the payment items, resolved ones only with all.
func (s *Review) paymentItems(ctx context.Context, all bool) ([]ReviewItem, error) {
	rows, err := s.pool.Query(ctx, paymentItemSQL+` AND ($2 OR res.item_id IS NULL) ORDER BY a.since, a.id`,
		string(ReviewLifecycle)+"-", all, s.cfg.OrphanAfter.Milliseconds())
	if err != nil {
		return nil, translate("list payments for review", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReviewItem, error) { return scanPaymentItem(r) })
	return items, translate("list payments for review", err)
}

// paymentItem reads payment item n.
func (s *Review) paymentItem(ctx context.Context, q querier, id string, n int64) (ReviewItem, error) {
	it, err := scanPaymentItem(q.QueryRow(ctx, paymentItemSQL+` AND a.id = $2`, string(ReviewLifecycle)+"-", n,
		s.cfg.OrphanAfter.Milliseconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		return ReviewItem{}, fmt.Errorf("%w: review item %q", ErrNotFound, id)
	}
	return it, translate("read payment review item", err)
}

// resolvePayment locks payment item n and refuses a second resolution.
func (s *Review) resolvePayment(ctx context.Context, tx pgx.Tx, id string, n int64) (ReviewItem, error) {
	return lockUnresolved(ctx, tx, "payment_attention", id, n, func() (ReviewItem, error) { return s.paymentItem(ctx, tx, id, n) })
}
