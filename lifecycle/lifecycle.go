// Package lifecycle computes a payment's state from the set of its recorded
// events: authorisations, captures, failures, voids, refunds and disputes.
// It does no I/O. Because Fold depends on the set of events and never on
// the order they arrived in, a payment recorded from events delivered in
// any order, any number of times, to any replica, ends in the same state;
// package store records each event once and keeps the folded state with
// the payment.
//
// The rules:
//
//   - The payment's money is its authorisation's currency (the success's,
//     else the authorisation's). An event that names another currency is
//     recorded but not applied: the state is the same as without it, and
//     the payment is flagged for review (ReviewCurrency). So is an event
//     of another merchant account than the payment's (ReviewAccount).
//   - amount_authorized: the largest amount an authorisation, a success or
//     an authorisation adjustment names.
//   - amount_captured: a success (a payment taken at once, or a Stripe
//     PaymentIntent's amount_received) is captured money; otherwise the
//     sum of the distinct successful captures, each keyed by its capture
//     id, a failed capture undoing only the capture it names, or a
//     cumulative figure (Stripe's charge.amount_captured), whichever is
//     larger. It never exceeds amount_authorized: a capture that would is
//     capped and flagged (ReviewOverCaptured).
//   - amount_refunded: the refunds, each keyed by its refund id, each with
//     the furthest status reported for it (pending, then succeeded, then
//     failed: both Stripe and Adyen move a refund only forward, so the
//     furthest status is the latest whatever the unsigned dates say); the
//     sum of the succeeded ones, or a cumulative figure (Stripe's
//     charge.amount_refunded) less the refunds known to have failed,
//     whichever is larger. It never exceeds amount_captured: a refund that
//     would is capped and flagged (OverRefunded).
//   - A void (canceled) of an authorisation that no explicit capture took
//     makes the payment canceled, nothing captured; a void after a capture
//     changes nothing and is flagged (ReviewVoidAfterCapture). A
//     cancel-or-refund (Adyen's CANCEL_OR_REFUND) is a void before any
//     explicit capture and a full refund after one.
//   - status: canceled (a void honoured), else succeeded (with its refunds
//     deciding between succeeded, partially_refunded and refunded) once
//     money is captured, else authorized once authorised, else canceled,
//     else failed, else pending (events known, no authorisation yet).
//   - dispute: none, open, won, lost; the closing event of the highest
//     stage decides (Adyen: chargeback, its reversal, a second chargeback,
//     pre-arbitration: the event codes, which the signature covers), the
//     provider's date only ordering events of the same stage, and of two
//     on the same stage and date, won. A closed dispute is never reopened
//     by a late opening event.
//   - Sums saturate at MaxAmount and flag the payment (ReviewOverflow):
//     no amount arithmetic overflows.
//
// Step says what recording one more event does: the new state, the version
// (which grows by one with each change forwarded downstream) and the type of
// the message that change forwards.
package lifecycle

import (
	"cmp"
	"slices"
	"time"
)

// Kind is what an event says happened to a payment.
type Kind string

// The kinds of events.
const (
	// Succeeded is a payment authorised and captured at once (or the
	// capture that completes it, Stripe's payment_intent.succeeded): the
	// payment row of package store.
	Succeeded Kind = "succeeded"
	// Authorized is money held, not taken: an authorisation of a source
	// whose captures are reported separately (capture: manual).
	Authorized Kind = "authorized"
	// AuthorizationAdjusted is an authorisation's new amount.
	AuthorizationAdjusted Kind = "authorization_adjusted"
	// Captured is a capture of an authorisation (CaptureID names it).
	Captured Kind = "captured"
	// CaptureFailed says the capture CaptureID did not take the money.
	CaptureFailed Kind = "capture_failed"
	Failed        Kind = "failed"
	// Canceled is a void: of an authorisation never captured, or of a
	// payment that never completed.
	Canceled Kind = "canceled"
	// CancelOrRefund is a void before any capture, a full refund after.
	CancelOrRefund Kind = "cancel_or_refund"
	// Refund is a refund that succeeded (RefundID names it).
	Refund Kind = "refund"
	// RefundPending is a refund requested, not yet succeeded.
	RefundPending Kind = "refund_pending"
	// RefundFailed is a refund that failed (or was canceled or reversed).
	RefundFailed  Kind = "refund_failed"
	DisputeOpened Kind = "dispute_opened"
	DisputeWon    Kind = "dispute_won"
	DisputeLost   Kind = "dispute_lost"
)

