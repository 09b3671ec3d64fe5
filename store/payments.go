package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
)

// Payments records payment webhooks exactly once, with the forward jobs
// of their source's routes (Outbox.Route) in the recording transaction, and
// reads them back:
// RecordPayment, RecordPaymentFunc and RecordPaymentForwarded (the package
// documentation gives their guarantees), Confirm, Payment and
// SearchPayments, and RecordMismatch, which keeps a delivery that mismatches
// its stored payment for the review queue. Get it from Store.Payments; it
// is safe for concurrent use.
type Payments struct {
	*base
	// insert is the statement RecordPaymentFunc runs; see insertPaymentSQL.
	insert string
	// outbox inserts the forward jobs of a recorded payment: its source's
	// routes' (Outbox.Route) and RecordPaymentForwarded's.
	outbox *Outbox
	// batch groups concurrent inserts (payments_batch.go); nil: every
	// payment is recorded alone (Config.BatchMax 1).
	batch *batcher
	// tracer starts the record spans (trace.go).
	tracer trace.Tracer
}

// DefaultSource is the source of a Payment whose Source is empty: paylock's
// own flat body, and every payment recorded before sources existed
// (migration 00004 gave them this source).
const DefaultSource = "payments"

// Payment is one recorded payment webhook.
type Payment struct {
	// Source is the webhook source that delivered the payment. A
	// transaction id is unique per source: the same id from two sources is
	// two payments. "" means DefaultSource; the store returns the source it
	// used, never "".
	Source        string
	TransactionID string
	Amount        int64 // in the currency's minor unit; must be > 0
	Currency      string
	// Payload is the JSON body as received. It is stored as jsonb, so a
	// stored row reads back with jsonb's whitespace and key order.
	Payload []byte
	EventID string // the delivery id, for audit; "" is stored as NULL
	// Account is the merchant account the payment is of ("": the provider
	// has none); a later event of another account is not applied to it.
	Account    string
	ReceivedAt time.Time // set by the database
	// Lifecycle, set on a payment as recorded, is its change of state
	// when its success arrived after other events (a refund, a failure)
	// and was folded with them (RecordEvent); nil for a payment recorded
	// first, which is succeeded at version 1.
	Lifecycle *Change

	// lane is the express lane's rows of the payment's payment.recorded
	// message when the recording statement inserts them
	// (payments_lane.go); never set on a payment the store returns.
	lane *expressLane
}

// withSource returns p with an empty Source replaced by DefaultSource.
func (p Payment) withSource() Payment {
	if p.Source == "" {
		p.Source = DefaultSource
	}
	return p
}

// insertPaymentSQL inserts a payment unless payments_transaction_id_key
// (UNIQUE (source, transaction_id)) already holds its source and
// transaction id; it returns no row in that case. The arbiter is named: a
// bare ON CONFLICT DO NOTHING would also swallow conflicts on any other
// unique index.
//
// It is one statement in every exec mode, and it sets synchronous_commit=on
// for its own transaction (set_config(..., true), evaluated once, before the
// row is inserted): the autocommit statement's implicit transaction or the
// recording transaction of RecordPaymentFunc then commits only once its WAL
// is flushed, whatever the server's, role's or session's setting, and even
// in the pooled exec modes, where no session parameter reaches the server.
// The parameters are cast because INSERT ... SELECT does not type them from
// the columns; currency is cast to text, not char(3), so that a longer code
// is refused (an explicit cast to char(3) would truncate it).
const insertPaymentSQL = `
INSERT INTO payments (source, transaction_id, amount, currency, payload, event_id)
SELECT $1::text, $2::text, $3::bigint, $4::text, $5::jsonb, NULLIF($6::text, '')
WHERE set_config('synchronous_commit', 'on', true) = 'on'
ON CONFLICT ON CONSTRAINT payments_transaction_id_key DO NOTHING
RETURNING received_at`

