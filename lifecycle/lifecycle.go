// Package lifecycle computes a payment's state from the set of its recorded
// events: failures, cancellations, the success, refunds and disputes. It does
// no I/O. Because Fold depends on the set of events and never on the order
// they arrived in, a payment recorded from events delivered in any order,
// any number of times, to any replica, ends in the same state; package store
// records each event once and keeps the folded state with the payment.
//
// The rules (issue #23):
//
//   - status: a recorded success (with its refunds deciding between
//     succeeded, partially_refunded and refunded) beats canceled, which
//     beats failed, which beats pending (events known, no outcome yet).
//   - amount_refunded: the largest cumulative refund seen (Stripe's
//     charge.amount_refunded), or the sum of the distinct successful
//     refunds (Adyen, paylock's own body) less those a refund_failed
//     undoes, whichever is larger; never more than the amount: a refund
//     that would exceed it is capped and flagged (OverRefunded) for review.
//   - dispute: none, open, won, lost; the closing event with the latest
//     date decides (codes like Adyen's are not monotonic), and a closed
//     dispute is never reopened by a late opening event.
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
	Succeeded     Kind = "succeeded"
	Failed        Kind = "failed"
	Canceled      Kind = "canceled"
	Refund        Kind = "refund"
	RefundFailed  Kind = "refund_failed"
	DisputeOpened Kind = "dispute_opened"
	DisputeWon    Kind = "dispute_won"
	DisputeLost   Kind = "dispute_lost"
)

// Valid reports whether k is one of the kinds above.
func (k Kind) Valid() bool {
	switch k {
	case Succeeded, Failed, Canceled, Refund, RefundFailed, DisputeOpened, DisputeWon, DisputeLost:
		return true
	}
	return false
}

// Status is a payment's status.
type Status string

// The statuses, in rising precedence (the refunded ones are a succeeded
// payment's).
const (
	Pending           Status = "pending"
	StatusFailed      Status = "failed"
	StatusCanceled    Status = "canceled"
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

// Event is one provider event about a payment.
type Event struct {
	Kind Kind
	// ID is the provider's event id, unique per source (evt_..., Adyen's
	// eventCode:pspReference).
	ID string
	// Amount is in minor units: the payment's (succeeded, failed,
	// canceled) or the refund's (refund, refund_failed: 0 is the whole
	// refund as first recorded).
	Amount   int64
	Currency string
	// RefundID names the refund of a refund or refund_failed event ("":
	// the event's own ID).
	RefundID string
	// Cumulative says Amount is the total refunded so far (Stripe's
	// charge.amount_refunded), not one refund's.
	Cumulative bool
	// At is when the provider says the event happened; it orders dispute
	// outcomes. Zero when unknown.
	At time.Time
}

// refundID is the refund e is about.
func (e Event) refundID() string {
	if e.RefundID != "" {
		return e.RefundID
	}
	return e.ID
}

// State is a payment's state: a function of its set of events.
type State struct {
	Status Status
	// Amount and Currency are the success's; before one, the largest
	// amount another event named (0 and "" when none did).
	Amount         int64
	Currency       string
	AmountRefunded int64
	// OverRefunded says the refunds exceed Amount: AmountRefunded is
	// capped at Amount, and the payment needs a person's review.
	OverRefunded bool
	Dispute      Dispute
}

// Fold is the state of a payment whose recorded events are events (in any
// order, repeats included).
func Fold(events []Event) State {
	evs := canonical(events)
	var s State
	success := false
	canceled, failed := false, false
	for _, e := range evs {
		switch e.Kind {
		case Succeeded:
			if !success {
				s.Amount, s.Currency, success = e.Amount, e.Currency, true
			}
		case Failed, Canceled:
			if !success && e.Amount > s.Amount {
				s.Amount, s.Currency = e.Amount, e.Currency
			}
			canceled = canceled || e.Kind == Canceled
			failed = failed || e.Kind == Failed
		}
	}
	s.AmountRefunded = refunded(evs)
	s.Dispute = dispute(evs)
	switch {
	case success:
		if s.AmountRefunded > s.Amount {
			s.AmountRefunded, s.OverRefunded = s.Amount, true
		}
		s.Status = StatusSucceeded
		if s.AmountRefunded > 0 {
			s.Status = PartiallyRefunded
		}
		if s.AmountRefunded == s.Amount {
			s.Status = Refunded
		}
	case canceled:
		s.Status = StatusCanceled
	case failed:
		s.Status = StatusFailed
	default:
		s.Status = Pending
	}
	return s
}

// canonical returns events sorted by date, then kind, then id, then the
// rest, each distinct event once: an order that depends on the set alone.
func canonical(events []Event) []Event {
	evs := slices.Clone(events)
	slices.SortFunc(evs, func(a, b Event) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID),
			cmp.Compare(a.Amount, b.Amount), cmp.Compare(a.RefundID, b.RefundID),
			cmp.Compare(a.Currency, b.Currency), boolCmp(a.Cumulative, b.Cumulative))
	})
	return slices.Compact(evs)
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

// refunded is the amount the refund events add up to: the largest
// cumulative total, or the sum of the distinct refunds no refund_failed
// undid, whichever is larger.
func refunded(evs []Event) int64 {
	var cumulative int64
	refunds := map[string]int64{}
	undone := map[string]bool{}
	for _, e := range evs {
		switch {
		case e.Kind == Refund && e.Cumulative:
			cumulative = max(cumulative, e.Amount)
		case e.Kind == Refund:
			// The same refund named by two events counts once, for its
			// largest amount.
			refunds[e.refundID()] = max(refunds[e.refundID()], e.Amount)
		case e.Kind == RefundFailed:
			undone[e.refundID()] = true
		}
	}
	var sum int64
	for id, amount := range refunds {
		if !undone[id] {
			sum += amount
		}
	}
	return max(cumulative, sum)
}

// dispute is the outcome of the latest closing event by date (of two on
// the same date, won), else open when a dispute was opened.
func dispute(evs []Event) Dispute {
	var last *Event
	opened := false
	for i, e := range evs {
		switch e.Kind {
		case DisputeOpened:
			opened = true
		case DisputeWon, DisputeLost:
			// evs is in canonical order: date, then kind ("dispute_lost" <
			// "dispute_won"), then id; the last closing event decides.
			last = &evs[i]
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
