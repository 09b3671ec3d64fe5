package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Outbox is the forward jobs (ForwardArgs), River's transactional outbox
// of recorded payments and disbursement status changes: inserted in the
// transaction that makes their event (a source's routes, Route, which
// Payments applies itself; EnqueueForwardTx, ForwardRecordHook,
// ForwardStatusHook),
// listed and put back (ForwardJobs, RetryForward, RetryGivenUpForwards),
// read for one payment (PaymentForwards) and sent again (ReplayForwards).
// Get it from Store.Outbox; it is safe for concurrent use.
type Outbox struct {
	*base
	// mu serializes Route; routes is its map by source, replaced whole
	// on every Route, so that a record reads it with one atomic load.
	mu     sync.Mutex
	routes atomic.Pointer[map[string]ForwardRouter]
	// render is Render's renderer, nil when none.
	render atomic.Pointer[MessageRenderer]
	// taker is TakeExpress's, nil when none.
	taker atomic.Pointer[expressTaker]
}

// The forward job: the transactional outbox of recorded payments and
// disbursement status changes. River schedules, retries and discards it;
// package forward works it.
const (
	// ForwardKind is the River job kind of ForwardArgs.
	ForwardKind = "forward"
	// ForwardQueue is the River queue forward jobs go to.
	ForwardQueue = "forward"
	// DefaultForwardMaxAttempts is a forward job's attempts when
	// Config.ForwardMaxAttempts is 0 (River's own default).
	DefaultForwardMaxAttempts = 25

	// ForwardPaymentRecorded is the type of a recorded payment's forward.
	ForwardPaymentRecorded = "payment.recorded"
	// ForwardDisbursementPrefix prefixes a disbursement status change's
	// type: "disbursement.sent", "disbursement.paid", "disbursement.failed".
	ForwardDisbursementPrefix = "disbursement."
	// ForwardOrderPrefix prefixes an order's change of state's type:
	// "order.paid", "order.double_paid", ... (order.Messages).
	ForwardOrderPrefix = "order."
)

// ForwardArgs is the River job that forwards one event to one destination,
// inserted in the transaction that makes the event (EnqueueForwardTx, the
// ForwardStatusHook), so that it exists if and only if the event committed.
// It is unique by ID, the webhook-id of every attempt, in every state but
// cancelled and discarded: a second insert for the same event is skipped.
//
// What it carries differs by type, on purpose:
//
//   - payment.recorded names the payment (Source, TransactionID) and the
//     worker reads the row when it runs. A payment row never changes once
//     recorded, so every attempt sends the same body, and the payload (up
//     to PAYLOCK_MAX_BODY) is not copied into the job table.
//   - disbursement.<status> carries the disbursement as it stood in the
//     transaction that changed its status (Disbursement): the row moves on
//     (sent, then paid), and the forward must say what changed then.
//
// Destination names where it goes (package forward resolves the name to a
// sink when the job runs): no URL, and so no credential, is written into
// the job table or shown with the job. A job inserted before destinations
// were named carries URL instead, and is still sent there.
type ForwardArgs struct {
	// ID is the webhook-id of every attempt: PaymentForwardID or
	// DisbursementForwardID. It is the job's unique key.
	ID   string `json:"id" river:"unique"`
	Type string `json:"type"`
	// Destination is part of the unique key too: one message has one job
	// per destination (ForwardRouter), each with its own attempts.
	Destination string `json:"destination,omitempty" river:"unique"`
	// Fingerprint is the destination's definition as the inserting
	// process knew it (package forward's Router.Fingerprint: a hash, no
	// secret): a worker whose definition differs leaves the job to one
	// that agrees. "" in a job of an older paylock: any worker sends it.
	Fingerprint string `json:"fingerprint,omitempty"`
	// URL is an older job's destination URL; new jobs leave it empty.
	URL           string                 `json:"url,omitempty"`
	Source        string                 `json:"source,omitempty"`
	TransactionID string                 `json:"transaction_id,omitempty"`
	Disbursement  *ForwardedDisbursement `json:"disbursement,omitempty"`
	// State is the payment's state after the change a lifecycle message
	// (payment.failed, .refunded, ...) says, and after a payment.recorded
	// folded with events that arrived before it; nil for a payment.recorded
	// of a payment recorded first (succeeded, version 1).
	State *ForwardedState `json:"state,omitempty"`
	// Order is an order.* message's order as the change left it
	// (Orders.DeriveOrders).
	Order *ForwardedOrder `json:"order,omitempty"`
	// Operator is an operator event's subject (destination.parked,
	// message.exhausted...: package forward's breaker).
	Operator *ForwardedOperatorEvent `json:"operator,omitempty"`
	// Payment is a payment.recorded message's payment as its recording
	// transaction wrote it (its received_at written into the express
	// lane's row by the recording statement itself when the row was made
	// before: payments_lane.go), so that the worker sends it without reading
	// it again; nil in a job of an older paylock, of a replay, or of a
	// payment whose payload is over CarriedPayloadMax: the worker then
	// reads the payment.
	Payment *ForwardedPayment `json:"payment,omitempty"`
}

