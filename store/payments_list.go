package store

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/lifecycle"
)

// The admin API's payment listing: every payment row (pending ones, known
// only by their events, included), newest first, a page at a time with a
// keyset cursor on (received_at, id), so that payments inserted while an
// operator pages never shift or repeat the next page. Indexed by migration
// 00014: (received_at, id), (source, received_at, id), (status,
// received_at, id), and transaction_id COLLATE "C" for the prefix.

// MaxListLimit bounds PaymentList.Limit; DefaultListLimit is its default.
const (
	MaxListLimit     = 500
	DefaultListLimit = 50
)

// PaymentStatuses are the statuses PaymentList.Status may name.
var PaymentStatuses = []string{string(lifecycle.Pending), string(lifecycle.StatusFailed), string(lifecycle.StatusCanceled),
	string(lifecycle.StatusAuthorized), string(lifecycle.StatusSucceeded), string(lifecycle.PartiallyRefunded), string(lifecycle.Refunded)}

// PaymentList selects a page of payments. Empty fields select everything;
// every field given must match.
type PaymentList struct {
	Source string
	Status string // a lifecycle status: succeeded, refunded, pending...
	// Since is inclusive, on received_at.
	Since time.Time
	// Prefix is a prefix of the transaction id, compared byte by byte.
	Prefix string
	// After, when not nil, is the cursor of the last row of the previous
	// page: only older rows follow.
	After *PaymentCursor
	// Limit is how many at most: 0 is DefaultListLimit, more than
	// MaxListLimit is MaxListLimit.
	Limit int
}

// PaymentCursor is a row's place in the listing's order.
type PaymentCursor struct {
	ReceivedAt time.Time
	ID         int64
}

// PaymentSummary is one payment as the listing returns it: its state, not
// its payload.
type PaymentSummary struct {
	ID             int64
	Source         string
	TransactionID  string
	Status         string
	Amount         int64 // 0 while pending
	Currency       string
	AmountRefunded int64
	EventID        string
	Account        string
	ReceivedAt     time.Time
	UpdatedAt      time.Time // zero when never changed since recorded
}

// Cursor is s's place in the listing, for PaymentList.After.
func (s PaymentSummary) Cursor() PaymentCursor {
	return PaymentCursor{ReceivedAt: s.ReceivedAt, ID: s.ID}
}

// listPaymentsSQL builds the listing's query with only the predicates l
// uses, so that the planner sees each one (and its index) in every plan,
// generic ones included.
func listPaymentsSQL(l PaymentList) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if l.Source != "" {
		where = append(where, "source = "+arg(l.Source))
	}
	if l.Status != "" {
		where = append(where, "status = "+arg(l.Status))
	}
	if !l.Since.IsZero() {
		where = append(where, "received_at >= "+arg(l.Since))
	}
	if l.Prefix != "" {
		where = append(where, `transaction_id COLLATE "C" >= `+arg(l.Prefix))
		if upper, ok := prefixUpperBound(l.Prefix); ok {
			where = append(where, `transaction_id COLLATE "C" < `+arg(upper))
		}
	}
	if l.After != nil {
		where = append(where, "(received_at, id) < ("+arg(l.After.ReceivedAt)+", "+arg(l.After.ID)+")")
	}
	limit := l.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	q := `SELECT id, source, transaction_id, status, coalesce(amount, 0), coalesce(currency::text, ''), amount_refunded,
       coalesce(event_id, ''), coalesce(account, ''), received_at, updated_at
FROM payments`
	if len(where) > 0 {
		q += "\nWHERE " + strings.Join(where, "\n  AND ")
	}
	q += "\nORDER BY received_at DESC, id DESC\nLIMIT " + arg(min(limit, MaxListLimit))
	return q, args
}

// prefixUpperBound returns the least string, in byte order, greater than
// every string that starts with p: p without its trailing U+10FFFF, its
// last character then the next one (past the surrogates). ok is false
// when there is none (p is all U+10FFFF).
func prefixUpperBound(p string) (upper string, ok bool) {
	r := []rune(p)
	for len(r) > 0 {
		last := r[len(r)-1]
		if last == utf8.MaxRune {
			r = r[:len(r)-1]
			continue
		}
		last++
		if last == 0xD800 {
			last = 0xE000
		}
		r[len(r)-1] = last
		return string(r), true
	}
	return "", false
}

// ListPayments returns a page of the payments l selects, newest first
// (received_at, then id), without their payloads. The next page is
// l.After = the last row's Cursor. Transient failures wrap ErrUnavailable.
func (s *Payments) ListPayments(ctx context.Context, l PaymentList) ([]PaymentSummary, error) {
	q, args := listPaymentsSQL(l)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, translate("list payments", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PaymentSummary, error) {
		var p PaymentSummary
		var updated *time.Time
		err := r.Scan(&p.ID, &p.Source, &p.TransactionID, &p.Status, &p.Amount, &p.Currency, &p.AmountRefunded,
			&p.EventID, &p.Account, &p.ReceivedAt, &updated)
		if updated != nil {
			p.UpdatedAt = *updated
		}
		return p, err
	})
	if err != nil {
		return nil, translate("list payments", err)
	}
	return out, nil
}
