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

// Payment is one recorded payment webhook.
type Payment struct {
	// Source is the webhook source that delivered the payment ("payments"
	// for paylock's own flat body). A transaction id is unique per source.
	Source        string
	TransactionID string
	Amount        int64 // in the currency's minor unit; must be > 0
	Currency      string
	// Payload is the JSON body as received. It is stored as jsonb, so a
	// stored row reads back with jsonb's whitespace and key order.
	Payload    []byte
	EventID    string    // the delivery id, for audit; "" is stored as NULL
	ReceivedAt time.Time // set by the database
}

// insertPaymentSQL inserts a payment unless payments_transaction_id_key
// already holds its transaction id; it returns no row in that case. The
// arbiter is named: a bare ON CONFLICT DO NOTHING would also swallow
// conflicts on any other unique index.
const insertPaymentSQL = `
INSERT INTO payments (transaction_id, amount, currency, payload, event_id)
VALUES ($1, $2, $3, $4, NULLIF($5, ''))
ON CONFLICT ON CONSTRAINT payments_transaction_id_key DO NOTHING
RETURNING received_at`

// selectSummarySQL reads what decides duplicate or mismatch, never the
// payload: a small jsonb can expand to a large text form.
const selectSummarySQL = `
SELECT transaction_id, amount, currency::text, coalesce(event_id, ''), received_at
FROM payments
WHERE transaction_id = $1`

const selectPaymentSQL = `
SELECT transaction_id, amount, currency::text, payload, coalesce(event_id, ''), received_at
FROM payments
WHERE transaction_id = $1`

// RecordPayment inserts p in one transaction and confirms the COMMIT.
//
// It returns nil, with p as recorded, only when the payment is newly recorded
// and COMMIT is confirmed. It returns an error wrapping ErrDuplicate or
// ErrMismatch, with the stored row (without its payload; see Confirm), when
// payments_transaction_id_key already holds p's transaction id, read afresh
// after the transaction ended. Any other
// outcome is an error: ErrCommitUnknown when COMMIT was sent but its outcome
// is unknown; ErrUnavailable for transient failures (also when the conflict
// could not be confirmed by reading the stored row); a plain wrapped error for
// the rest, such as another constraint's violation or an invalid payload.
func (s *Store) RecordPayment(ctx context.Context, p Payment) (Payment, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Payment{}, translate("record payment: begin", err)
	}
	rec, err := s.recordPaymentTx(ctx, tx, p)
	if err != nil {
		// After a conflict the transaction is aborted (25P02 for any further
		// statement), so the stored row is read outside it, afresh.
		s.rollback(ctx, tx)
		if errors.Is(err, errConflict) {
			return s.confirmConflict(ctx, p)
		}
		return Payment{}, err
	}
	if s.afterInsert != nil {
		s.afterInsert()
	}
	// The caller's context may have ended while the insert ran: the lock's
	// lease was lost, or the client went away. A replica that lost its lock
	// must not COMMIT; the retry settles the payment.
	if cause := context.Cause(ctx); cause != nil {
		s.rollback(ctx, tx)
		return Payment{}, fmt.Errorf("%w: record payment: not committed: %w", ErrUnavailable, cause)
	}
	if err := s.commit(ctx, tx); err != nil {
		if errors.Is(err, errConflict) {
			return s.confirmConflict(ctx, p)
		}
		return Payment{}, err
	}
	return rec, nil
}

// recordPaymentTx inserts p in tx. It returns errConflict when
// payments_transaction_id_key already holds p's transaction id, whether the
// insert said so by returning no row or by raising a unique violation.
// Side effects that must commit with the payment belong beside it here.
func (s *Store) recordPaymentTx(ctx context.Context, tx pgx.Tx, p Payment) (Payment, error) {
	// json.RawMessage, not []byte: in the exec and simple_protocol modes
	// (behind PgBouncer) pgx types a parameter by its Go type, and would
	// send a []byte as bytea, which is no JSON.
	err := tx.QueryRow(ctx, s.insert,
		p.TransactionID, p.Amount, p.Currency, json.RawMessage(p.Payload), p.EventID,
	).Scan(&p.ReceivedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Payment{}, errConflict
	case isTxIDConflict(err):
		return Payment{}, fmt.Errorf("%w: %w", errConflict, err)
	case err != nil:
		return Payment{}, translate("record payment: insert", err)
	}
	return p, nil
}