// Kinds are every kind, in the order the documentation lists them.
var Kinds = []Kind{Succeeded, Authorized, AuthorizationAdjusted, Captured, CaptureFailed, Failed, Canceled,
	CancelOrRefund, Refund, RefundPending, RefundFailed, DisputeOpened, DisputeWon, DisputeLost}

// Valid reports whether k is one of the kinds above.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }

// refundKind reports whether k is about a refund.
func (k Kind) refundKind() bool { return k == Refund || k == RefundPending || k == RefundFailed }

// Status is a payment's status.
type Status string

// The statuses.
const (
	Pending           Status = "pending"
	StatusFailed      Status = "failed"
	StatusCanceled    Status = "canceled"
	StatusAuthorized  Status = "authorized"
	StatusSucceeded   Status = "succeeded"
	PartiallyRefunded Status = "partially_refunded"
	Refunded          Status = "refunded"
)

// Dispute is a payment's dispute: "" for none.
type Dispute string

// The disputes.
const (
	NoDispute   Dispute = ""
	DisputeOpen Dispute = "open"
	Won         Dispute = "won"
	Lost        Dispute = "lost"
)

// MaxAmount bounds every amount and every sum, in minor units: far above
// what any provider accepts in one payment (Stripe's largest is 12 digits),
// far below what int64 holds. A sum that would pass it stays at it and
// flags the payment (ReviewOverflow).
const MaxAmount int64 = 1 << 50

// Review is a set of reasons a payment needs a person's review, found by
// the fold: each says what disagreed.
type Review uint16

// The reasons.
const (
	// ReviewCurrency: an event in another currency than the payment's was
	// recorded and not applied.
	ReviewCurrency Review = 1 << iota
	// ReviewAccount: an event of another merchant account than the
	// payment's was recorded and not applied.
	ReviewAccount
	// ReviewOverCaptured: the captures exceed the authorisation (the
	// captured amount is capped).
	ReviewOverCaptured
	// ReviewVoidAfterCapture: a void arrived after a capture and changed
	// nothing.
	ReviewVoidAfterCapture
	// ReviewOverflow: a sum reached MaxAmount.
	ReviewOverflow
)

// reviewNames are the reasons' names, as package store files them.
var reviewNames = []struct {
	r    Review
	name string
}{
	{ReviewCurrency, "currency_mismatch"},
	{ReviewAccount, "account_mismatch"},
	{ReviewOverCaptured, "over_captured"},
	{ReviewVoidAfterCapture, "void_after_capture"},
	{ReviewOverflow, "amount_overflow"},
}

