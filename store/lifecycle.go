package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/lifecycle"
)

// eventConstraint is the constraint whose violation means "this event is
// already recorded": UNIQUE (source, event_id) of payment_events.
const eventConstraint = "payment_events_event_key"

// PaymentEvent is one lifecycle event of a payment (a failure, a
// cancellation, a refund, a dispute's opening or outcome), recorded once
// per source and event id. The success itself is the payment row
// (RecordPayment).
type PaymentEvent struct {
	Source        string // "" is DefaultSource
	TransactionID string
	// EventID is the provider's event id, unique per source; required.
	EventID    string
	Kind       lifecycle.Kind
	Amount     int64
	Currency   string
	RefundID   string
	CaptureID  string
	Cumulative bool
	Stage      int       // a dispute event's stage (lifecycle.Event.Stage)
	Account    string    // the merchant account the event is of; "": none said
	At         time.Time // when the provider says it happened; zero: unknown
	Payload    []byte    // the event as received (JSON)
	ReceivedAt time.Time // set by the database
}

// lifecycleEvent is e as package lifecycle folds it.
func (e PaymentEvent) lifecycleEvent() lifecycle.Event {
	return lifecycle.Event{Kind: e.Kind, ID: e.EventID, Amount: e.Amount, Currency: e.Currency,
		RefundID: e.RefundID, CaptureID: e.CaptureID, Cumulative: e.Cumulative, Stage: e.Stage, Account: e.Account,
		At: e.At.UTC()}
}

// Change is a change of a payment's state that is forwarded: what a
// ChangeHook receives, in the transaction that makes it.
type Change struct {
	Source        string
	TransactionID string
	// EventID is the provider's event id that made the change (the
	// success's for payment.recorded).
	EventID string
	// Message is the type of the message it forwards (lifecycle.Message*).
	Message string
	// State and Version are the payment's after the change.
	State   lifecycle.State
	Version int
}

// PaymentState is a payment as its events left it.
type PaymentState struct {
	Source        string
	TransactionID string
	lifecycle.State
	Version int
	// Recorded says the payment's success is recorded (a payment row with
	// its amount); SuccessEventID and ReceivedAt are then the success's.
	Recorded       bool
	SuccessEventID string
	// Account is the merchant account the success names ("": none).
	Account    string
	ReceivedAt time.Time
	UpdatedAt  time.Time // zero when never changed since recorded
	// Events are its lifecycle events, oldest first by arrival (the
	// success is not among them).
	Events []PaymentEvent
}

// changeFn is a change hook (RecordEvent's fn).
type changeFn = func(context.Context, pgx.Tx, Change) error

// RecordEvent records e once and folds the payment's state again from all
// its events, in one transaction. It locks the payment's row, inserting a
// pending one when paylock knows no payment of e's source and transaction
// id (the event is applied when the payment arrives). When the state
// changes and the change is forwarded (the payment is not pending), its
// version grows by one, the change's forward jobs are inserted when e's
// source forwards (Outbox.Route), and then fn, when not nil, runs in the
// transaction with the change: what they write commits if and only if
// the event does.
//
// It returns the change (nil when the event changed nothing forwarded) and
// nil once the commit is confirmed; an error wrapping ErrDuplicate when the
// event is already recorded (nothing is changed or forwarded), ErrMismatch
// when its event id is recorded for another payment, kind, amount or
// refund (nothing is changed either); and the
// errors of RecordPaymentFunc for the rest (ErrUnavailable, ErrCommitUnknown,
// ErrInvalidPayload).
func (s *Payments) RecordEvent(ctx context.Context, e PaymentEvent, fn func(ctx context.Context, tx pgx.Tx, c Change) error) (*Change, error) {
	if e.Source == "" {
		e.Source = DefaultSource
	}
	fn = s.outbox.changeHook(e.Source, fn)
	if e.EventID == "" || e.TransactionID == "" || !e.Kind.Valid() || e.Kind == lifecycle.Succeeded {
		return nil, fmt.Errorf("%w: record event: want an event id, a transaction id and a lifecycle kind (got %q)",
			ErrInvalidPayload, e.Kind)
	}
	if cause := leaseCause(ctx); cause != nil {
		return nil, fmt.Errorf("%w: record event: not sent: %w", ErrUnavailable, cause)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, translate("record event: begin", err)
	}
	defer func() {
		if r := recover(); r != nil {
			s.rollback(ctx, tx)
			panic(r)
		}
	}()
	c, err := s.recordEventTx(ctx, tx, e, fn)
	if err == nil {
		if cause := leaseCause(ctx); cause != nil {
			err = fmt.Errorf("%w: record event: not committed: %w", ErrUnavailable, cause)
		}
	}
	if err != nil {
		s.rollback(ctx, tx)
		return nil, err
	}
	if err := s.commit(ctx, tx); err != nil {
		return nil, err
	}
	return c, nil
}