// CarriedPayloadMax is the largest payload a payment.recorded job carries
// (ForwardArgs.Payment): a larger one is read from the payments table when
// the job is sent, rather than written twice.
const CarriedPayloadMax = 64 << 10

// ForwardedPayment is a recorded payment as its payment.recorded job
// carries it: what the message says of it besides its source and
// transaction id (the job's own). Its payload, stored as jsonb in River's
// job as in the payments table, reads back the same way.
type ForwardedPayment struct {
	Amount     int64           `json:"amount"`
	Currency   string          `json:"currency"`
	EventID    string          `json:"event_id,omitempty"`
	Account    string          `json:"account,omitempty"`
	ReceivedAt time.Time       `json:"received_at"`
	Payload    json.RawMessage `json:"payload"`
}

// carriedPayment is p as its job carries it, or nil when its payload is
// too large to carry (or not JSON, which a recorded payment's never is)
// or the database has not set its received_at.
func carriedPayment(p Payment) *ForwardedPayment {
	if p.ReceivedAt.IsZero() {
		return nil
	}
	return carriedPayload(p)
}

// carriedPayload is carriedPayment without the check of ReceivedAt: for a
// payment not yet recorded, whose job's row is inserted by the statement
// that records it (prerouteRecorded), and which takes the time the row
// was made, the same instant, when it is claimed (ClaimExpress).
func carriedPayload(p Payment) *ForwardedPayment {
	if len(p.Payload) > CarriedPayloadMax || !json.Valid(p.Payload) {
		return nil
	}
	return &ForwardedPayment{Amount: p.Amount, Currency: p.Currency, EventID: p.EventID, Account: p.Account,
		ReceivedAt: p.ReceivedAt, Payload: json.RawMessage(p.Payload)}
}

// CarriedPayment returns the payment a payment.recorded job carries
// (ForwardArgs.Payment), and false when it carries none.
func (a ForwardArgs) CarriedPayment() (Payment, bool) {
	c := a.Payment
	if c == nil || a.Type != ForwardPaymentRecorded {
		return Payment{}, false
	}
	return Payment{Source: a.Source, TransactionID: a.TransactionID, Amount: c.Amount, Currency: c.Currency,
		Payload: []byte(c.Payload), EventID: c.EventID, Account: c.Account, ReceivedAt: c.ReceivedAt}, true
}

// ForwardedOperatorEvent is what an operator event says, as its job
// carries it: a destination's move (destination.failing, .parked,
// .recovered), or a message given up (message.exhausted). Never a URL,
// a payload or a secret.
type ForwardedOperatorEvent struct {
	Destination string    `json:"destination"`
	State       string    `json:"state,omitempty"`
	Since       time.Time `json:"since,omitzero"`
	Failures    int       `json:"failures,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	// message.exhausted: the job given up and the message it carried.
	JobID         int64  `json:"job_id,omitempty"`
	MessageID     string `json:"message_id,omitempty"`
	MessageType   string `json:"message_type,omitempty"`
	Attempts      int    `json:"attempts,omitempty"`
	Source        string `json:"source,omitempty"`
	TransactionID string `json:"transaction_id,omitempty"`
}

// ForwardedState is a payment's state as a change left it, as a forward
// job carries it.
type ForwardedState struct {
	Status         string `json:"status"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	AmountRefunded int64  `json:"amount_refunded"`
	// AmountAuthorized and AmountCaptured are nil in a job inserted before
	// they were kept: the message then says the payment's amount for a
	// payment that succeeded (Captured).
	AmountAuthorized *int64 `json:"amount_authorized,omitempty"`
	AmountCaptured   *int64 `json:"amount_captured,omitempty"`
	Dispute          string `json:"dispute,omitempty"`
	Version          int    `json:"version"`
	// EventID is the provider's event that made the change.
	EventID string `json:"event_id"`
}