// commit commits tx under its own timeout, even if ctx is done. A failure
// that leaves the outcome unknown is ErrCommitUnknown: when the timeout
// fires, pgx sends a cancel request and drops the connection, and the server
// may have committed or not. A definite failure is translated, and a unique
// violation of payments_transaction_id_key (raised at COMMIT by a deferred
// check) is errConflict.
func (s *Store) commit(ctx context.Context, tx pgx.Tx) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CommitTimeout)
	defer cancel()
	err := tx.Commit(ctx)
	switch {
	case err == nil:
		return nil
	case !commitFailed(err):
		return fmt.Errorf("%w: %w", ErrCommitUnknown, err)
	case isTxIDConflict(err):
		return fmt.Errorf("%w: %w", errConflict, err)
	}
	return translate("record payment: commit", err)
}

// rollback ends tx under its own timeout, even if ctx is done. Its error is
// dropped: pgx closes a connection whose ROLLBACK failed, and the server then
// aborts the transaction.
func (s *Store) rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CommitTimeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}

// confirmConflict confirms that p's transaction id conflicted with a stored
// row. A conflict whose row cannot be found (the conflicting transaction
// rolled back, say) is ErrUnavailable: the sender must retry.
func (s *Store) confirmConflict(ctx context.Context, p Payment) (Payment, error) {
	stored, err := s.Confirm(ctx, p)
	if errors.Is(err, ErrNotFound) {
		return Payment{}, fmt.Errorf("%w: transaction %q conflicted on %s but no stored row was found",
			ErrUnavailable, p.TransactionID, txIDConstraint)
	}
	return stored, err
}

// Confirm reads the stored payment with p's transaction id and compares it
// with p: an error wrapping ErrDuplicate when amount and currency match,
// ErrMismatch when they differ, ErrNotFound when nothing is stored, and
// ErrUnavailable for transient failures. The returned Payment (set with
// ErrDuplicate and ErrMismatch) has no Payload.
func (s *Store) Confirm(ctx context.Context, p Payment) (Payment, error) {
	var stored Payment
	err := s.pool.QueryRow(ctx, selectSummarySQL, p.TransactionID).Scan(
		&stored.TransactionID, &stored.Amount, &stored.Currency, &stored.EventID, &stored.ReceivedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Payment{}, fmt.Errorf("%w: transaction %q", ErrNotFound, p.TransactionID)
	case err != nil:
		return Payment{}, translate("confirm payment", err)
	}
	// char(3) compares ignoring trailing blanks; so does this.
	if stored.Amount != p.Amount || stored.Currency != strings.TrimRight(p.Currency, " ") {
		return stored, fmt.Errorf("%w: transaction %q is stored as %d %s, received %d %s",
			ErrMismatch, p.TransactionID, stored.Amount, stored.Currency, p.Amount, p.Currency)
	}
	return stored, fmt.Errorf("%w: transaction %q", ErrDuplicate, p.TransactionID)
}

// Payment returns the stored payment with the transaction id, or an error
// wrapping ErrNotFound. Transient failures wrap ErrUnavailable.
func (s *Store) Payment(ctx context.Context, transactionID string) (Payment, error) {
	var p Payment
	err := s.pool.QueryRow(ctx, selectPaymentSQL, transactionID).Scan(
		&p.TransactionID, &p.Amount, &p.Currency, &p.Payload, &p.EventID, &p.ReceivedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Payment{}, fmt.Errorf("%w: transaction %q", ErrNotFound, transactionID)
	}
	if err != nil {
		return Payment{}, translate("read payment", err)
	}
	return p, nil
}