const insertPaymentEventSQL = `
INSERT INTO payment_events (source, transaction_id, event_id, kind, amount, currency, refund_id, cumulative, event_at, payload,
	capture_id, stage, account)
SELECT $1::text, $2::text, $3::text, $4::text, $5::bigint, NULLIF($6::text, ''), NULLIF($7::text, ''), $8::boolean, $9::timestamptz, $10::jsonb,
	NULLIF($11::text, ''), $12::smallint, NULLIF($13::text, '')
WHERE set_config('synchronous_commit', 'on', true) = 'on'
ON CONFLICT ON CONSTRAINT payment_events_event_key DO NOTHING
RETURNING id`

// insertPendingSQL makes sure the payment has a row to lock: a pending one
// (no amount) when none is stored. A success being recorded concurrently
// makes it wait, then do nothing.
const insertPendingSQL = `
INSERT INTO payments (source, transaction_id, status, version)
VALUES ($1, $2, 'pending', 0)
ON CONFLICT ON CONSTRAINT payments_transaction_id_key DO NOTHING`

// recordEventTx is RecordEvent's transaction, up to COMMIT.
func (s *Payments) recordEventTx(ctx context.Context, tx pgx.Tx, e PaymentEvent, fn func(context.Context, pgx.Tx, Change) error) (*Change, error) {
	var at *time.Time
	if !e.At.IsZero() {
		at = &e.At
	}
	payload := json.RawMessage(e.Payload)
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	var id int64
	err := tx.QueryRow(ctx, insertPaymentEventSQL, e.Source, e.TransactionID, e.EventID, string(e.Kind), e.Amount,
		e.Currency, e.RefundID, e.Cumulative, at, payload, e.CaptureID, e.Stage, e.Account).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, s.compareEvent(ctx, tx, e)
	case err != nil:
		return nil, translate("record event: insert", err)
	}
	tag, err := tx.Exec(ctx, insertPendingSQL, e.Source, e.TransactionID)
	if err != nil {
		return nil, translate("record event: pending payment", err)
	}
	if tag.RowsAffected() == 1 {
		// A payment known by this event alone: an orphan until its success
		// (or another outcome) arrives.
		if _, err := tx.Exec(ctx, `INSERT INTO payment_attention (source, transaction_id, reason) VALUES ($1, $2, 'orphan')
			ON CONFLICT DO NOTHING`, e.Source, e.TransactionID); err != nil {
			return nil, translate("record event: orphans", err)
		}
	}
	cur, err := s.lockState(ctx, tx, e.Source, e.TransactionID)
	if err != nil {
		return nil, err
	}
	events, err := s.foldEvents(ctx, tx, cur)
	if err != nil {
		return nil, err
	}
	return s.apply(ctx, tx, cur, events, e.lifecycleEvent(), fn)
}