// forwardedState is c's state as a forward job carries it.
func forwardedState(c *Change) *ForwardedState {
	if c == nil {
		return nil
	}
	authorized, captured := c.State.AmountAuthorized, c.State.AmountCaptured
	return &ForwardedState{Status: string(c.State.Status), Amount: c.State.Amount, Currency: c.State.Currency,
		AmountRefunded: c.State.AmountRefunded, AmountAuthorized: &authorized, AmountCaptured: &captured,
		Dispute: string(c.State.Dispute), Version: c.Version, EventID: c.EventID}
}

// Authorized is the amount authorised the state says: for a job inserted
// before it was kept, the payment's amount unless it never succeeded.
func (st ForwardedState) Authorized() int64 {
	if st.AmountAuthorized != nil {
		return *st.AmountAuthorized
	}
	if st.Status == "failed" || st.Status == "pending" || st.Status == "canceled" {
		return 0
	}
	return st.Amount
}

// Captured is the amount captured the state says: for a job inserted
// before it was kept, the payment's amount once it succeeded.
func (st ForwardedState) Captured() int64 {
	if st.AmountCaptured != nil {
		return *st.AmountCaptured
	}
	switch st.Status {
	case "succeeded", "partially_refunded", "refunded":
		return st.Amount
	}
	return 0
}

// Kind is ForwardKind.
func (ForwardArgs) Kind() string { return ForwardKind }

// Target names where the job forwards to, fit to print: its Destination,
// or for an older job its URL's scheme, host and path (no credentials, no
// query).
func (a ForwardArgs) Target() string {
	if a.Destination != "" || a.URL == "" {
		return a.Destination
	}
	u, err := url.Parse(a.URL)
	if err != nil {
		return "(unparseable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// InsertOpts puts the job on ForwardQueue, unique by its ID. Its
// MaxAttempts is the store's Config.ForwardMaxAttempts, given at insert.
func (ForwardArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       ForwardQueue,
		MaxAttempts: DefaultForwardMaxAttempts,
		UniqueOpts:  river.UniqueOpts{ByArgs: true},
	}
}

// ForwardedDisbursement is a disbursement as a status change left it, as a
// forward job carries it.
type ForwardedDisbursement struct {
	ID             int64              `json:"id"`
	LoanID         string             `json:"loan_id"`
	Tranche        int                `json:"tranche"`
	Amount         int64              `json:"amount"`
	Currency       string             `json:"currency"`
	Status         DisbursementStatus `json:"status"`
	PreviousStatus DisbursementStatus `json:"previous_status"`
	ProviderRef    string             `json:"provider_ref,omitempty"`
	IdempotencyKey string             `json:"idempotency_key"`
	EventID        string             `json:"event_id"`
	LastError      string             `json:"last_error,omitempty"`
	StatusSince    time.Time          `json:"status_since"`
}

// PaymentForwardID is the webhook-id of a payment's forward: "pay_" and the
// first 32 hex digits of SHA-256(source + "\n" + transaction_id) (source ""
// is DefaultSource). A source name holds no newline, so no two payments
// share the input. It is the same on every attempt, and a receiver can
// compute it from the payment alone.
func PaymentForwardID(source, transactionID string) string {
	if source == "" {
		source = DefaultSource
	}
	return "pay_" + hash32(source+"\n"+transactionID)
}

// EventForwardID is the webhook-id of the forward of a payment's change of
// state made by a provider event (payment.failed, .refunded, ...): "pev_"
// and the first 32 hex digits of SHA-256(source + "\n" + event_id). The
// same on every attempt and every replica: an event is recorded once per
// source and event id, and forwards at most one change.
func EventForwardID(source, eventID string) string {
	if source == "" {
		source = DefaultSource
	}
	return "pev_" + hash32(source+"\n"+eventID)
}

// OperatorEventID is the webhook-id of an operator event: "opv_" and the
// first 32 hex digits of SHA-256(key), key naming the event (its type,
// destination and the move's generation, or the job and attempt given up).
func OperatorEventID(key string) string { return "opv_" + hash32(key) }

// EnqueueForward inserts args's job, with maxAttempts attempts (0: the
// store's), in a transaction of its own: an event that no other write
// makes (an operator event). A second insert of the same webhook-id and
// destination is skipped.
func (s *Outbox) EnqueueForward(ctx context.Context, args ForwardArgs, maxAttempts int) error {
	if args.ID == "" || args.Type == "" || args.Destination == "" {
		return fmt.Errorf("%w: a forward needs an id, a type and a destination", ErrForward)
	}
	if maxAttempts <= 0 {
		maxAttempts = s.cfg.ForwardMaxAttempts
	}
	// Always a River job, unique by webhook-id and destination: an
	// operator event may be enqueued by more than one replica.
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.insertRiverForward(ctx, tx, args, maxAttempts) })
	if err != nil {
		return translate("enqueue forward", err)
	}
	return nil
}

