// Package store records payment webhooks in Postgres exactly once. It is the
// only package that speaks SQL to paylock's tables besides River's own
// driver (riverpgxv5, wired here over the store's pool); other packages meet
// pgx only as the pgx.Tx a record hook writes through. Driver errors are
// translated here, at one seam, into the store's own sentinels.
//
// # The store by concern
//
// Open returns the root, Store: it owns the one pool (Close, Ping, Pool,
// Pooled), the schema (Migrate) and River over the pool (JobClient, the
// insert-only client; StartJobs and RunJobs, the one loop that starts and
// stops a process's working client; AddJobWorker, the one way a worker adds
// itself and its queue to that client's configuration). Four types share
// the pool, one per concern; Store hands them out:
//
//   - Payments (Store.Payments): record, confirm, read and search
//     payments, and keep a delivery that mismatches its stored payment for
//     review (RecordMismatch); record each lifecycle event of a payment
//     once (RecordEvent: a failure, a refund, a dispute), its state folded
//     again from the set of its events (package lifecycle) under the
//     payment row's lock in the same transaction, and read it back
//     (PaymentState). A payment known only by later events is a row
//     without amount that its success fills in.
//   - Disbursements (Store.Disbursements): accept a loan tranche with its
//     payout job, the payout worker's transitions and the provider's
//     statuses, the status hook, stuck rows and statistics, and the
//     retention of webhook_events.
//   - Review (Store.Review): the review queue (mismatches, flagged
//     disbursements, discarded forward jobs, payments whose lifecycle needs
//     a person) and its resolutions.
//   - Outbox (Store.Outbox): the forward jobs: enqueue, list, retry,
//     replay, and the webhook-ids they carry.
//   - Deliveries (Store.Deliveries): the delivery log, the verified
//     deliveries that recorded nothing (ignored, refused, mismatch,
//     orphan), one row per source and body, capped per source and hour,
//     and its periodic purge (DeliveryLogWorker, a River periodic job).
//   - Orders (Store.Orders): what shops expect to be paid (RegisterOrder,
//     GetOrder, ListOrders), the payments linked to the order their payload
//     names, and each order's state derived from them (package order) off
//     the webhook path by DeriveOrders (OrderDeriveWorker, a River periodic
//     job on the leader): each change written once, with its order.*
//     forward job and, for double_paid, overpaid and currency_mismatch, a
//     review item, in one transaction under the order's row lock.
//
// Callers declare the few methods they need as interfaces of their own;
// each is met by the type of one concern.
//
// # What the store guarantees
//
// Payments.RecordPayment and Payments.RecordPaymentFunc return one of three
// 2xx-worthy outcomes, and only these:
//
//   - nil: the payment is newly recorded and its commit was confirmed by the
//     server;
//   - an error wrapping ErrDuplicate: payments_transaction_id_key, UNIQUE
//     (source, transaction_id), already holds the payment's source and
//     transaction id, and a fresh read of the stored row, outside any failed
//     transaction, shows the same amount and currency;
//   - an error wrapping ErrMismatch: the same, but the stored row has another
//     amount or currency. The stored row never changes.
//
// Only a conflict on that one constraint, named, counts as "already
// recorded": a unique violation of any other index, a check violation, a
// timeout, a lost connection, a serialization failure or a commit whose
// answer never came is an error, never success. Transient failures wrap
// ErrUnavailable, meaning "nothing may be assumed recorded; retry later". An
// interrupted commit is ErrCommitUnknown, which also wraps ErrUnavailable:
// the sender's retry then converges on ErrDuplicate or on a fresh record.
//
// A transaction id is unique per source (Payment.Source; "" is
// DefaultSource, "payments"): the same id from two sources is two payments,
// and a conflict, a Confirm or a Payment read only ever looks at its own
// source.
//
// Migrate applies the embedded SQL migrations (goose) and River's
// (rivermigrate) under one advisory lock, in the current schema; replicas
// may run it together.
//
// Disbursements: Disbursements.AcceptDisbursement inserts the row's payout
// job (PayoutArgs, River's InsertTx) in the transaction that creates the
// row; Store.StartJobs runs a River client that works such jobs over the
// pool (poll-only behind a pooler in transaction mode); Store.JobClient is
// the insert-only client itself, for River UI. The worker's updates
// (BeginAttempt, MarkSent, MarkFailed, NoteRetry, FlagForReview) apply to
// pending rows only; every status change runs the StatusHook, if one is set
// (Disbursements.OnStatusChange), inside its transaction.
//
// Forwarding (the outbox) stays inside the store: a source's routes are
// set once on the store (Outbox.Route), and recording a payment of that
// source (Payments.RecordPayment, RecordPaymentFunc, alone or batched) or
// a lifecycle event that changes its state (Payments.RecordEvent) is the
// one call that also inserts the message's forward jobs (ForwardArgs,
// unique by webhook-id and destination) in the recording transaction,
// before the caller's hook; no caller passes a hook for them.
// Outbox.EnqueueForwardTx (Payments.RecordPaymentForwarded) inserts a
// recorded payment's job to one named destination, and
// Outbox.ForwardStatusHook a disbursement status change's in the change's
// own transaction. Outbox.ForwardJobs and Outbox.RetryForward list and put
// back River's forward jobs.
//
// Tracing: both River clients of the store (the insert-only one and the
// one StartJobs starts) carry River's OpenTelemetry middleware (otelriver)
// with trace propagation, over Config.TracerProvider (nil: the global
// provider). A job inserted inside a span carries that span's traceparent
// in its metadata, and the span that works it ("river.work/<kind>") is
// linked to it. A job of a batch (natural batching, below) links to its own
// delivery's span, not the batch writer's (jobs_trace.go).
//
// # Where each check sits
//
// Payments.RecordPayment (RecordPaymentFunc with a nil fn) is one statement in
// autocommit, one round trip: INSERT ... ON CONFLICT ON CONSTRAINT
// payments_transaction_id_key DO NOTHING RETURNING received_at; for a
// source whose forwards all start in the express lane, the same INSERT in
// a WITH whose second INSERT writes the lane's rows of the payment it
// recorded (payments_lane.go).
//
//   - Before sending: a ctx already done (its cause set: the lock's lease
//     lost, the client gone) sends nothing and answers ErrUnavailable
//     wrapping the cause.
//   - The answer: the server commits the statement's implicit transaction
//     before it answers, so a returned row is the commit's confirmation
//     (nil). No row means the constraint held the id: the stored row is
//     read afresh (ErrDuplicate, ErrMismatch; no row found is
//     ErrUnavailable). A 23505 on payments_transaction_id_key (a deferred
//     check, raised at the implicit commit) is the same conflict. Any other
//     ERROR means the statement rolled back (translated: ErrUnavailable,
//     ErrInvalidPayload or a plain error).
//   - No answer: a lost connection, a timeout or a FATAL after the statement
//     was sent is ErrCommitUnknown. The server may have committed (it does
//     when only the client's side of the connection is lost); the sender's
//     retry then answers ErrDuplicate. A ctx that ends while the statement
//     runs (the client gone, a deadline) interrupts it: the server either
//     answers with an ERROR (rolled back) or the outcome is unknown.
//   - The lease: a caller that passes its lock's lease with WithLease (the
//     handler does) has it checked before sending, as ctx is, but a lease
//     that ends while the statement runs interrupts nothing: the statement
//     runs to its answer. There is no moment between the insert and its
//     commit at which to act on the lease, and interrupting the statement
//     would only turn a known outcome into ErrCommitUnknown (a 503 for a
//     payment that committed). A statement that did commit is the payment's
//     one record, whatever the lock: the constraint, not the lock, decides.
//
// RecordPaymentFunc with an fn is BEGIN, the same INSERT, fn (only for a
// newly recorded payment; a conflict rolls back, since the transaction is
// aborted, and is confirmed by a fresh read outside it), then COMMIT. An
// error from fn rolls back and is returned wrapped. After fn, a ctx, or a
// lease (WithLease), whose cause is set rolls back instead of committing. COMMIT runs under
// context.WithoutCancel with Config.CommitTimeout, so a caller that gives up
// does not turn a sent COMMIT into a guess; an unanswered COMMIT is
// ErrCommitUnknown. BEGIN stays a round trip of its own: pgx cannot pipeline
// it with the insert and still hand fn a pgx.Tx.
//
// # Natural batching
//
// With Config.BatchMax above 1 (the default, DefaultBatchMax),
// RecordPaymentFunc groups the inserts of concurrent deliveries, without a
// timer. A delivery that finds a writer slot free (Config.BatchWriters) and
// nobody queued records at once, on the single-row path above. Otherwise it
// queues, and the next free writer sends up to BatchMax queued payments as
// one INSERT ... SELECT FROM unnest(...) ON CONFLICT ON CONSTRAINT
// payments_transaction_id_key DO NOTHING RETURNING source, transaction_id,
// received_at (Payments.insertMany), counted in paylock_db_batch_rows.
//
// A batch takes as long as its slowest row (a row lock, a trigger, a
// loaded database), so two rules keep one slow row from holding up
// others. A payment queued for longer than Config.BatchStall starts one
// more writer, up to the pool's MaxConns (never more statements in flight
// than without batching), counted in paylock_db_batch_stalls_total; a
// writer beyond BatchWriters stops after its statement. And a payment
// recorded under a context from Alone (the handler's, for a delivery no
// lock guards) never queues: it goes on a statement of its own.
//
// Every delivery still gets its outcome from its own row:
//
//   - A row returned is newly recorded, confirmed by the statement's answer
//     (autocommit: no fn in the batch but the express lane's, which the
//     statement runs itself) or by the batch's COMMIT. A row not
//     returned conflicted on the arbiter and is confirmed by a fresh read
//     after the batch ended (ErrDuplicate, ErrMismatch, or a claim of a
//     payment known only by its events), as on the single-row path. A row
//     whose source and transaction id an earlier row of the same batch
//     carries is recorded alone once the batch ended.
//   - A row whose ctx or lease is done when its batch is taken is not sent
//     (ErrUnavailable wrapping the cause). The batch's statements run under
//     a context of their own (Config.StatementTimeout plus
//     Config.CommitTimeout): no row's ctx interrupts the others' statement,
//     and, as on the single-row path, a lease that ends while the statement
//     runs interrupts nothing.
//   - A statement answered with an ERROR (another constraint, invalid data,
//     a timeout) rolled every row back: each row is recorded again alone,
//     so one bad row fails only itself.
//   - No answer to the statement, or to the batch's COMMIT, is
//     ErrCommitUnknown for every row; the senders' retries converge.
//   - With an fn on any row, the batch is one transaction: the insert, each
//     newly recorded row's fn (with its own ctx), the forward jobs its fn
//     inserted through the batch's transaction (Outbox.EnqueueForwardTx),
//     gathered into one River InsertManyTx, then COMMIT. The batch commits
//     only whole: an fn's error or panic, a failed statement, or a row whose
//     ctx or lease is done after the fns ran (its lock's lease lost) rolls the whole
//     transaction back before COMMIT is sent, and every row is then recorded
//     alone, where its own checks apply: the row whose lease was lost is
//     answered ErrUnavailable and nothing of it, its fn's work included,
//     commits. (An fn may so run twice, the first time in a transaction
//     that rolled back; an fn writes only through tx.) The moment between
//     the last check of the rows' ctx and COMMIT is the single-row path's.
//
// # Durability
//
// Every session the store opens in the direct exec modes carries
// synchronous_commit=on, so a server, database or role configured with
// synchronous_commit=off cannot acknowledge a payment whose WAL a crash
// would lose. The recording INSERT also sets it for its own transaction
// (set_config(..., true), in the statement itself: no extra round trip),
// which covers both paths in every exec mode, the pooled ones included,
// where no session parameter reaches the server; fn's writes commit with the
// payment and are covered too. In the pooled modes the store's other writes
// (disbursements, webhook events) rely on the role's or database's setting:
// see ExecMode.
//
// Every session of the direct modes also carries server-side
// statement_timeout, lock_timeout and idle_in_transaction_session_timeout,
// so a stuck statement or an abandoned transaction ends on the server too.
//
// Migrate applies the embedded SQL migrations (goose) on sessions of its
// own; replicas may run it together, and it may run while replicas of the
// previous version keep recording: migrations that touch payments wait for
// locks in short bounded attempts and build indexes concurrently.
//
// # What it leaves to others
//
// Validating the webhook (signature, schema, currency codes, amount limits) is
// the handler's job; the store relies on the database only for NOT NULL,
// amount > 0, char(3) and valid JSON, and reports their violations as plain
// errors. Mapping errors to HTTP statuses, logging, the Redis lock that saves
// concurrent deliveries some work, and retrying are the caller's: the store
// never retries, and the unique constraint, not the lock, decides.
//
// Tracing (Config.TracerProvider, the global one by default): a payment's
// record is a paylock.store.record_payment span with paylock.batch.size on
// the batched path, a multi-row statement a paylock.store.record_batch span
// linked to its rows, and the pool's queries are traced by pgx's tracer
// hook (otelpgx); all of them only under a recording span of the caller's.
package store
