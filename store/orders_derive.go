package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/order"
)

// The order deriver. Every run (DeriveOrders):
//
//  1. reads the payments recorded or changed since the stored watermark
//     less Overlap (greatest(received_at, updated_at), indexed by 00016),
//     of the sources that link orders, whose payload names an order at the
//     source's pointer and whose link (order_payments) is missing or of an
//     older payment version;
//  2. for each order they name, in one transaction: makes sure the order
//     has a row (unregistered if nobody registered it), locks it FOR
//     UPDATE, links its payments, and derives its state (deriveOrder);
//  3. derives the awaiting orders past expires_at, and the orders
//     registered after payments named them, the same way;
//  4. moves the watermark to the time the run began.
//
// Deriving again is idempotent (a state that did not change writes
// nothing), so the overlap re-reads harmlessly the payments whose
// transaction began before the previous run and committed after it, and
// any number of runs at once (two leaders, a retried job) write each
// change once: the order's row lock serialises them, and the second finds
// the state already there.

// DefaultOrderOverlap is OrderDeriver.Overlap when 0: longer than any
// payment's recording transaction (bounded by the lock's lease and the
// commit timeout).
const DefaultOrderOverlap = 30 * time.Second

// orderBatch bounds the rows one query of a run reads.
const orderBatch = 1000

// OrderDeriver says where payments name their orders and where the
// orders' messages go.
type OrderDeriver struct {
	// Links maps a source to the tokens of the RFC 6901 pointer at which
	// its payments' payloads name their order; sources not in it link
	// nothing.
	Links map[string][]string
	// Route, when set, picks the destinations of each order.* message (one
	// job per destination, package forward's Router.Route over the
	// destinations the sources forward to); else Destination is where they
	// go, "": nowhere.
	Route       ForwardRouter
	Destination string
	// Overlap is how far before the watermark each run reads again; 0 is
	// DefaultOrderOverlap.
	Overlap time.Duration
}

// DeriveResult says what one run did.
type DeriveResult struct {
	Linked  int // payments linked, or linked again at a newer version
	Derived int // orders whose state was derived
	Changed int // orders whose state changed (each with its message and review item)
}

// OrderForwardID is the webhook-id of an order's message at version:
// "ord_" and the first 32 hex digits of SHA-256(order_id + "\n" +
// version). A version is reached once, so each message has one id.
func OrderForwardID(orderID string, version int) string {
	return "ord_" + hash32(fmt.Sprintf("%s\n%d", orderID, version))
}

// ForwardedOrder is an order's state as a change left it, as an order.*
// forward job carries it.
type ForwardedOrder struct {
	OrderID    string                  `json:"order_id"`
	Status     string                  `json:"status"`
	Amount     int64                   `json:"amount"`
	Currency   string                  `json:"currency"`
	ExpiresAt  *time.Time              `json:"expires_at"`
	AmountPaid int64                   `json:"amount_paid"`
	Version    int                     `json:"version"`
	Payments   []ForwardedOrderPayment `json:"payments"`
}

// ForwardedOrderPayment is one linked payment's state in a ForwardedOrder.
type ForwardedOrderPayment struct {
	Source         string `json:"source"`
	TransactionID  string `json:"transaction_id"`
	Status         string `json:"status"`
	Currency       string `json:"currency"`
	AmountCaptured int64  `json:"amount_captured"`
	AmountRefunded int64  `json:"amount_refunded"`
}

func forwardedPayments(ps []order.PaymentState) []ForwardedOrderPayment {
	out := make([]ForwardedOrderPayment, len(ps))
	for i, p := range ps {
		out[i] = ForwardedOrderPayment{Source: p.Source, TransactionID: p.TransactionID, Status: string(p.Status),
			Currency: p.Currency, AmountCaptured: p.AmountCaptured, AmountRefunded: p.AmountRefunded}
	}
	return out
}

// changedPaymentsSQL reads, from $3 on, the payments of the sources $1
// whose payloads name an order at the pointers $2 (tokens joined by
// U+001F), and whose link is missing or older than the payment.
const changedPaymentsSQL = `
WITH link(source, path) AS (SELECT s, string_to_array(p, E'\x1f') FROM unnest($1::text[], $2::text[]) AS u(s, p))
SELECT p.source, p.transaction_id, p.version, p.payload #>> link.path, coalesce(l.order_id, '')
FROM payments p
JOIN link ON link.source = p.source
LEFT JOIN order_payments l ON l.source = p.source AND l.transaction_id = p.transaction_id
WHERE greatest(p.received_at, p.updated_at) >= $3
  AND p.payload IS NOT NULL
  AND length(p.payload #>> link.path) BETWEEN 1 AND $4
  AND (l.source IS NULL OR l.payment_version <> p.version OR l.order_id <> p.payload #>> link.path)
ORDER BY greatest(p.received_at, p.updated_at), p.source, p.transaction_id
LIMIT $5`

