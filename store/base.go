package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// base is what the store's types share: the one pool, the configuration
// and the insert-only River client (jobs), which inserts the outbox jobs in
// the transactions that create their rows.
type base struct {
	pool *pgxpool.Pool
	cfg  Config
	jobs *river.Client[pgx.Tx]
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// commit commits tx under its own timeout, even if ctx is done. A failure
// that leaves the outcome unknown is ErrCommitUnknown: when the timeout
// fires, pgx sends a cancel request and drops the connection, and the server
// may have committed or not. A definite failure is translated, and a unique
// violation of payments_transaction_id_key (raised at COMMIT by a deferred
// check) is errConflict.
func (b *base) commit(ctx context.Context, tx pgx.Tx) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.CommitTimeout)
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
func (b *base) rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.CommitTimeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}