// insertPaymentAccountSQL is insertPaymentSQL for a payment that names its
// merchant account ($7). A payment without one uses insertPaymentSQL, the
// statement of the versions before accounts were kept.
const insertPaymentAccountSQL = `
INSERT INTO payments (source, transaction_id, amount, currency, payload, event_id, account)
SELECT $1::text, $2::text, $3::bigint, $4::text, $5::jsonb, NULLIF($6::text, ''), $7::text
WHERE set_config('synchronous_commit', 'on', true) = 'on'
ON CONFLICT ON CONSTRAINT payments_transaction_id_key DO NOTHING
RETURNING received_at`

// selectSummarySQL reads what decides duplicate or mismatch, never the
// payload: a small jsonb can expand to a large text form.
const selectSummarySQL = `
SELECT source, transaction_id, coalesce(amount, 0), coalesce(currency::text, ''), coalesce(event_id, ''), received_at, amount IS NULL
FROM payments
WHERE source = $1 AND transaction_id = $2`

const selectPaymentSQL = `
SELECT source, transaction_id, amount, currency::text, payload, coalesce(event_id, ''), received_at
FROM payments
WHERE source = $1 AND transaction_id = $2 AND amount IS NOT NULL`

// RecordPayment records p: RecordPaymentFunc(ctx, p, nil). That is one
// statement in autocommit (one round trip) unless p's source forwards
// (Outbox.Route) to a destination whose messages are River jobs: its
// forward jobs are then inserted in the recording transaction. Messages
// that all start in the express lane (Config.ExpressForwards) are
// inserted by the recording statement itself (payments_lane.go).
//
// It returns nil, with p as recorded, only when the payment is newly recorded
// and its commit is confirmed. It returns an error wrapping ErrDuplicate or
// ErrMismatch, with the stored row (without its payload; see Confirm), when
// payments_transaction_id_key already holds p's source and transaction id,
// read afresh after the insert. Any other outcome is an error:
// ErrCommitUnknown when the statement was sent but its outcome never came
// back; ErrUnavailable for transient failures (also when ctx was already done
// before anything was sent, and when the conflict could not be confirmed by
// reading the stored row); ErrInvalidPayload when the database refused the
// values; a plain wrapped error for the rest, such as another constraint's
// violation.
func (s *Payments) RecordPayment(ctx context.Context, p Payment) (Payment, error) {
	return s.RecordPaymentFunc(ctx, p, nil)
}

// RecordPaymentFunc records p and, when fn is not nil, runs fn in the same
// transaction, after the insert and only when p is newly recorded: whatever
// fn writes through tx commits if and only if the payment does. fn receives
// p as recorded; it must not commit or roll back tx. When p's source
// forwards (Outbox.Route), its forward jobs are inserted in that
// transaction too, before fn, under the same rules.
//
// With fn nil and a source that does not forward, or whose forwards all
// start in the express lane, p is recorded with one statement in
// autocommit, one round trip; its success is the commit's confirmation.
//
// Otherwise it runs BEGIN, the insert, the forward jobs and fn, then
// COMMIT under Config.CommitTimeout (even if ctx is done). An error from
// fn rolls back and is returned wrapped (wrapping ErrUnavailable when it
// is a transient driver or context error); a forward job that cannot be
// inserted rolls back too (ErrUnavailable: the sender retries); so is a
// ctx whose cause is set after fn (the lock's
// lease was lost, or the client went away; see WithLease): a replica that
// lost its lock must not commit, the retry settles the payment.
//
// In both cases a ctx already done before the insert is sent sends nothing,
// and the outcomes are those of RecordPayment: nil only for a newly recorded
// payment whose commit is confirmed, ErrDuplicate or ErrMismatch after a
// conflict on payments_transaction_id_key and a fresh read (fn is not run),
// ErrCommitUnknown when the commit's outcome is unknown.
func (s *Payments) RecordPaymentFunc(ctx context.Context, p Payment, fn func(ctx context.Context, tx pgx.Tx, p Payment) error) (rec Payment, err error) {
	p = p.withSource()
	p.lane = nil
	hook := s.outbox.recordHook(p.Source, fn)
	ctx, span := s.startRecord(ctx, p)
	defer func() { rec.lane = nil; endRecord(span, err) }()
	if fn == nil && hook != nil {
		// Only the source's forwards: when the express lane takes them
		// all, the recording statement inserts them (payments_lane.go).
		// hook stays for the paths that record in a transaction.
		p.lane = s.outbox.prerouteRecorded(ctx, p)
	}
	fn = hook
	if cause := leaseCause(ctx); cause != nil {
		return Payment{}, notSent(cause)
	}
	if s.batch != nil && !alone(ctx) {
		return s.recordBatched(ctx, p, fn)
	}
	rec, err = s.recordSingle(ctx, p, fn)
	if errors.Is(err, errConflict) {
		return s.confirmConflictFunc(ctx, p, fn)
	}
	return rec, err
}