// apply stores the step of recording ev on the payment cur (events are all
// its events, ev and the success included) and runs fn with the change it
// forwards, if any.
func (s *Payments) apply(ctx context.Context, tx pgx.Tx, cur PaymentState, events []lifecycle.Event, ev lifecycle.Event,
	fn func(context.Context, pgx.Tx, Change) error) (*Change, error) {
	// The stored state is the fold of the events before ev (every change
	// is made under the row's lock): fold them again rather than compare
	// with columns that keep only part of it.
	before := make([]lifecycle.Event, 0, len(events))
	for _, e := range events {
		if e.ID != ev.ID || e.Kind != ev.Kind {
			before = append(before, e)
		}
	}
	prev := lifecycle.Fold(before)
	step := lifecycle.Apply(prev, cur.Version, events, ev)
	if !step.Changed {
		return nil, nil
	}
	if err := s.storeState(ctx, tx, cur, step); err != nil {
		return nil, err
	}
	if step.Message == "" {
		return nil, nil
	}
	c := &Change{Source: cur.Source, TransactionID: cur.TransactionID, EventID: ev.ID, Message: step.Message,
		State: step.State.Money(), Version: step.Version}
	if fn != nil {
		if err := fn(ctx, tx, *c); err != nil {
			if transient(err) {
				return nil, fmt.Errorf("%w: record event: in transaction: %w", ErrUnavailable, err)
			}
			return nil, fmt.Errorf("store: record event: in transaction: %w", err)
		}
	}
	return c, nil
}

const updateStateSQL = `
UPDATE payments SET status = $3, amount_refunded = $4, over_refunded = $5, dispute = NULLIF($6, ''), version = $7, updated_at = now(),
	amount_authorized = $8, amount_captured = $9
WHERE source = $1 AND transaction_id = $2`

// insertAttentionSQL puts a payment up for review for reason $3, with a
// detail naming what disagreed; a reason already up keeps its detail.
const insertAttentionSQL = `INSERT INTO payment_attention (source, transaction_id, reason, detail)
VALUES ($1, $2, $3, NULLIF($4, '')) ON CONFLICT DO NOTHING`

// storeState writes step's state and version to the payment's row, takes
// it off the orphans once it is no longer pending, and puts it up for
// review when its refunds exceed its amount.
func (s *Payments) storeState(ctx context.Context, tx pgx.Tx, cur PaymentState, step lifecycle.Step) error {
	st := step.State
	if _, err := tx.Exec(ctx, updateStateSQL, cur.Source, cur.TransactionID, string(st.Status), st.AmountRefunded,
		st.OverRefunded, string(st.Dispute), step.Version, st.AmountAuthorized, st.AmountCaptured); err != nil {
		return translate("record event: update payment", err)
	}
	if st.OverRefunded {
		if _, err := tx.Exec(ctx, insertAttentionSQL, cur.Source, cur.TransactionID, "over_refunded",
			fmt.Sprintf("refunds exceed the captured amount %d %s: refunded capped", st.AmountCaptured, st.Currency)); err != nil {
			return translate("record event: over-refunded", err)
		}
	}
	for _, r := range reviewReasons(st) {
		if _, err := tx.Exec(ctx, insertAttentionSQL, cur.Source, cur.TransactionID, r.name, r.detail); err != nil {
			return translate("record event: review", err)
		}
	}
	if st.Status == lifecycle.Pending {
		return nil
	}
	_, err := tx.Exec(ctx, `DELETE FROM payment_attention WHERE source = $1 AND transaction_id = $2 AND reason = 'orphan'`,
		cur.Source, cur.TransactionID)
	return translate("record event: orphans", err)
}

// stateColumns read a payment's state. A NULL amount_authorized or
// amount_captured (a row recorded before they were kept, or first
// recorded by its success) is the success's amount: authorised and
// captured at once.
const stateColumns = `source, transaction_id, amount IS NOT NULL, coalesce(amount, 0), coalesce(currency::text, ''),
	coalesce(event_id, ''), status, amount_refunded, over_refunded, coalesce(dispute, ''), version, received_at,
	coalesce(updated_at, '0001-01-01'::timestamptz), coalesce(amount_authorized, amount, 0),
	coalesce(amount_captured, CASE WHEN status IN ('succeeded', 'partially_refunded', 'refunded') THEN amount END, 0),
	coalesce(account, '')`

