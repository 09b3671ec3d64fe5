package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// The admin console's payment search: payments found by transaction id,
// event id, or source and time range (indexed by migrations 00009 and 00014).

// MaxSearchLimit bounds PaymentSearch.Limit; DefaultSearchLimit is its
// default.
const (
	MaxSearchLimit     = 200
	DefaultSearchLimit = 50
)

// PaymentSearch selects payments. Empty fields select everything; every
// field given must match. The time range is on received_at: Since
// inclusive, Until exclusive.
type PaymentSearch struct {
	TransactionID string
	EventID       string
	Source        string
	Since, Until  time.Time
	// Limit is how many at most, newest first: 0 is DefaultSearchLimit,
	// and more than MaxSearchLimit is MaxSearchLimit.
	Limit int
}

const searchPaymentsSQL = `
SELECT source, transaction_id, amount, currency::text, coalesce(event_id, ''), received_at
FROM payments
WHERE amount IS NOT NULL
  AND ($1 = '' OR transaction_id = $1)
  AND ($2 = '' OR event_id = $2)
  AND ($3 = '' OR source = $3)
  AND ($4::timestamptz IS NULL OR received_at >= $4)
  AND ($5::timestamptz IS NULL OR received_at < $5)
ORDER BY received_at DESC, id DESC
LIMIT $6`

// SearchPayments returns the payments q selects, newest first, without
// their payloads (read one with Payment). Transient failures wrap
// ErrUnavailable.
func (s *Payments) SearchPayments(ctx context.Context, q PaymentSearch) ([]Payment, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	limit = min(limit, MaxSearchLimit)
	rows, err := s.pool.Query(ctx, searchPaymentsSQL, q.TransactionID, q.EventID, q.Source,
		nullTime(q.Since), nullTime(q.Until), limit)
	if err != nil {
		return nil, translate("search payments", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Payment, error) {
		var p Payment
		err := r.Scan(&p.Source, &p.TransactionID, &p.Amount, &p.Currency, &p.EventID, &p.ReceivedAt)
		return p, err
	})
	if err != nil {
		return nil, translate("search payments", err)
	}
	return out, nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
