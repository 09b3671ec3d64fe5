package lifecycle

// The types of the messages a change of state forwards (package forward
// sends them; package store enqueues them).
const (
	MessageRecorded      = "payment.recorded"
	MessageFailed        = "payment.failed"
	MessageCanceled      = "payment.canceled"
	MessageRefunded      = "payment.refunded"
	MessageDisputeOpened = "payment.dispute.opened"
	MessageDisputeClosed = "payment.dispute.closed"
)

// Step is what recording one event does to a payment.
type Step struct {
	// State is the payment's state with the event.
	State State
	// Changed says State differs from the state before: it is to be
	// stored.
	Changed bool
	// Version is the payment's version after the event: one more than
	// before when the change is forwarded (Message set), else the same.
	Version int
	// Message is the type of the message the change forwards; "" when
	// nothing is forwarded: nothing changed, or the payment is still
	// pending (its events wait for the payment; nothing is said of a
	// payment paylock does not know yet).
	Message string
}

// Apply is the Step of recording e on a payment whose state and version
// were prev and version; events are all its recorded events, e included.
func Apply(prev State, version int, events []Event, e Event) Step {
	next := Fold(events)
	st := Step{State: next, Changed: next != prev, Version: version}
	if !st.Changed || next.Status == Pending {
		return st
	}
	st.Version++
	st.Message = MessageOf(e.Kind)
	return st
}

// MessageOf is the type of the message forwarded when an event of kind k
// changes a payment's state. A success is payment.recorded, even when the
// refunds or the dispute that arrived before it change its status at once.
func MessageOf(k Kind) string {
	switch k {
	case Succeeded:
		return MessageRecorded
	case Failed:
		return MessageFailed
	case Canceled:
		return MessageCanceled
	case Refund, RefundFailed:
		return MessageRefunded
	case DisputeOpened:
		return MessageDisputeOpened
	}
	return MessageDisputeClosed
}