// scanState reads a row of stateColumns.
func scanState(row pgx.Row) (PaymentState, error) {
	var p PaymentState
	var status, dispute string
	err := row.Scan(&p.Source, &p.TransactionID, &p.Recorded, &p.Amount, &p.Currency, &p.SuccessEventID,
		&status, &p.AmountRefunded, &p.OverRefunded, &dispute, &p.Version, &p.ReceivedAt, &p.UpdatedAt,
		&p.AmountAuthorized, &p.AmountCaptured, &p.Account)
	p.Status, p.Dispute = lifecycle.Status(status), lifecycle.Dispute(dispute)
	if p.UpdatedAt.Year() == 1 {
		p.UpdatedAt = time.Time{}
	}
	return p, err
}

// lockState reads the payment's row FOR UPDATE.
func (s *Payments) lockState(ctx context.Context, tx pgx.Tx, source, txID string) (PaymentState, error) {
	p, err := scanState(tx.QueryRow(ctx, `SELECT `+stateColumns+` FROM payments
		WHERE source = $1 AND transaction_id = $2 FOR UPDATE`, source, txID))
	if err != nil {
		return p, translate("record event: lock payment", err)
	}
	if !p.Recorded {
		// The stored amount of a pending payment is the fold's: read it
		// with the events.
		p.Amount, p.Currency = 0, ""
	}
	return p, nil
}

const selectEventsSQL = `
SELECT event_id, kind, amount, coalesce(currency, ''), coalesce(refund_id, ''), cumulative,
	coalesce(event_at, '0001-01-01'::timestamptz), payload, received_at, coalesce(capture_id, ''), stage,
	coalesce(account, '')
FROM payment_events WHERE source = $1 AND transaction_id = $2 ORDER BY id`

// events reads the lifecycle events of a payment, oldest first.
func (s *Payments) events(ctx context.Context, q pgx.Tx, source, txID string) ([]PaymentEvent, error) {
	var rows pgx.Rows
	var err error
	if q != nil {
		rows, err = q.Query(ctx, selectEventsSQL, source, txID)
	} else {
		rows, err = s.pool.Query(ctx, selectEventsSQL, source, txID)
	}
	if err != nil {
		return nil, translate("read events", err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PaymentEvent, error) {
		e := PaymentEvent{Source: source, TransactionID: txID}
		var kind string
		err := r.Scan(&e.EventID, &kind, &e.Amount, &e.Currency, &e.RefundID, &e.Cumulative, &e.At, &e.Payload, &e.ReceivedAt,
			&e.CaptureID, &e.Stage, &e.Account)
		e.Kind = lifecycle.Kind(kind)
		if e.At.Year() == 1 {
			e.At = time.Time{}
		}
		return e, err
	})
	if err != nil {
		return nil, translate("read events", err)
	}
	return evs, nil
}

// foldEvents is what the payment cur's state folds from: its events, and
// its success when recorded.
func (s *Payments) foldEvents(ctx context.Context, tx pgx.Tx, cur PaymentState) ([]lifecycle.Event, error) {
	stored, err := s.events(ctx, tx, cur.Source, cur.TransactionID)
	if err != nil {
		return nil, err
	}
	out := make([]lifecycle.Event, 0, len(stored)+1)
	for _, e := range stored {
		out = append(out, e.lifecycleEvent())
	}
	if cur.Recorded {
		out = append(out, successEvent(cur.SuccessEventID, cur.Amount, cur.Currency, cur.Account))
	}
	return out, nil
}

// successEvent is a recorded success as package lifecycle folds it.
func successEvent(eventID string, amount int64, currency, account string) lifecycle.Event {
	if eventID == "" {
		eventID = "(payment)"
	}
	return lifecycle.Event{Kind: lifecycle.Succeeded, ID: eventID, Amount: amount, Currency: currency, Account: account}
}

