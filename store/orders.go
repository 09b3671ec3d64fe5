package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/order"
)

// Orders keeps what shops expect to be paid (RegisterOrder), links the
// payments that name an order to it, and derives each order's state from
// its expectation and its payments' states (package order) off the webhook
// path: DeriveOrders, run by a periodic job on the River leader, writes
// each change once, with its order.* forward job and, for double_paid,
// overpaid and currency_mismatch, a review item naming the payments, in
// the transaction that makes it. Recording a payment never waits for an
// order. Get it from Store.Orders; it is safe for concurrent use.
type Orders struct {
	*base
	outbox *Outbox
}

// Orders keeps orders and derives their states.
func (s *Store) Orders() *Orders { return s.orders }

// Errors of orders. Compare them with errors.Is.
var (
	// ErrOrderConflict means the order id is registered with another
	// amount, currency or expiry: nothing changed.
	ErrOrderConflict = errors.New("store: order registered with another expectation")
	// ErrOrderInvalid means a registration's field is missing or out of
	// range: nothing was written.
	ErrOrderInvalid = errors.New("store: invalid order")
)

// MaxOrderIDLength bounds an order id, in bytes.
const MaxOrderIDLength = 200

// OrderRegistration is what a shop expects of an order.
type OrderRegistration struct {
	OrderID  string
	Amount   int64 // minor units, > 0
	Currency string
	// ExpiresAt is when an order nobody paid expires; zero: never. It is
	// kept to the microsecond.
	ExpiresAt time.Time
}

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// OrderFieldError is a registration's bad field: it names the field
// (order_id, amount, currency) and says why. It wraps ErrOrderInvalid.
type OrderFieldError struct {
	Field, Reason string
}

func (e *OrderFieldError) Error() string { return ErrOrderInvalid.Error() + ": " + e.Reason }

// Unwrap returns ErrOrderInvalid.
func (e *OrderFieldError) Unwrap() error { return ErrOrderInvalid }

// Check returns an *OrderFieldError naming the first bad field of r, nil
// when r is fit to register.
func (r OrderRegistration) Check() error {
	switch {
	case r.OrderID == "" || len(r.OrderID) > MaxOrderIDLength || !utf8.ValidString(r.OrderID) ||
		strings.IndexFunc(r.OrderID, unicode.IsControl) >= 0:
		return &OrderFieldError{Field: "order_id", Reason: fmt.Sprintf("order_id must be 1 to %d bytes of UTF-8 text without control characters", MaxOrderIDLength)}
	case r.Amount <= 0 || r.Amount > lifecycle.MaxAmount:
		return &OrderFieldError{Field: "amount", Reason: fmt.Sprintf("amount must be an integer from 1 to %d, in the currency's minor unit", lifecycle.MaxAmount)}
	case !currencyRE.MatchString(r.Currency):
		return &OrderFieldError{Field: "currency", Reason: "currency must be an upper-case ISO 4217 code such as EUR"}
	}
	return nil
}

// Order is an order as stored: its expectation (zero while unregistered),
// its derived state and the payments that name it.
type Order struct {
	OrderID    string
	Registered bool
	Amount     int64
	Currency   string
	ExpiresAt  time.Time // zero: never
	Status     order.Status
	AmountPaid int64
	Version    int
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Payments are the linked payments' current states, oldest link
	// first; only GetOrder fills them in.
	Payments []order.PaymentState
}

// Expectation is o's expectation, nil while it is unregistered.
func (o Order) Expectation() *order.Expectation {
	if !o.Registered {
		return nil
	}
	return &order.Expectation{Amount: o.Amount, Currency: o.Currency, ExpiresAt: o.ExpiresAt}
}

// Cursor is o's place in ListOrders' order.
func (o Order) Cursor() OrderCursor { return OrderCursor{CreatedAt: o.CreatedAt, OrderID: o.OrderID} }

const orderColumns = `order_id, amount IS NOT NULL, coalesce(amount, 0), coalesce(currency, ''), expires_at, status,
	amount_paid, version, created_at, updated_at`

func scanOrder(row pgx.Row) (Order, error) {
	var o Order
	var expires *time.Time
	var status string
	err := row.Scan(&o.OrderID, &o.Registered, &o.Amount, &o.Currency, &expires, &status, &o.AmountPaid, &o.Version,
		&o.CreatedAt, &o.UpdatedAt)
	if expires != nil {
		o.ExpiresAt = *expires
	}
	o.Status = order.Status(status)
	return o, err
}