// DisbursementForwardID is the webhook-id of a disbursement status change's
// forward: "dsb_" and the first 32 hex digits of SHA-256(loan_id + "\n" +
// tranche + "\n" + status). Tranche and status hold no newline, so the input
// splits one way only.
func DisbursementForwardID(loanID string, tranche int, status DisbursementStatus) string {
	return "dsb_" + hash32(loanID+"\n"+strconv.Itoa(tranche)+"\n"+string(status))
}

func hash32(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// ForwardTarget is one destination a message is enqueued for.
type ForwardTarget struct {
	Destination string
	Fingerprint string // ForwardArgs.Fingerprint; "": none
	MaxAttempts int    // the job's attempts; 0: Config.ForwardMaxAttempts
}

// ForwardRouter picks the destinations of one message, whose job
// arguments are a (Destination not yet set) in the transaction that makes
// it; p is the payment of a payment.recorded message, nil for any other.
// A payment.recorded message whose rows all go to the express lane is
// routed just before its payment is recorded, so that the statement that
// records it inserts them too: p's ReceivedAt is then zero, and a router
// that needs it answers ErrRouteAfterRecord.
// No target: the message is forwarded nowhere. Package forward's
// Router.Route makes one from the destinations' types and filters.
type ForwardRouter func(ctx context.Context, a ForwardArgs, p *Payment) ([]ForwardTarget, error)

// ToDestination is the ForwardRouter of every message to destination,
// with the store's max attempts and no fingerprint; "" routes nowhere.
func ToDestination(destination string) ForwardRouter {
	return func(context.Context, ForwardArgs, *Payment) ([]ForwardTarget, error) {
		if destination == "" {
			return nil, nil
		}
		return []ForwardTarget{{Destination: destination}}, nil
	}
}

// Forward names a recorded payment to forward and where to.
type Forward struct {
	Source        string // "" is DefaultSource
	TransactionID string
	Destination   string // the destination's name: the source's own, or "default" (package forward)
	// Lifecycle is the payment's change of state when its success was
	// folded with earlier events (Payment.Lifecycle); nil: none.
	Lifecycle *Change
	// Payment, when set, is the payment as recorded, which the job then
	// carries (ForwardArgs.Payment).
	Payment *Payment
}

// ErrForward means a forward could not be enqueued as asked (no
// destination, no transaction id): a programming or configuration error,
// not a transient one.
var ErrForward = errors.New("store: invalid forward")

// ErrRouteAfterRecord is a ForwardRouter's answer for a payment.recorded
// message that it routes only once its payment is recorded: p's ReceivedAt
// is then zero, and the router's filters read it. The store then routes
// the message in the recording transaction, with p as recorded.
var ErrRouteAfterRecord = errors.New("store: the route needs the payment as recorded")

// EnqueueForwardTx inserts the payment.recorded forward job of f's payment
// in tx, the transaction that records it (Payments.RecordPaymentFunc's
// fn): the job commits with the payment or not at all. A job already held
// for the payment (same webhook-id) is left as it is and nothing is
// inserted.
// Errors wrap ErrForward for a bad f, ErrUnavailable when the database
// failed transiently.
func (s *Outbox) EnqueueForwardTx(ctx context.Context, tx pgx.Tx, f Forward) error {
	if f.Destination == "" || f.TransactionID == "" {
		return fmt.Errorf("%w: a forward needs a destination and a transaction id", ErrForward)
	}
	if f.Source == "" {
		f.Source = DefaultSource
	}
	args := ForwardArgs{
		ID:            PaymentForwardID(f.Source, f.TransactionID),
		Type:          ForwardPaymentRecorded,
		Destination:   f.Destination,
		Source:        f.Source,
		TransactionID: f.TransactionID,
		State:         forwardedState(f.Lifecycle),
	}
	if f.Payment != nil {
		args.Payment = carriedPayment(*f.Payment)
	}
	return s.insertForward(ctx, tx, args)
}

// ForwardRecordHook returns the hook of a payment's recording transaction
// (RecordPaymentFunc's fn, as RecordPaymentForwarded uses it) that inserts
// the payment's payment.recorded forward job to destination
// (EnqueueForwardTx): the job exists if and only if the payment does, and
// a duplicate, which records nothing, inserts none. A destination of ""
// returns nil: nothing is forwarded. A source that forwards by its routes
// needs no hook: see Route.
func (s *Outbox) ForwardRecordHook(destination string) func(ctx context.Context, tx pgx.Tx, p Payment) error {
	if destination == "" {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, p Payment) error {
		return s.EnqueueForwardTx(ctx, tx, Forward{Source: p.Source, TransactionID: p.TransactionID, Destination: destination,
			Lifecycle: p.Lifecycle, Payment: &p})
	}
}

// Route makes source ("" is DefaultSource) forward what it records to the
// destinations route picks for each message, one job per target with its
// own attempts: from then on, every newly recorded payment of source
// (Payments.RecordPayment, RecordPaymentFunc and RecordPaymentForwarded,
// alone or in a batch, and a success that fills in a payment its events
// announced) inserts its payment.recorded jobs, and every lifecycle event
// of source that changes its payment's state (Payments.RecordEvent) its
// change's jobs, in the recording transaction and before the caller's fn:
// they commit if and only if the record does, and a duplicate inserts
// none. A forward that cannot be enqueued rolls the record back (an error
// wrapping ErrUnavailable: the sender retries). A nil route forwards
// nothing of source: its payments without a fn are recorded by the
// one-statement path again.
//
// Set a store's routes once, before it records (paylock serve sets them
// from the sources file's forward_to); Route is safe to call while
// payments are recorded, each of which then sees the routes before or
// after it.
func (s *Outbox) Route(source string, route ForwardRouter) {
	if source == "" {
		source = DefaultSource
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[string]ForwardRouter{}
	if cur := s.routes.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	if route == nil {
		delete(next, source)
	} else {
		next[source] = route
	}
	s.routes.Store(&next)
}

// MessageRenderer renders the body of a's message, a payment.recorded
// of p, as the process that sends it would (package forward's
// RecordedBody): the JSON it sends, byte for byte.
type MessageRenderer func(a ForwardArgs, p Payment) ([]byte, error)

// Render makes the express lane's rows of payment.recorded messages that
// the recording statement inserts (payments_lane.go) carry their body,
// rendered by r once for all of a payment's destinations, the
// received_at the statement records written in: the drainer then sends
// the body as it is, rather than decode the payment its args would carry
// and encode the message again. nil renders none. Set it once, with the
// routes (paylock serve does); a process that sends another body for the
// same payment (another configuration of its sources) would send what
// the recording process rendered.
func (s *Outbox) Render(r MessageRenderer) {
	if r == nil {
		s.render.Store(nil)
		return
	}
	s.render.Store(&r)
}

// expressTaker is a TakeExpress.
type expressTaker struct {
	lease time.Duration
	take  func([]ExpressMessage)
}

// TakeExpress makes the express lane's rows that this store's recording
// statements insert (a payment.recorded message the lane takes for every
// destination: payments_lane.go) claimed at birth, for lease, and gives
// them to take once their statement answered (committed): as ClaimExpress
// would, without the claim's statement. take must not block (a recording
// waits for it); what it takes it sends, hands over or gives back, as a
// claimed message. Rows whose statement's answer was lost stay claimed
// until the lease runs out, then any drainer claims them. Package
// forward's drainer takes them while it runs; nil take (or a lease not
// above zero) stops: rows wait for a claim again.
func (s *Outbox) TakeExpress(lease time.Duration, take func([]ExpressMessage)) {
	if take == nil || lease <= 0 {
		s.taker.Store(nil)
		return
	}
	s.taker.Store(&expressTaker{lease: lease, take: take})
}

// routeOf is source's route (Route), nil when it forwards nothing.
func (s *Outbox) routeOf(source string) ForwardRouter {
	m := s.routes.Load()
	if m == nil {
		return nil
	}
	return (*m)[source]
}

// recordHook is the hook of a recording transaction of a payment of
// source: the source's forward jobs (Route), then fn. It is fn itself
// when source forwards nothing, nil when neither is set: the payment then
// takes the one-statement path.
func (s *Outbox) recordHook(source string, fn recordFn) recordFn {
	route := s.routeOf(source)
	if route == nil {
		return fn
	}
	return func(ctx context.Context, tx pgx.Tx, p Payment) error {
		if err := s.forwardRecorded(ctx, tx, p, route); err != nil {
			return forwardFailed(err)
		}
		if fn == nil {
			return nil
		}
		return fn(ctx, tx, p)
	}
}

// changeHook is recordHook for a lifecycle event of source: the forward
// jobs of the change of state it makes, then fn.
func (s *Outbox) changeHook(source string, fn changeFn) changeFn {
	route := s.routeOf(source)
	if route == nil {
		return fn
	}
	return func(ctx context.Context, tx pgx.Tx, c Change) error {
		if err := s.forwardChange(ctx, tx, c, route); err != nil {
			return forwardFailed(err)
		}
		if fn == nil {
			return nil
		}
		return fn(ctx, tx, c)
	}
}

// forwardFailed is the error of a recording transaction whose forward
// jobs could not be inserted: it rolls back, nothing is recorded, and the
// sender retries (ErrUnavailable), whatever the cause (a database that
// failed, a route that refused the message).
func forwardFailed(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: forward: %w", ErrUnavailable, err)
}

// ForwardRecordHookTo returns a hook for RecordPaymentFunc's fn that
// inserts each payment.recorded message's jobs to the destinations route
// picks, one per destination with its own attempts: for a caller that
// routes one call's payment itself. A source's own forwarding needs no
// hook: set its route on the store (Route), which then inserts these jobs
// in every record of the source. A nil route returns nil.
func (s *Outbox) ForwardRecordHookTo(route ForwardRouter) func(ctx context.Context, tx pgx.Tx, p Payment) error {
	if route == nil {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, p Payment) error { return s.forwardRecorded(ctx, tx, p, route) }
}

// ForwardChangeHookTo is ForwardRecordHookTo for RecordEvent's fn: the
// jobs of each change's message. A nil route returns nil.
func (s *Outbox) ForwardChangeHookTo(route ForwardRouter) func(ctx context.Context, tx pgx.Tx, c Change) error {
	if route == nil {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, c Change) error { return s.forwardChange(ctx, tx, c, route) }
}

// forwardRecorded inserts the payment.recorded jobs of p, as recorded,
// one per target route picks for it.
func (s *Outbox) forwardRecorded(ctx context.Context, tx pgx.Tx, p Payment, route ForwardRouter) error {
	if p.TransactionID == "" {
		return fmt.Errorf("%w: a forward needs a transaction id", ErrForward)
	}
	source := p.Source
	if source == "" {
		source = DefaultSource
	}
	args := ForwardArgs{ID: PaymentForwardID(source, p.TransactionID), Type: ForwardPaymentRecorded,
		Source: source, TransactionID: p.TransactionID, State: forwardedState(p.Lifecycle), Payment: carriedPayment(p)}
	return s.insertRouted(ctx, tx, args, &p, route)
}

// forwardChange inserts the jobs of c's message (its type, webhook-id
// EventForwardID, the state it leaves), one per target route picks.
func (s *Outbox) forwardChange(ctx context.Context, tx pgx.Tx, c Change, route ForwardRouter) error {
	return s.insertRouted(ctx, tx, ForwardArgs{
		ID: EventForwardID(c.Source, c.EventID), Type: c.Message,
		Source: c.Source, TransactionID: c.TransactionID, State: forwardedState(&c),
	}, nil, route)
}

// insertRouted inserts args's job once per target route picks for it.
func (s *Outbox) insertRouted(ctx context.Context, tx pgx.Tx, args ForwardArgs, p *Payment, route ForwardRouter) error {
	targets, err := route(ctx, args, p)
	if err != nil {
		return fmt.Errorf("store: route forward %s: %w", args.ID, err)
	}
	for _, t := range targets {
		if t.Destination == "" {
			return fmt.Errorf("%w: a forward target without a destination", ErrForward)
		}
		a := args
		a.Destination, a.Fingerprint = t.Destination, t.Fingerprint
		if err := s.insertForwardAttempts(ctx, tx, a, t.MaxAttempts); err != nil {
			return err
		}
	}
	return nil
}

// ForwardChangeHook returns the hook of an event's recording transaction
// (RecordEvent's fn) that inserts the forward job of the change of state
// it makes to destination: its type is the change's message, its
// webhook-id EventForwardID, and it carries the state. A destination of ""
// returns nil: nothing is forwarded. A source that forwards by its routes
// needs no hook: see Route.
func (s *Outbox) ForwardChangeHook(destination string) func(ctx context.Context, tx pgx.Tx, c Change) error {
	if destination == "" {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, c Change) error {
		return s.insertForward(ctx, tx, ForwardArgs{
			ID: EventForwardID(c.Source, c.EventID), Type: c.Message, Destination: destination,
			Source: c.Source, TransactionID: c.TransactionID, State: forwardedState(&c),
		})
	}
}

func (s *Outbox) insertForward(ctx context.Context, tx pgx.Tx, args ForwardArgs) error {
	return s.insertForwardAttempts(ctx, tx, args, 0)
}

// insertForwardAttempts inserts args's job with maxAttempts attempts (0:
// Config.ForwardMaxAttempts).
func (s *Outbox) insertForwardAttempts(ctx context.Context, tx pgx.Tx, args ForwardArgs, maxAttempts int) error {
	if maxAttempts <= 0 {
		maxAttempts = s.cfg.ForwardMaxAttempts
	}
	if s.cfg.ExpressForwards && maxAttempts > 1 {
		// A message of a single attempt is a River job from the start:
		// the lane's attempt would be its only one, and what River shows
		// of a message given up (discarded, its error) would be lost.
		return s.insertExpressOne(ctx, tx, args, maxAttempts)
	}
	return s.insertRiverForward(ctx, tx, args, maxAttempts)
}

// insertExpressOne inserts args's row of the express lane in tx
// (outbox_express.go), with the rows of its batch when tx is a batch's.
func (s *Outbox) insertExpressOne(ctx context.Context, tx pgx.Tx, args ForwardArgs, maxAttempts int) error {
	row, err := expressRowOf(ctx, args, maxAttempts)
	if err != nil {
		return err
	}
	if collectExpress(ctx, tx, row) {
		return nil
	}
	return insertExpress(ctx, tx, []expressRow{row})
}

// insertRiverForward inserts args's River job with maxAttempts attempts.
func (s *Outbox) insertRiverForward(ctx context.Context, tx pgx.Tx, args ForwardArgs, maxAttempts int) error {
	opts := &river.InsertOpts{MaxAttempts: maxAttempts}
	batched := opts
	if !tracingOff(s.cfg.TracerProvider) {
		batched = withRowTrace(ctx, opts)
	}
	if collect(ctx, tx, args, batched) {
		// A batch of payments inserts its hooks' jobs together, in its
		// transaction, before COMMIT (Payments.batchWrite), under the
		// batch's ctx: each job keeps its own delivery's trace context
		// (jobs_trace.go).
		return nil
	}
	if _, err := s.jobs.InsertTx(ctx, tx, args, opts); err != nil {
		return translate("insert forward job", err)
	}
	return nil
}

// ForwardStatusHook returns a StatusHook (for
// Disbursements.OnStatusChange) that inserts a disbursement.<status>
// forward job to destination in every transaction that moves a disbursement to
// sent, paid or failed. A row that goes from
// pending straight to paid (the provider answered paid at once) is
// forwarded as disbursement.paid only. Compose it with another hook by
// calling both.
func (s *Outbox) ForwardStatusHook(destination string) StatusHook {
	return func(ctx context.Context, tx pgx.Tx, c StatusChange) error {
		d := c.Disbursement
		if d.Status.Rank() < StatusSent.Rank() || destination == "" {
			return nil
		}
		args := ForwardArgs{
			ID:          DisbursementForwardID(d.LoanID, d.Tranche, d.Status),
			Type:        ForwardDisbursementPrefix + string(d.Status),
			Destination: destination,
			Disbursement: &ForwardedDisbursement{
				ID: d.ID, LoanID: d.LoanID, Tranche: d.Tranche, Amount: d.Amount, Currency: d.Currency,
				Status: d.Status, PreviousStatus: c.From, ProviderRef: d.ProviderRef,
				IdempotencyKey: d.IdempotencyKey, EventID: d.EventID, LastError: d.LastError,
				StatusSince: d.StatusSince,
			},
		}
		return s.insertForward(ctx, tx, args)
	}
}

// ForwardJob is a forward job as River holds it.
type ForwardJob struct {
	ID          int64
	State       string // River's: available, scheduled, running, retryable, completed, cancelled, discarded
	Attempt     int
	MaxAttempts int
	Args        ForwardArgs
	LastError   string // the last attempt's error, "" when none failed
	CreatedAt   time.Time
	AttemptedAt time.Time // zero before the first attempt
	ScheduledAt time.Time // when it is (or was) due
	FinalizedAt time.Time // zero until completed, cancelled or discarded
}

// GivenUp reports whether River stopped trying the job: discarded after
// its last attempt, or cancelled by the worker (its payment is gone).
func (j ForwardJob) GivenUp() bool { return j.State == "discarded" || j.State == "cancelled" }

func forwardJob(row *rivertype.JobRow) (ForwardJob, error) {
	j := ForwardJob{
		ID: row.ID, State: string(row.State), Attempt: row.Attempt, MaxAttempts: row.MaxAttempts,
		CreatedAt: row.CreatedAt, ScheduledAt: row.ScheduledAt,
	}
	if err := json.Unmarshal(row.EncodedArgs, &j.Args); err != nil {
		return ForwardJob{}, fmt.Errorf("store: forward job %d: args: %w", row.ID, err)
	}
	if row.AttemptedAt != nil {
		j.AttemptedAt = *row.AttemptedAt
	}
	if row.FinalizedAt != nil {
		j.FinalizedAt = *row.FinalizedAt
	}
	if n := len(row.Errors); n > 0 {
		j.LastError = row.Errors[n-1].Error
	}
	return j, nil
}

// ForwardJobFilter selects forward jobs.
type ForwardJobFilter struct {
	GivenUp bool      // only discarded and cancelled jobs
	Limit   int       // at most this many, newest first; 0: 100
	Since   time.Time // only jobs created at or after it; zero: any
}

// ForwardJobs lists forward jobs, newest first. Errors wrap ErrUnavailable
// when the database failed transiently.
func (s *Outbox) ForwardJobs(ctx context.Context, f ForwardJobFilter) ([]ForwardJob, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	p := river.NewJobListParams().Kinds(ForwardKind).First(min(limit, 10000)).
		OrderBy(river.JobListOrderByID, river.SortOrderDesc)
	if f.GivenUp {
		p = p.States(rivertype.JobStateDiscarded, rivertype.JobStateCancelled)
	}
	if !f.Since.IsZero() {
		p = p.Where("created_at >= @since", river.NamedArgs{"since": f.Since})
	}
	res, err := s.jobs.JobList(ctx, p)
	if err != nil {
		return nil, translate("list forward jobs", err)
	}
	out := make([]ForwardJob, 0, len(res.Jobs))
	for _, row := range res.Jobs {
		j, err := forwardJob(row)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// RetryForward makes forward job id available again at once (River's
// JobRetry), with one more attempt if it had used them all, and returns it
// as it stands afterwards. A running job is left alone. The given-up later
// versions of its payment to its destination, which it held, are put back
// with it (in the same transaction): they go after it, in order. An id
// that is no forward job is ErrNotFound.
func (s *Outbox) RetryForward(ctx context.Context, id int64) (ForwardJob, error) {
	row, err := s.jobs.JobGet(ctx, id)
	switch {
	case errors.Is(err, rivertype.ErrNotFound):
		return ForwardJob{}, fmt.Errorf("%w: forward job %d", ErrNotFound, id)
	case err != nil:
		return ForwardJob{}, translate("retry forward job: get", err)
	case row.Kind != ForwardKind:
		return ForwardJob{}, fmt.Errorf("%w: job %d is a %s job, not a forward", ErrNotFound, id, row.Kind)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if row, err = s.jobs.JobRetryTx(ctx, tx, id); err != nil {
			return err
		}
		_, err = s.releaseHeldTx(ctx, tx, id)
		return err
	})
	if err != nil {
		return ForwardJob{}, translate("retry forward job", err)
	}
	return forwardJob(row)
}

// RetryGivenUpForwards retries (RetryForward) every discarded or cancelled
// forward job once and returns how many it put back. A job that is given
// up again while it runs (the receiver is still down) is not retried a
// second time.
func (s *Outbox) RetryGivenUpForwards(ctx context.Context) (int, error) {
	seen := map[int64]bool{}
	for {
		jobs, err := s.ForwardJobs(ctx, ForwardJobFilter{GivenUp: true, Limit: 500 + len(seen)})
		if err != nil {
			return len(seen), err
		}
		fresh := 0
		for _, j := range jobs {
			if seen[j.ID] {
				continue
			}
			if _, err := s.jobs.JobRetry(ctx, j.ID); err != nil {
				return len(seen), translate("retry forward job", err)
			}
			seen[j.ID] = true
			fresh++
		}
		if fresh == 0 {
			return len(seen), nil
		}
	}
}