// changedPayment is a payment that names an order.
type changedPayment struct {
	source, transactionID string
	version               int
	orderID, linkedTo     string // linkedTo: the order it was linked to before, "" when none
}

// DeriveOrders runs the deriver once (see OrderDeriver). Errors wrap
// ErrUnavailable when the database failed transiently; what committed
// before the error stays, and the next run goes on from the watermark.
func (s *Orders) DeriveOrders(ctx context.Context, d OrderDeriver) (DeriveResult, error) {
	var res DeriveResult
	overlap := d.Overlap
	if overlap <= 0 {
		overlap = DefaultOrderOverlap
	}
	var watermark, start time.Time
	if err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT watermark FROM order_deriver WHERE id = 1), now()), now()`).
		Scan(&watermark, &start); err != nil {
		return res, translate("derive orders: watermark", err)
	}
	sources, paths := make([]string, 0, len(d.Links)), make([]string, 0, len(d.Links))
	for src, tokens := range d.Links {
		if len(tokens) > 0 {
			sources, paths = append(sources, src), append(paths, strings.Join(tokens, "\x1f"))
		}
	}
	for len(sources) > 0 {
		rows, err := s.pool.Query(ctx, changedPaymentsSQL, sources, paths, watermark.Add(-overlap), MaxOrderIDLength, orderBatch)
		if err != nil {
			return res, translate("derive orders: changed payments", err)
		}
		changed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (changedPayment, error) {
			var c changedPayment
			err := r.Scan(&c.source, &c.transactionID, &c.version, &c.orderID, &c.linkedTo)
			return c, err
		})
		if err != nil {
			return res, translate("derive orders: changed payments", err)
		}
		byOrder := map[string][]changedPayment{}
		var previous []string
		for _, c := range changed {
			byOrder[c.orderID] = append(byOrder[c.orderID], c)
			if c.linkedTo != "" && c.linkedTo != c.orderID {
				previous = append(previous, c.linkedTo)
			}
		}
		for _, id := range slices.Sorted(mapsKeys(byOrder)) {
			if err := s.derive(ctx, d, id, byOrder[id], &res); err != nil {
				return res, err
			}
		}
		for _, id := range previous {
			if err := s.derive(ctx, d, id, nil, &res); err != nil {
				return res, err
			}
		}
		if len(changed) < orderBatch {
			break
		}
	}
	// Orders past their expiry with nothing paid, and orders registered
	// after payments named them.
	for {
		rows, err := s.pool.Query(ctx, `SELECT order_id FROM orders
			WHERE (status = 'awaiting' AND expires_at <= now()) OR (status = 'unregistered' AND amount IS NOT NULL)
			ORDER BY order_id LIMIT $1`, orderBatch)
		if err != nil {
			return res, translate("derive orders: due", err)
		}
		due, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return res, translate("derive orders: due", err)
		}
		before := res.Changed
		for _, id := range due {
			if err := s.derive(ctx, d, id, nil, &res); err != nil {
				return res, err
			}
		}
		if len(due) < orderBatch || res.Changed == before {
			break
		}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO order_deriver (id, watermark) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET watermark = greatest(order_deriver.watermark, EXCLUDED.watermark)`, start)
	return res, translate("derive orders: watermark", err)
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// derive links payments to order id and derives its state, in one
// transaction.
func (s *Orders) derive(ctx context.Context, d OrderDeriver, id string, link []changedPayment, res *DeriveResult) error {
	var changed bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if len(link) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO orders (order_id, status) VALUES ($1, 'unregistered')
				ON CONFLICT (order_id) DO NOTHING`, id); err != nil {
				return err
			}
		}
		o, now, err := lockOrder(ctx, tx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // a previous order of a relinked payment, never registered nor derived
		}
		if err != nil {
			return err
		}
		for _, c := range link {
			if _, err := tx.Exec(ctx, `INSERT INTO order_payments (source, transaction_id, order_id, payment_version)
				VALUES ($1, $2, $3, $4) ON CONFLICT (source, transaction_id)
				DO UPDATE SET order_id = EXCLUDED.order_id, payment_version = EXCLUDED.payment_version`,
				c.source, c.transactionID, id, c.version); err != nil {
				return err
			}
		}
		changed, err = s.deriveOrder(ctx, tx, d, o, now)
		return err
	})
	if err != nil {
		return translate("derive order", err)
	}
	res.Linked += len(link)
	res.Derived++
	if changed {
		res.Changed++
	}
	return nil
}

// lockOrder reads order id FOR UPDATE, and the transaction's time.
func lockOrder(ctx context.Context, tx pgx.Tx, id string) (Order, time.Time, error) {
	var o Order
	var expires *time.Time
	var status string
	var now time.Time
	err := tx.QueryRow(ctx, `SELECT `+orderColumns+`, now() FROM orders WHERE order_id = $1 FOR UPDATE`, id).
		Scan(&o.OrderID, &o.Registered, &o.Amount, &o.Currency, &expires, &status, &o.AmountPaid, &o.Version,
			&o.CreatedAt, &o.UpdatedAt, &now)
	if expires != nil {
		o.ExpiresAt = *expires
	}
	o.Status = order.Status(status)
	return o, now, err
}

// deriveOrder derives locked order o's state from its expectation and its
// linked payments at now and, when the status or amount paid changed,
// writes it at the next version with its message and its review item.
func (s *Orders) deriveOrder(ctx context.Context, tx pgx.Tx, d OrderDeriver, o Order, now time.Time) (bool, error) {
	payments, err := orderPayments(ctx, tx, o.OrderID)
	if err != nil {
		return false, err
	}
	st := order.Derive(o.Expectation(), payments, now)
	if st.Status == o.Status && st.AmountPaid == o.AmountPaid {
		return false, nil
	}
	version := o.Version + 1
	if _, err := tx.Exec(ctx, `UPDATE orders SET status = $2, amount_paid = $3, version = $4, updated_at = now()
		WHERE order_id = $1`, o.OrderID, string(st.Status), st.AmountPaid, version); err != nil {
		return false, err
	}
	if msg := st.Status.Message(); msg != "" && (d.Route != nil || d.Destination != "") {
		route := d.Route
		if route == nil {
			route = ToDestination(d.Destination)
		}
		if err := s.outbox.insertRouted(ctx, tx, ForwardArgs{
			ID: OrderForwardID(o.OrderID, version), Type: msg,
			Order: &ForwardedOrder{OrderID: o.OrderID, Status: string(st.Status), Amount: o.Amount, Currency: o.Currency,
				ExpiresAt: nullTime(o.ExpiresAt), AmountPaid: st.AmountPaid, Version: version, Payments: forwardedPayments(payments)},
		}, nil, route); err != nil {
			return false, err
		}
	}
	if st.Status.NeedsReview() {
		named, err := json.Marshal(forwardedPayments(payments))
		if err != nil {
			return false, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO order_attention (order_id, reason, version, payments)
			VALUES ($1, $2, $3, $4) ON CONFLICT (order_id, version) DO NOTHING`,
			o.OrderID, string(st.Status), version, named); err != nil {
			return false, err
		}
	}
	return true, nil
}