// Names are the names of the reasons in r.
func (r Review) Names() []string {
	var out []string
	for _, n := range reviewNames {
		if r&n.r != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// Event is one provider event about a payment.
type Event struct {
	Kind Kind
	// ID is the provider's event id, unique per source (evt_..., Adyen's
	// pspReference:eventCode).
	ID string
	// Amount is in minor units: the payment's (succeeded, authorized,
	// failed, canceled), the new authorised amount (authorization_adjusted),
	// the capture's (captured, capture_failed) or the refund's (refund,
	// refund_pending, refund_failed, cancel_or_refund).
	Amount   int64
	Currency string
	// RefundID names the refund of a refund event ("": the event's own
	// ID).
	RefundID string
	// CaptureID names the capture of a captured or capture_failed event
	// ("": the event's own ID).
	CaptureID string
	// Cumulative says Amount is the total so far (Stripe's
	// charge.amount_refunded, charge.amount_captured), not one refund's or
	// capture's.
	Cumulative bool
	// Stage orders a dispute's events (higher is later in the dispute's
	// process); 0 for the rest.
	Stage int
	// Account is the merchant account the event is of ("": the provider
	// has none, or did not say).
	Account string
	// At is when the provider says the event happened; it orders dispute
	// outcomes of the same stage. Zero when unknown.
	At time.Time
}

// refundID is the refund e is about.
func (e Event) refundID() string { return cmp.Or(e.RefundID, e.ID) }

// captureID is the capture e is about.
func (e Event) captureID() string { return cmp.Or(e.CaptureID, e.ID) }

// State is a payment's state: a function of its set of events.
type State struct {
	Status Status
	// Amount and Currency are the payment's: its success's, else its
	// authorisation's; before either, the largest amount another event
	// named (0 and "" when none did).
	Amount           int64
	Currency         string
	AmountAuthorized int64
	AmountCaptured   int64
	AmountRefunded   int64
	// OverRefunded says the refunds exceed AmountCaptured: AmountRefunded
	// is capped, and the payment needs a person's review.
	OverRefunded bool
	Dispute      Dispute
	// Review holds the other reasons the payment needs a person's review.
	// It is not forwarded: a change of Review alone sends no message.
	Review Review
}

// Money is s without its review reasons: what a change of forwards.
func (s State) Money() State {
	s.Review = 0
	return s
}

// add is a + b, saturating at MaxAmount; ok false when it saturated.
func add(a, b int64) (int64, bool) {
	if b > MaxAmount-a {
		return MaxAmount, false
	}
	return a + b, true
}

// bounded is a clamped to [0, MaxAmount]; ok false when it was above.
func bounded(a int64) (int64, bool) {
	switch {
	case a < 0:
		return 0, true
	case a > MaxAmount:
		return MaxAmount, false
	}
	return a, true
}

// refundRank orders a refund's statuses: each moves only forward.
func refundRank(k Kind) int {
	switch k {
	case RefundPending:
		return 0
	case Refund, CancelOrRefund:
		return 1
	}
	return 2 // RefundFailed
}

// Fold is the state of a payment whose recorded events are events (in any
// order, repeats included).
func Fold(events []Event) State {
	evs := canonical(events)
	var base *Event // the success, else the authorisation: the payment's money
	for i, e := range evs {
		switch {
		case e.Kind == Succeeded && (base == nil || base.Kind != Succeeded):
			base = &evs[i]
		case e.Kind == Authorized && base == nil:
			base = &evs[i]
		}
	}
	if base == nil {
		return foldUnauthorised(evs)
	}
	f := folder{base: *base, ok: true, captures: map[string]int64{}, failedCaptures: map[string]bool{},
		refunds: map[string]int64{}, refundRanks: map[string]int{}}
	f.s.Amount, f.s.Currency = base.Amount, base.Currency
	for _, e := range evs {
		if f.applies(e) {
			f.add(e)
		}
	}
	return f.state()
}

// folder sums a payment's events of its own money (Fold).
type folder struct {
	s                                 State
	base                              Event
	ok                                bool // no sum saturated
	succeeded, voided, cancelOrRefund bool
	captures                          map[string]int64 // by capture id
	failedCaptures                    map[string]bool
	cumulativeCaptured, implicit      int64
	refunds                           map[string]int64 // by refund id
	refundRanks                       map[string]int
	cumulativeRefunded                int64
	disputes                          []Event
}

// applies reports whether e is of the payment's currency and merchant
// account, flagging it for review otherwise; a failed attempt moves no
// money, whatever it names.
func (f *folder) applies(e Event) bool {
	switch {
	case e.Kind == Failed:
		return false
	case e.Currency != "" && e.Currency != f.s.Currency:
		f.s.Review |= ReviewCurrency
		return false
	case e.Account != "" && f.base.Account != "" && e.Account != f.base.Account:
		f.s.Review |= ReviewAccount
		return false
	}
	return true
}

// add takes e into the sums.
func (f *folder) add(e Event) {
	amount, fine := bounded(e.Amount)
	f.ok = f.ok && fine
	switch e.Kind {
	case Succeeded:
		f.succeeded = true
		f.implicit = max(f.implicit, amount)
		f.s.AmountAuthorized = max(f.s.AmountAuthorized, amount)
	case Authorized, AuthorizationAdjusted:
		f.s.AmountAuthorized = max(f.s.AmountAuthorized, amount)
	case Captured:
		if e.Cumulative {
			f.cumulativeCaptured = max(f.cumulativeCaptured, amount)
		} else {
			f.captures[e.captureID()] = max(f.captures[e.captureID()], amount)
		}
	case CaptureFailed:
		f.failedCaptures[e.captureID()] = true
	case Canceled:
		f.voided = true
	case CancelOrRefund, Refund, RefundPending, RefundFailed:
		f.cancelOrRefund = f.cancelOrRefund || e.Kind == CancelOrRefund
		if e.Kind == Refund && e.Cumulative {
			f.cumulativeRefunded = max(f.cumulativeRefunded, amount)
			return
		}
		id := e.refundID()
		f.refunds[id] = max(f.refunds[id], amount)
		if r, seen := f.refundRanks[id]; !seen || refundRank(e.Kind) > r {
			f.refundRanks[id] = refundRank(e.Kind)
		}
	case DisputeOpened, DisputeWon, DisputeLost:
		f.disputes = append(f.disputes, e)
	}
}

// sum adds up m's values for the keys keep keeps, saturating.
func (f *folder) sum(m map[string]int64, keep func(id string) bool) int64 {
	var total int64
	for _, id := range sortedKeys(m) {
		if keep(id) {
			var fine bool
			total, fine = add(total, m[id])
			f.ok = f.ok && fine
		}
	}
	return total
}

// state is the payment's state from the sums.
func (f *folder) state() State {
	s := f.s
	explicit := max(f.cumulativeCaptured, f.sum(f.captures, func(id string) bool { return !f.failedCaptures[id] }))
	captured := explicit
	if explicit == 0 {
		captured = f.implicit
	}
	if captured > s.AmountAuthorized {
		captured = s.AmountAuthorized
		s.Review |= ReviewOverCaptured
	}
	s.Dispute = dispute(f.disputes)
	// A void, or a cancel-or-refund, before any explicit capture: the
	// authorisation is released, nothing taken.
	switch {
	case (f.voided || f.cancelOrRefund) && explicit == 0:
		s.AmountCaptured, s.Status = 0, StatusCanceled
		s.Review |= overflow(f.ok)
		return s
	case f.voided:
		s.Review |= ReviewVoidAfterCapture
	}
	s.AmountCaptured = captured
	refunded := f.sum(f.refunds, func(id string) bool { return f.refundRanks[id] == 1 })
	failed := f.sum(f.refunds, func(id string) bool { return f.refundRanks[id] == 2 })
	refunded = max(refunded, f.cumulativeRefunded-failed)
	if refunded > captured {
		refunded, s.OverRefunded = captured, true
	}
	s.AmountRefunded = refunded
	switch {
	case captured > 0 && refunded == captured:
		s.Status = Refunded
	case refunded > 0:
		s.Status = PartiallyRefunded
	case captured > 0 || f.succeeded:
		s.Status = StatusSucceeded
	default:
		s.Status = StatusAuthorized
	}
	s.Review |= overflow(f.ok)
	return s
}

// overflow is ReviewOverflow when not ok.
func overflow(ok bool) Review {
	if ok {
		return 0
	}
	return ReviewOverflow
}

// foldUnauthorised is the state of a payment with no authorisation or
// success among its events: canceled, failed or pending, with the largest
// amount an event named, and its dispute.
func foldUnauthorised(evs []Event) State {
	var s State
	canceled, failed := false, false
	var disputes []Event
	for _, e := range evs {
		switch e.Kind {
		case Failed, Canceled:
			if a, _ := bounded(e.Amount); a > s.Amount {
				s.Amount, s.Currency = a, e.Currency
			}
			canceled = canceled || e.Kind == Canceled
			failed = failed || e.Kind == Failed
		case DisputeOpened, DisputeWon, DisputeLost:
			disputes = append(disputes, e)
		}
	}
	s.Dispute = dispute(disputes)
	switch {
	case canceled:
		s.Status = StatusCanceled
	case failed:
		s.Status = StatusFailed
	default:
		s.Status = Pending
	}
	return s
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// canonical returns events sorted by date, then kind, then id, then the
// rest, each distinct event once: an order that depends on the set alone.
func canonical(events []Event) []Event {
	evs := slices.Clone(events)
	slices.SortFunc(evs, compare)
	return slices.Compact(evs)
}

func compare(a, b Event) int {
	return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID),
		cmp.Compare(a.Amount, b.Amount), cmp.Compare(a.RefundID, b.RefundID), cmp.Compare(a.CaptureID, b.CaptureID),
		cmp.Compare(a.Currency, b.Currency), cmp.Compare(a.Account, b.Account), cmp.Compare(a.Stage, b.Stage),
		boolCmp(a.Cumulative, b.Cumulative))
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

// dispute is the outcome of the closing event of the highest stage, of
// the latest date among those (of two on the same stage and date, won),
// else open when a dispute was opened.
func dispute(evs []Event) Dispute {
	var last *Event
	opened := false
	for i, e := range evs {
		switch e.Kind {
		case DisputeOpened:
			opened = true
		case DisputeWon, DisputeLost:
			if last == nil || outcomeAfter(e, *last) {
				last = &evs[i]
			}
		}
	}
	switch {
	case last != nil && last.Kind == DisputeWon:
		return Won
	case last != nil:
		return Lost
	case opened:
		return DisputeOpen
	}
	return NoDispute
}

// outcomeAfter reports whether the closing event a decides over b: a
// higher stage, else a later date, else won over lost, else the larger id
// (any rule the set alone decides).
func outcomeAfter(a, b Event) bool {
	if c := cmp.Or(cmp.Compare(a.Stage, b.Stage), a.At.Compare(b.At)); c != 0 {
		return c > 0
	}
	if a.Kind != b.Kind {
		return a.Kind == DisputeWon
	}
	return a.ID > b.ID
}
