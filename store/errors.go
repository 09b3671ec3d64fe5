package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Errors returned by the store. Compare them with errors.Is: the store wraps
// them with the transaction id and, where there is one, the driver's error.
var (
	// ErrDuplicate means a row with the same transaction id, amount and
	// currency is already stored: the payment was recorded before. It is
	// returned only after a conflict on payments_transaction_id_key and a
	// fresh read of the stored row.
	ErrDuplicate = errors.New("store: already recorded")

	// ErrMismatch means a row with the same transaction id but another amount
	// or currency is stored. The stored row never changes.
	ErrMismatch = errors.New("store: payload mismatch")

	// ErrInvalidPayload means the database refused the values themselves
	// (SQLSTATE class 22, data exception, or a check constraint): a number
	// outside jsonb's range, text the server encoding cannot hold. Retrying
	// the same delivery cannot succeed; the caller answers 422.
	ErrInvalidPayload = errors.New("store: invalid payload")

	// ErrNotFound means no payment has the transaction id.
	ErrNotFound = errors.New("store: not found")

	// ErrUnavailable means the database could not answer now: connection
	// refused or lost, a statement, lock or context timeout, a serialization
	// failure or deadlock, a server shutting down, too many connections...
	// It also wraps the failure of a recording transaction's forward jobs
	// (Outbox.Route), which rolled the record back with them.
	// Nothing may be assumed recorded; the caller answers 503 and the sender
	// retries.
	ErrUnavailable = errors.New("store: unavailable")

	// ErrCommitUnknown means COMMIT was sent but its outcome never came back:
	// the payment may or may not be recorded. errors.Is(err, ErrUnavailable)
	// is true for it too. The sender's retry converges on ErrDuplicate or on a
	// fresh record.
	ErrCommitUnknown = fmt.Errorf("store: commit outcome unknown (%w)", ErrUnavailable)
)

// errConflict is how the insert reports, inside the store, that the row was
// not inserted because payments_transaction_id_key already holds the
// transaction id. It never leaves the package: RecordPayment turns it into
// ErrDuplicate or ErrMismatch after a fresh read.
var errConflict = errors.New("store: conflict on " + txIDConstraint)

// txIDConstraint is the constraint whose violation means "already recorded".
const txIDConstraint = "payments_transaction_id_key"

// SQLSTATE codes the store looks at (github.com/jackc/pgerrcode names them;
// it is not a dependency of this module).
const (
	codeUniqueViolation            = "23505"
	codeReadOnlySQLTransaction     = "25006"
	codeIdleInTransactionTimeout   = "25P03"
	codeSerializationFailure       = "40001"
	codeStatementCompletionUnknown = "40003"
	codeDeadlockDetected           = "40P01"
	codeLockNotAvailable           = "55P03"
	codeQueryCanceled              = "57014"
	codeAdminShutdown              = "57P01"
	codeCrashShutdown              = "57P02"
	codeCannotConnectNow           = "57P03"
	codeIdleSessionTimeout         = "57P05"
	classConnectionException       = "08"
	classDataException             = "22"
	codeCheckViolation             = "23514"
	classInsufficientResources     = "53"
)

// isTxIDConflict reports whether err is a unique violation of
// payments_transaction_id_key, the one error that means "already recorded".
// A unique violation of any other constraint or index is not.
func isTxIDConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) &&
		pgErr.Code == codeUniqueViolation &&
		pgErr.ConstraintName == txIDConstraint
}

// translate is the seam where driver errors become the store's own: transient
// failures wrap ErrUnavailable, everything else is wrapped as it is. op says
// what failed. translate(op, nil) is nil.
func translate(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case transient(err):
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
	case invalidData(err):
		return fmt.Errorf("%w: %s: %w", ErrInvalidPayload, op, err)
	default:
		return fmt.Errorf("store: %s: %w", op, err)
	}
}

// transient reports whether err is worth retrying later as it is: the server
// or the network failed, or time ran out, rather than the request being wrong.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return transientCode(pgErr.Code)
	}
	var (
		netErr     net.Error
		connectErr *pgconn.ConnectError
	)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true
	case pgconn.Timeout(err), pgconn.SafeToRetry(err):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, &netErr), errors.As(err, &connectErr):
		return true
	}
	return false
}

// invalidData reports whether the server refused the values themselves.
func invalidData(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) &&
		(strings.HasPrefix(pgErr.Code, classDataException) || pgErr.Code == codeCheckViolation)
}

func transientCode(code string) bool {
	switch code {
	case codeSerializationFailure, codeDeadlockDetected, codeStatementCompletionUnknown,
		codeQueryCanceled, codeLockNotAvailable,
		codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow,
		codeIdleInTransactionTimeout, codeIdleSessionTimeout,
		codeReadOnlySQLTransaction: // a standby after failover: retry reaches the new primary
		return true
	}
	return strings.HasPrefix(code, classConnectionException) ||
		strings.HasPrefix(code, classInsufficientResources)
}

// commitFailed reports whether a failed COMMIT certainly did not commit: the
// server answered it with an ERROR (the transaction rolled back), or pgx knows
// the transaction had already aborted, or nothing was sent. Anything else — a
// timeout, a lost connection, a FATAL such as an administrator shutdown that
// can arrive after the commit record is written — leaves the outcome unknown.
func commitFailed(err error) bool {
	if errors.Is(err, pgx.ErrTxCommitRollback) || pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	severity := pgErr.SeverityUnlocalized
	if severity == "" {
		severity = pgErr.Severity
	}
	return severity == "ERROR" && pgErr.Code != codeStatementCompletionUnknown
}