// paymentOrderSQL reads payment ($1, $2)'s version, the order its payload
// names at the pointer $3 (tokens joined by U+001F), and the order and
// version it is linked to ("" and 0 when none).
const paymentOrderSQL = `
SELECT p.version, coalesce(p.payload #>> string_to_array($3, E'\x1f'), ''), coalesce(l.order_id, ''),
	coalesce(l.payment_version, 0)
FROM payments p
LEFT JOIN order_payments l ON l.source = p.source AND l.transaction_id = p.transaction_id
WHERE p.source = $1 AND p.transaction_id = $2`

// DerivePaymentOrder derives now, as a run of the deriver would, the order
// that payment (source, transactionID) names, and returns that order as it
// is then: linking the payment if it is not linked at its version yet, in
// one transaction under the order's row lock, writing the state, its
// message and its review item only when the state changed. A payment
// recorded and derived concurrently by the deriver is derived once: the
// second finds the state already there. A payment unknown, of a source
// that links no order, or whose payload names none, is ErrNotFound;
// transient failures wrap ErrUnavailable.
func (s *Orders) DerivePaymentOrder(ctx context.Context, d OrderDeriver, source, transactionID string) (Order, error) {
	tokens := d.Links[source]
	if len(tokens) == 0 {
		return Order{}, fmt.Errorf("%w: source %q links no order", ErrNotFound, source)
	}
	c := changedPayment{source: source, transactionID: transactionID}
	var linkedVersion int
	err := s.pool.QueryRow(ctx, paymentOrderSQL, source, transactionID, strings.Join(tokens, "\x1f")).
		Scan(&c.version, &c.orderID, &c.linkedTo, &linkedVersion)
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, fmt.Errorf("%w: payment %q of %q", ErrNotFound, transactionID, source)
	}
	if err != nil {
		return Order{}, translate("derive payment order", err)
	}
	if c.orderID == "" || len(c.orderID) > MaxOrderIDLength {
		return Order{}, fmt.Errorf("%w: payment %q of %q names no order", ErrNotFound, transactionID, source)
	}
	var link []changedPayment
	if c.linkedTo != c.orderID || linkedVersion != c.version {
		link = []changedPayment{c}
	}
	var res DeriveResult
	if err := s.derive(ctx, d, c.orderID, link, &res); err != nil {
		return Order{}, err
	}
	if c.linkedTo != "" && c.linkedTo != c.orderID {
		if err := s.derive(ctx, d, c.linkedTo, nil, &res); err != nil {
			return Order{}, err
		}
	}
	o, err := scanOrder(s.pool.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE order_id = $1`, c.orderID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, fmt.Errorf("%w: order %q", ErrNotFound, c.orderID)
	}
	if err != nil {
		return Order{}, translate("derive payment order", err)
	}
	return o, nil
}