// recordSingle records p alone: in autocommit without fn, or when the
// statement inserts p's forwards itself (p.lane), in a transaction
// otherwise. A conflict on the arbiter is errConflict, to be confirmed.
func (s *Payments) recordSingle(ctx context.Context, p Payment, fn recordFn) (Payment, error) {
	if fn == nil || p.lane != nil {
		return s.recordAutocommit(ctx, p)
	}
	return s.recordInTx(ctx, p, fn)
}

// recordAutocommit inserts p with one statement outside any transaction.
// The server commits the statement's implicit transaction before it answers,
// so a reply is the commit's outcome and a missing one leaves it unknown.
func (s *Payments) recordAutocommit(ctx context.Context, p Payment) (Payment, error) {
	// Acquired apart, so that waiting for a connection or opening one, which
	// sends nothing, is never taken for an unanswered insert.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return Payment{}, translate("record payment: acquire", err)
	}
	defer conn.Release()
	rec, err := s.insertAutocommit(ctx, conn, p)
	switch {
	case err == nil, errors.Is(err, errConflict):
		return rec, err
	case sentWithoutAnswer(err):
		return Payment{}, fmt.Errorf("%w: record payment: insert: %w", ErrCommitUnknown, err)
	}
	return Payment{}, translate("record payment: insert", err)
}

// insertAutocommit is insertPaymentQ on conn, in autocommit; with p's
// express lane rows (p.lane), which the same statement inserts.
func (s *Payments) insertAutocommit(ctx context.Context, conn *pgxpool.Conn, p Payment) (Payment, error) {
	if p.lane == nil {
		return s.insertPaymentQ(ctx, conn, p)
	}
	recorded, err := s.insertMany(ctx, conn.Conn(), []*batchReq{{p: p}}, true)
	switch {
	case isTxIDConflict(err):
		return Payment{}, fmt.Errorf("%w: %w", errConflict, err)
	case err != nil:
		return Payment{}, err
	}
	rec, ok := recorded[[2]string{p.Source, p.TransactionID}]
	if !ok {
		return Payment{}, errConflict
	}
	return rec, nil
}

// recordInTx inserts p in a transaction, runs fn in it and commits.
func (s *Payments) recordInTx(ctx context.Context, p Payment, fn func(context.Context, pgx.Tx, Payment) error) (Payment, error) {
	return s.inTx(ctx, p, s.insertPayment, fn)
}

