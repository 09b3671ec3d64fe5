package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/lifecycle"
)

// PaymentRef names one payment.
type PaymentRef struct {
	Source        string
	TransactionID string
}

// unsettledSQL lists the payments of the sources $1 still pending or
// authorized whose last change (updated_at, else received_at) is before
// $2, the longest unchanged first.
const unsettledSQL = `
SELECT source, transaction_id
FROM payments
WHERE source = ANY($1::text[]) AND status IN ($2, $3) AND coalesce(updated_at, received_at) < $4
ORDER BY coalesce(updated_at, received_at), id
LIMIT $5`

// UnsettledPayments returns at most limit payments of sources still
// pending (known by lifecycle events only) or authorized (money held, not
// captured) whose state has not changed since before: the payments whose
// webhook may have been lost, the longest unchanged first. Errors wrap
// ErrUnavailable when the database failed transiently.
func (s *Payments) UnsettledPayments(ctx context.Context, sources []string, before time.Time, limit int) ([]PaymentRef, error) {
	if len(sources) == 0 || limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, unsettledSQL, sources, string(lifecycle.Pending), string(lifecycle.StatusAuthorized), before, limit)
	if err != nil {
		return nil, translate("list unsettled payments", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PaymentRef, error) {
		var p PaymentRef
		err := r.Scan(&p.Source, &p.TransactionID)
		return p, err
	})
	if err != nil {
		return nil, translate("list unsettled payments", err)
	}
	return out, nil
}