// PaymentState returns the payment of source ("" is DefaultSource) and
// transaction id with its state and its events: an error wrapping
// ErrNotFound when paylock knows nothing of it, ErrUnavailable for
// transient failures.
func (s *Payments) PaymentState(ctx context.Context, source, transactionID string) (PaymentState, error) {
	if source == "" {
		source = DefaultSource
	}
	p, err := scanState(s.pool.QueryRow(ctx, `SELECT `+stateColumns+` FROM payments
		WHERE source = $1 AND transaction_id = $2`, source, transactionID))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return p, fmt.Errorf("%w: transaction %q of source %q", ErrNotFound, transactionID, source)
	case err != nil:
		return p, translate("read payment state", err)
	}
	if p.Events, err = s.events(ctx, nil, source, transactionID); err != nil {
		return p, err
	}
	if !p.Recorded {
		// Amount and currency of a payment without its success are the
		// fold's (a failure's amount, say).
		evs := make([]lifecycle.Event, len(p.Events))
		for i, e := range p.Events {
			evs[i] = e.lifecycleEvent()
		}
		f := lifecycle.Fold(evs)
		p.Amount, p.Currency, p.AmountAuthorized, p.AmountCaptured = f.Amount, f.Currency, f.AmountAuthorized, f.AmountCaptured
	}
	return p, nil
}

// errPending is how Confirm says, inside the store, that the payment's row
// holds only its lifecycle events: its success is not recorded yet.
var errPending = errors.New("store: payment known only by its lifecycle events")

// claimPaymentSQL records a success on the row of a payment known only by
// its events (amount NULL), locking it; it returns no row when another
// delivery filled it in first.
const claimPaymentSQL = `
UPDATE payments SET amount = $3, currency = $4, payload = $5::jsonb, event_id = NULLIF($6::text, ''), received_at = now(),
	account = NULLIF($7::text, '')
WHERE source = $1 AND transaction_id = $2 AND amount IS NULL
  AND set_config('synchronous_commit', 'on', true) = 'on'
RETURNING received_at`

// claim records p's success on the row its earlier events made, in one
// transaction: the success is folded with them (the payment's version
// grows, its status becomes the success's, refunds and disputes that
// arrived first applied), p as recorded carries the change
// (Payment.Lifecycle), and fn runs as for a new payment. Its outcomes are
// RecordPaymentFunc's.
func (s *Payments) claim(ctx context.Context, p Payment, fn func(context.Context, pgx.Tx, Payment) error) (Payment, error) {
	rec, err := s.inTx(ctx, p, s.claimRow, fn)
	if errors.Is(err, errConflict) {
		// Filled in by another delivery meanwhile: the stored row decides.
		stored, err := s.Confirm(ctx, p)
		if errors.Is(err, ErrNotFound) {
			return Payment{}, fmt.Errorf("%w: transaction %q of source %q: %w", ErrUnavailable, p.TransactionID, p.Source, err)
		}
		return stored, err
	}
	return rec, err
}

// claimRow is claim's write, in tx.
func (s *Payments) claimRow(ctx context.Context, tx pgx.Tx, p Payment) (Payment, error) {
	err := tx.QueryRow(ctx, claimPaymentSQL, p.Source, p.TransactionID, p.Amount, p.Currency,
		json.RawMessage(p.Payload), p.EventID, p.Account).Scan(&p.ReceivedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Payment{}, errConflict
	case err != nil:
		return Payment{}, err
	}
	cur, err := s.lockState(ctx, tx, p.Source, p.TransactionID)
	if err != nil {
		return Payment{}, err
	}
	events, err := s.foldEvents(ctx, tx, cur)
	if err != nil {
		return Payment{}, err
	}
	c, err := s.apply(ctx, tx, cur, events, successEvent(p.EventID, p.Amount, p.Currency, p.Account), nil)
	if err != nil {
		return Payment{}, err
	}
	p.Lifecycle = c
	return p, nil
}

// EventRecorded reports whether e (its source, "" is DefaultSource, and
// event id) is recorded: an error wrapping ErrDuplicate when it is as e
// says, ErrMismatch when the event id is recorded for another payment,
// kind, amount or refund, ErrNotFound when it is not recorded,
// ErrUnavailable for transient failures.
func (s *Payments) EventRecorded(ctx context.Context, e PaymentEvent) error {
	if e.Source == "" {
		e.Source = DefaultSource
	}
	return s.compareEvent(ctx, s.pool, e)
}