// inTx writes p with write in a transaction, runs fn (when not nil) in it
// and commits.
func (s *Payments) inTx(ctx context.Context, p Payment, write func(context.Context, pgx.Tx, Payment) (Payment, error),
	fn func(context.Context, pgx.Tx, Payment) error) (Payment, error) {
	// BEGIN is a round trip of its own: pgx offers no way to send it in one
	// with the insert and still hand fn a pgx.Tx.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Payment{}, translate("record payment: begin", err)
	}
	defer func() {
		// A panic in fn must not leave the transaction, and its connection,
		// behind. (Rolling back an ended transaction does nothing.)
		if r := recover(); r != nil {
			s.rollback(ctx, tx)
			panic(r)
		}
	}()
	rec, err := write(ctx, tx, p)
	if err != nil {
		// After a conflict the transaction is aborted (25P02 for any further
		// statement), so the stored row is read outside it, afresh.
		s.rollback(ctx, tx)
		if errors.Is(err, errConflict) {
			return Payment{}, err
		}
		return Payment{}, translate("record payment: insert", err)
	}
	if fn == nil {
		fn = func(context.Context, pgx.Tx, Payment) error { return nil }
	}
	if err := fn(ctx, tx, rec); err != nil {
		s.rollback(ctx, tx)
		if transient(err) {
			return Payment{}, fmt.Errorf("%w: record payment: in transaction: %w", ErrUnavailable, err)
		}
		return Payment{}, fmt.Errorf("store: record payment: in transaction: %w", err)
	}
	// The caller's context may have ended while the insert or fn ran: the
	// lock's lease was lost, or the client went away.
	if cause := leaseCause(ctx); cause != nil {
		s.rollback(ctx, tx)
		return Payment{}, fmt.Errorf("%w: record payment: not committed: %w", ErrUnavailable, cause)
	}
	if err := s.commit(ctx, tx); err != nil {
		return Payment{}, err
	}
	return rec, nil
}

// insertPayment runs s.insert for p. It returns errConflict when
// payments_transaction_id_key already holds p's source and transaction id,
// whether the insert said so by returning no row or by raising a unique
// violation (at the statement or, in autocommit, at its commit); any other
// error is the driver's, untranslated.
func (s *Payments) insertPayment(ctx context.Context, q pgx.Tx, p Payment) (Payment, error) {
	return s.insertPaymentQ(ctx, q, p)
}

// insertPaymentQ is insertPayment on a pool connection or a transaction.
func (s *Payments) insertPaymentQ(ctx context.Context, q querier, p Payment) (Payment, error) {
	// json.RawMessage, not []byte: in the exec and simple_protocol modes
	// (behind PgBouncer) pgx types a parameter by its Go type, and would
	// send a []byte as bytea, which is no JSON.
	args := []any{p.Source, p.TransactionID, p.Amount, p.Currency, json.RawMessage(p.Payload), p.EventID}
	sql := s.insert
	if p.Account != "" {
		sql, args = insertPaymentAccountSQL, append(args, p.Account)
	}
	err := q.QueryRow(ctx, sql, args...).Scan(&p.ReceivedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Payment{}, errConflict
	case isTxIDConflict(err):
		return Payment{}, fmt.Errorf("%w: %w", errConflict, err)
	case err != nil:
		return Payment{}, err
	}
	return p, nil
}

// sentWithoutAnswer reports whether err leaves the outcome of a statement
// that commits (COMMIT, or one in autocommit) unknown: it may have been
// sent, and no ERROR came back for it. Errors raised before anything was
// sent, and those that are neither driver nor network errors (a value pgx
// cannot encode), are not.
func sentWithoutAnswer(err error) bool {
	if commitFailed(err) {
		return false
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) || transient(err)
}

// confirmConflict confirms that p's source and transaction id conflicted
// with a stored row. A conflict whose row cannot be found (the conflicting
// transaction rolled back, say) is ErrUnavailable: the sender must retry.
// A row of a payment known only by its events (RecordEvent) is p's to
// fill in: claim records p there, with fn.
func (s *Payments) confirmConflict(ctx context.Context, p Payment) (Payment, error) {
	return s.confirmConflictFunc(ctx, p, nil)
}

