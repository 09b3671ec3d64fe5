package store

import (
	"context"
	"crypto/sha256"
	"strings"
	"time"
)

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
	// Detail names what disagreed when amount and currency alone do not
	// say it (a lifecycle event redelivered as another type, refund or
	// payment); "" for a payment's amount or currency.
	Detail    string
	CreatedAt time.Time
}

const insertMismatchSQL = `
INSERT INTO review_mismatches (source, transaction_id, body_sha256, body, amount, currency, event_id, request_id,
	payment_id, stored_amount, stored_currency, detail)
SELECT $1, $2, $3, $4, $5, $6, nullif($7, ''), $8, p.id, p.amount, p.currency::text, nullif($9, '')
FROM (SELECT 1) AS one LEFT JOIN payments p ON p.source = $1 AND p.transaction_id = $2
ON CONFLICT ON CONSTRAINT review_mismatches_delivery_key DO NOTHING`

// RecordMismatch keeps m (Source, TransactionID, Amount, Currency, EventID,
// RequestID, Body) as a review item, with the stored payment's id, amount
// and currency. The same delivery body for the same transaction is kept
// once: a PSP retrying one wrong delivery makes one item. The stored
// payment is never touched. Errors wrap ErrUnavailable when the database
// failed transiently.
func (s *Payments) RecordMismatch(ctx context.Context, m Mismatch) error {
	if m.Source == "" {
		m.Source = DefaultSource
	}
	sum := sha256.Sum256(m.Body)
	body := m.Body
	if body == nil {
		body = []byte{}
	}
	_, err := s.pool.Exec(ctx, insertMismatchSQL, m.Source, m.TransactionID, sum[:], body, m.Amount,
		strings.TrimRight(m.Currency, " "), m.EventID, m.RequestID, m.Detail)
	return translate("record mismatch", err)
}