// compareEvent compares e with the event stored under its source and
// event id: ErrDuplicate, ErrMismatch or ErrNotFound, as EventRecorded. A
// mismatch's error names what disagreed (MismatchDetail).
func (s *Payments) compareEvent(ctx context.Context, q querier, e PaymentEvent) error {
	var stored PaymentEvent
	var kind string
	err := q.QueryRow(ctx, `SELECT transaction_id, kind, amount, coalesce(currency, ''), coalesce(refund_id, ''),
		coalesce(capture_id, '') FROM payment_events WHERE source = $1 AND event_id = $2`, e.Source, e.EventID).Scan(
		&stored.TransactionID, &kind, &stored.Amount, &stored.Currency, &stored.RefundID, &stored.CaptureID)
	stored.Kind = lifecycle.Kind(kind)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: event %q of source %q", ErrNotFound, e.EventID, e.Source)
	case err != nil:
		return translate("read event", err)
	}
	if d := eventDifference(stored, e); d != "" {
		return fmt.Errorf("%w: event %q of source %q: %w", ErrMismatch, e.EventID, e.Source, &mismatchDetail{d})
	}
	return fmt.Errorf("%w: event %q of source %q", ErrDuplicate, e.EventID, e.Source)
}

// eventDifference names what differs between the stored event and a
// redelivery of its event id ("" when nothing does).
func eventDifference(stored, e PaymentEvent) string {
	var diffs []string
	differ := func(what, was, now string) {
		if was != now {
			diffs = append(diffs, fmt.Sprintf("%s recorded %q, delivered %q", what, was, now))
		}
	}
	differ("payment", stored.TransactionID, e.TransactionID)
	differ("type", string(stored.Kind), string(e.Kind))
	differ("amount", strconv.FormatInt(stored.Amount, 10), strconv.FormatInt(e.Amount, 10))
	differ("currency", stored.Currency, e.Currency)
	differ("refund", stored.RefundID, e.RefundID)
	differ("capture", stored.CaptureID, e.CaptureID)
	return strings.Join(diffs, "; ")
}

// mismatchDetail says what disagreed in a mismatch.
type mismatchDetail struct{ detail string }

func (m *mismatchDetail) Error() string { return m.detail }

// MismatchDetail is what err, an ErrMismatch of a lifecycle event, says
// disagreed ("type recorded \"refund\", delivered \"refund_failed\""); ""
// when it says nothing.
func MismatchDetail(err error) string {
	var m *mismatchDetail
	if errors.As(err, &m) {
		return m.detail
	}
	return ""
}

// review is a reason a payment needs review, as payment_attention files it.
type review struct{ name, detail string }

// reviewReasons are the reasons st is up for review (its fold's, beside
// over_refunded), each with a detail naming what disagreed.
func reviewReasons(st lifecycle.State) []review {
	details := map[lifecycle.Review]string{
		lifecycle.ReviewCurrency: fmt.Sprintf("an event in another currency than the payment's %s was recorded and not applied", st.Currency),
		lifecycle.ReviewAccount:  "an event of another merchant account than the payment's was recorded and not applied",
		lifecycle.ReviewOverCaptured: fmt.Sprintf("captures exceed the authorised %d %s: captured capped",
			st.AmountAuthorized, st.Currency),
		lifecycle.ReviewVoidAfterCapture: fmt.Sprintf("a void arrived after %d %s was captured and changed nothing",
			st.AmountCaptured, st.Currency),
		lifecycle.ReviewOverflow: fmt.Sprintf("an amount or a sum reached %d minor units and was held there", lifecycle.MaxAmount),
	}
	var out []review
	for r, d := range details {
		if st.Review&r != 0 {
			out = append(out, review{name: r.Names()[0], detail: d})
		}
	}
	slices.SortFunc(out, func(a, b review) int { return strings.Compare(a.name, b.name) })
	return out
}
