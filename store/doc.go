// Package store records payment webhooks in Postgres exactly once. It is the
// only package that imports pgx, and the only one that speaks SQL besides
// River's own driver (riverpgxv5, wired here over the store's pool): driver
// errors are translated here, at one seam, into the store's own sentinels.
//
// # What the store guarantees
//
// RecordPayment returns one of three 2xx-worthy outcomes, and only these:
//
//   - nil: the payment is newly recorded and its COMMIT was confirmed by the
//     server;
//   - an error wrapping ErrDuplicate: payments_transaction_id_key already
//     holds the transaction id, and a fresh read of the stored row, outside
//     the failed transaction, shows the same amount and currency;
//   - an error wrapping ErrMismatch: the same, but the stored row has another
//     amount or currency. The stored row never changes.
//
// Only a conflict on that one constraint, named, counts as "already
// recorded": a unique violation of any other index, a check violation, a
// timeout, a lost connection, a serialization failure or a COMMIT whose
// answer never came is an error, never success. Transient failures wrap
// ErrUnavailable, meaning "nothing may be assumed recorded; retry later". An
// interrupted COMMIT is ErrCommitUnknown, which also wraps ErrUnavailable:
// the sender's retry then converges on ErrDuplicate or on a fresh record.
//
// COMMIT runs under context.WithoutCancel with Config.CommitTimeout, so a
// caller that gives up does not turn a sent COMMIT into a guess. Every pooled
// session carries server-side statement_timeout, lock_timeout and
// idle_in_transaction_session_timeout, so a stuck statement or an abandoned
// transaction ends on the server too.
//
// Migrate applies the embedded SQL migrations (goose) and River's
// (rivermigrate) under one advisory lock, in the current schema; replicas
// may run it together.
//
// Disbursements: AcceptDisbursement inserts the row's payout job
// (PayoutArgs, River's InsertTx) in the transaction that creates the row;
// StartJobs runs a River client that works such jobs over the pool
// (poll-only behind a pooler in transaction mode). The worker's updates
// (BeginAttempt, MarkSent, MarkFailed, NoteRetry, FlagForReview) apply to
// pending rows only; every status change runs the StatusHook, if one is set,
// inside its transaction.
//
// # What it leaves to others
//
// Validating the webhook (signature, schema, currency codes, amount limits) is
// the handler's job; the store relies on the database only for NOT NULL,
// amount > 0, char(3) and valid JSON, and reports their violations as plain
// errors. Mapping errors to HTTP statuses, logging, the Redis lock that saves
// concurrent deliveries some work, and retrying are the caller's: the store
// never retries, and the unique constraint, not the lock, decides.
package store