// RegisterOrder registers r. created is true when this call registered it
// (a new order, or one that payments named before anybody registered it:
// the deriver then derives its state again); false when the same
// expectation was registered before, which is returned as it stands.
// Errors wrap ErrOrderInvalid for a bad r, ErrOrderConflict when the
// order id is registered with another amount, currency or expiry, and
// ErrUnavailable when the database failed transiently.
func (s *Orders) RegisterOrder(ctx context.Context, r OrderRegistration) (o Order, created bool, err error) {
	if err := r.Check(); err != nil {
		return Order{}, false, err
	}
	r.ExpiresAt = r.ExpiresAt.Truncate(time.Microsecond)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		o, err = scanOrder(tx.QueryRow(ctx, `INSERT INTO orders (order_id, amount, currency, expires_at, status, registered_at)
			VALUES ($1, $2, $3, $4, 'awaiting', now()) ON CONFLICT (order_id) DO NOTHING RETURNING `+orderColumns,
			r.OrderID, r.Amount, r.Currency, nullTime(r.ExpiresAt)))
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if o, err = scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE order_id = $1 FOR UPDATE`,
			r.OrderID)); err != nil {
			return err
		}
		if !o.Registered {
			created = true
			o, err = scanOrder(tx.QueryRow(ctx, `UPDATE orders SET amount = $2, currency = $3, expires_at = $4,
				registered_at = now() WHERE order_id = $1 RETURNING `+orderColumns,
				r.OrderID, r.Amount, r.Currency, nullTime(r.ExpiresAt)))
			return err
		}
		if o.Amount != r.Amount || o.Currency != r.Currency || !o.ExpiresAt.Equal(r.ExpiresAt) {
			return fmt.Errorf("%w: order %q is registered as %d %s, expiring %s", ErrOrderConflict, r.OrderID,
				o.Amount, o.Currency, formatExpiry(o.ExpiresAt))
		}
		return nil
	})
	if errors.Is(err, ErrOrderConflict) {
		return Order{}, false, err
	}
	if err != nil {
		return Order{}, false, translate("register order", err)
	}
	return o, created, nil
}

func formatExpiry(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// orderPaymentsSQL reads the current state of the payments linked to order
// $1, oldest link first. A NULL amount_captured is the success's amount
// (see stateColumns).
const orderPaymentsSQL = `SELECT p.source, p.transaction_id, p.status, coalesce(p.currency::text, ''),
	coalesce(p.amount_captured, CASE WHEN p.status IN ('succeeded', 'partially_refunded', 'refunded') THEN p.amount END, 0),
	p.amount_refunded
FROM order_payments l JOIN payments p ON p.source = l.source AND p.transaction_id = l.transaction_id
WHERE l.order_id = $1
ORDER BY l.linked_at, l.source, l.transaction_id`

// orderPayments reads the states of the payments linked to orderID.
func orderPayments(ctx context.Context, q pgx.Tx, orderID string) ([]order.PaymentState, error) {
	rows, err := q.Query(ctx, orderPaymentsSQL, orderID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (order.PaymentState, error) {
		var p order.PaymentState
		var st string
		err := r.Scan(&p.Source, &p.TransactionID, &st, &p.Currency, &p.AmountCaptured, &p.AmountRefunded)
		p.Status = lifecycle.Status(st)
		return p, err
	})
}

// GetOrder returns the order with its linked payments. An order id that no
// payment named and nobody registered is ErrNotFound; transient failures
// wrap ErrUnavailable.
func (s *Orders) GetOrder(ctx context.Context, orderID string) (Order, error) {
	var o Order
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead},
		func(tx pgx.Tx) error {
			var err error
			if o, err = scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE order_id = $1`, orderID)); err != nil {
				return err
			}
			o.Payments, err = orderPayments(ctx, tx, orderID)
			return err
		})
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, fmt.Errorf("%w: order %q", ErrNotFound, orderID)
	}
	if err != nil {
		return Order{}, translate("get order", err)
	}
	return o, nil
}

// OrderList selects a page of orders, newest first. Empty fields select
// everything.
type OrderList struct {
	Status order.Status
	Since  time.Time // inclusive, on created_at
	// After, when not nil, is the cursor of the last row of the previous
	// page: only older rows follow.
	After *OrderCursor
	// Limit: 0 is DefaultListLimit, more than MaxListLimit is MaxListLimit.
	Limit int
}

// OrderCursor is an order's place in the listing's order.
type OrderCursor struct {
	CreatedAt time.Time
	OrderID   string
}

// ListOrders returns a page of the orders l selects, newest first
// (created_at, then order id), without their payments; the next page is
// l.After = the last row's Cursor. Transient failures wrap ErrUnavailable.
func (s *Orders) ListOrders(ctx context.Context, l OrderList) ([]Order, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if l.Status != "" {
		where = append(where, "status = "+arg(string(l.Status)))
	}
	if !l.Since.IsZero() {
		where = append(where, "created_at >= "+arg(l.Since))
	}
	if l.After != nil {
		where = append(where, "(created_at, order_id) < ("+arg(l.After.CreatedAt)+", "+arg(l.After.OrderID)+")")
	}
	limit := l.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	q := `SELECT ` + orderColumns + ` FROM orders`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at DESC, order_id DESC LIMIT " + arg(min(limit, MaxListLimit))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, translate("list orders", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Order, error) { return scanOrder(r) })
	if err != nil {
		return nil, translate("list orders", err)
	}
	return out, nil
}

// stuckOrdersSQL: registered orders still awaiting payment (or expired
// unpaid) that no payment names, registered in [$2, $1), newest first: the
// orders whose payment's webhook may have been lost.
const stuckOrdersSQL = `SELECT o.order_id FROM orders o
WHERE o.status IN ('awaiting', 'expired') AND o.amount IS NOT NULL
  AND o.created_at < $1 AND o.created_at >= $2
  AND NOT EXISTS (SELECT 1 FROM order_payments p WHERE p.order_id = o.order_id)
ORDER BY o.created_at DESC, o.order_id DESC
LIMIT $3`

// StuckOrders returns at most limit ids of the orders registered in
// [since, before) that are still awaiting payment, or expired, with no
// payment naming them: the orders whose payment's webhook may have been
// lost, for the sync janitor to look for at the provider. The newest come
// first. Errors wrap ErrUnavailable when the database failed transiently.
func (s *Orders) StuckOrders(ctx context.Context, before, since time.Time, limit int) ([]string, error) {
	if limit <= 0 || !since.Before(before) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, stuckOrdersSQL, before, since, limit)
	if err != nil {
		return nil, translate("list stuck orders", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, translate("list stuck orders", err)
	}
	return out, nil
}