// confirmConflictFunc is confirmConflict, claiming a pending row with fn.
func (s *Payments) confirmConflictFunc(ctx context.Context, p Payment, fn func(context.Context, pgx.Tx, Payment) error) (Payment, error) {
	stored, err := s.Confirm(ctx, p)
	if errors.Is(err, errPending) {
		return s.claim(ctx, p, fn)
	}
	if errors.Is(err, ErrNotFound) {
		return Payment{}, fmt.Errorf("%w: transaction %q of source %q conflicted on %s but no stored row was found",
			ErrUnavailable, p.TransactionID, p.Source, txIDConstraint)
	}
	return stored, err
}

// Confirm reads the stored payment with p's source (DefaultSource when
// empty) and transaction id and compares it with p: an error wrapping
// ErrDuplicate when amount and currency match, ErrMismatch when they differ,
// ErrNotFound when nothing is stored (or only a payment's lifecycle events,
// its success not yet: RecordEvent), and ErrUnavailable for transient
// failures. The returned Payment (set with ErrDuplicate and ErrMismatch) has
// no Payload.
func (s *Payments) Confirm(ctx context.Context, p Payment) (Payment, error) {
	p = p.withSource()
	var stored Payment
	var pending bool
	err := s.pool.QueryRow(ctx, selectSummarySQL, p.Source, p.TransactionID).Scan(
		&stored.Source, &stored.TransactionID, &stored.Amount, &stored.Currency, &stored.EventID, &stored.ReceivedAt, &pending)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Payment{}, fmt.Errorf("%w: transaction %q of source %q", ErrNotFound, p.TransactionID, p.Source)
	case err != nil:
		return Payment{}, translate("confirm payment", err)
	case pending:
		return Payment{}, fmt.Errorf("%w: %w: transaction %q of source %q", ErrNotFound, errPending, p.TransactionID, p.Source)
	}
	// char(3) compares ignoring trailing blanks; so does this.
	if stored.Amount != p.Amount || stored.Currency != strings.TrimRight(p.Currency, " ") {
		return stored, fmt.Errorf("%w: transaction %q of source %q is stored as %d %s, received %d %s",
			ErrMismatch, p.TransactionID, p.Source, stored.Amount, stored.Currency, p.Amount, p.Currency)
	}
	return stored, fmt.Errorf("%w: transaction %q of source %q", ErrDuplicate, p.TransactionID, p.Source)
}

// Payment returns the stored payment with the source ("" means
// DefaultSource) and transaction id, or an error wrapping ErrNotFound.
// Transient failures wrap ErrUnavailable.
func (s *Payments) Payment(ctx context.Context, source, transactionID string) (Payment, error) {
	if source == "" {
		source = DefaultSource
	}
	var p Payment
	err := s.pool.QueryRow(ctx, selectPaymentSQL, source, transactionID).Scan(
		&p.Source, &p.TransactionID, &p.Amount, &p.Currency, &p.Payload, &p.EventID, &p.ReceivedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Payment{}, fmt.Errorf("%w: transaction %q of source %q", ErrNotFound, transactionID, source)
	}
	if err != nil {
		return Payment{}, translate("read payment", err)
	}
	return p, nil
}

// RecordPaymentForwarded records p as RecordPaymentFunc does and, for a
// newly recorded payment, inserts its forward to destination (a name:
// package forward's Destinations) in the same transaction
// (Outbox.EnqueueForwardTx), beside the jobs of its source's routes
// (Outbox.Route), if any. A destination of "" adds none: it is
// RecordPayment. The outcomes are RecordPaymentFunc's: a duplicate or a
// mismatch inserts no job, and a rolled-back record leaves none.
func (s *Payments) RecordPaymentForwarded(ctx context.Context, p Payment, destination string) (Payment, error) {
	if destination == "" {
		return s.RecordPayment(ctx, p)
	}
	return s.RecordPaymentFunc(ctx, p, s.outbox.ForwardRecordHook(destination))
}
