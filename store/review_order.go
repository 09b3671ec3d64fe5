package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReviewOrder is the kind of an order whose payments need a person
// (order_attention), ids order-<id>: one paid twice (double_paid), paid
// more than its amount (overpaid), or paid in another currency
// (currency_mismatch), filed by the order deriver once per order version,
// naming the payments. Resolved by acknowledging it (the refund, if any,
// is made at the provider and comes back as its payment's event).
const ReviewOrder ReviewKind = "order"

// orderItemSQL selects the order items, with their latest resolution.
var orderItemSQL = `SELECT a.id, a.order_id, a.reason, a.version, a.payments, a.since,
	coalesce(o.amount, 0), coalesce(o.currency, ''), o.amount_paid, o.status, res.*
FROM order_attention a
JOIN orders o ON o.order_id = a.order_id
` + fmt.Sprintf(latestResolutionSQL, "a.id")

func scanOrderItem(row pgx.Row) (ReviewItem, error) {
	var (
		id                       int64
		orderID, reason, status  string
		currency                 string
		version                  int
		named                    []byte
		since                    time.Time
		amount, paid             int64
		rItem, rAct, rNote, rWho *string
		rAt                      *time.Time
	)
	if err := row.Scan(&id, &orderID, &reason, &version, &named, &since, &amount, &currency, &paid, &status,
		&rItem, &rAct, &rNote, &rWho, &rAt); err != nil {
		return ReviewItem{}, err
	}
	var payments []ForwardedOrderPayment
	if err := json.Unmarshal(named, &payments); err != nil {
		return ReviewItem{}, fmt.Errorf("store: order item %d: payments: %w", id, err)
	}
	var names []string
	for _, p := range payments {
		if p.AmountCaptured > 0 {
			names = append(names, fmt.Sprintf("%s %s (%d %s captured, %d refunded)", p.Source, p.TransactionID,
				p.AmountCaptured, p.Currency, p.AmountRefunded))
		}
	}
	it := ReviewItem{ID: reviewID(ReviewOrder, id), Kind: ReviewOrder, Since: since, Version: version, Type: reason,
		Summary: fmt.Sprintf("order %s (%d %s) is %s at version %d: %s", orderID, amount, currency, reason, version,
			strings.Join(names, ", ")),
		Details: map[string]any{"order_id": orderID, "reason": reason, "version": version, "amount": amount,
			"currency": currency, "amount_paid": paid, "status": status, "payments": payments},
		Actions: ReviewActions[ReviewOrder]}
	if rItem != nil {
		it.Resolution = &Resolution{ItemID: *rItem, Action: *rAct, Note: *rNote, Who: *rWho, At: *rAt}
	}
	return it, nil
}

// orderItems lists the order items, resolved ones only with all.
func (s *Review) orderItems(ctx context.Context, all bool) ([]ReviewItem, error) {
	rows, err := s.pool.Query(ctx, orderItemSQL+` WHERE $2 OR res.item_id IS NULL ORDER BY a.since, a.id`,
		string(ReviewOrder)+"-", all)
	if err != nil {
		return nil, translate("list orders for review", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReviewItem, error) { return scanOrderItem(r) })
	return items, translate("list orders for review", err)
}

// orderItem reads order item n.
func (s *Review) orderItem(ctx context.Context, q querier, id string, n int64) (ReviewItem, error) {
	it, err := scanOrderItem(q.QueryRow(ctx, orderItemSQL+` WHERE a.id = $2`, string(ReviewOrder)+"-", n))
	if errors.Is(err, pgx.ErrNoRows) {
		return ReviewItem{}, fmt.Errorf("%w: review item %q", ErrNotFound, id)
	}
	return it, translate("read order review item", err)
}

// resolveOrder locks order item n and refuses a second resolution.
func (s *Review) resolveOrder(ctx context.Context, tx pgx.Tx, id string, n int64) (ReviewItem, error) {
	return lockUnresolved(ctx, tx, "order_attention", id, n, func() (ReviewItem, error) { return s.orderItem(ctx, tx, id, n) })
}
