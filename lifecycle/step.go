package lifecycle

// The types of the messages a change of state forwards (package forward
// sends them; package store enqueues them).
const (
	MessageRecorded      = "payment.recorded"
	MessageAuthorized    = "payment.authorized"
	MessageCaptured      = "payment.captured"
	MessageFailed        = "payment.failed"
	MessageCanceled      = "payment.canceled"
	MessageRefunded      = "payment.refunded"
	MessageDisputeOpened = "payment.dispute.opened"
	MessageDisputeClosed = "payment.dispute.closed"
)

// Messages are every message type, in the order the documentation lists
// them.
var Messages = []string{MessageRecorded, MessageAuthorized, MessageCaptured, MessageFailed, MessageCanceled,
	MessageRefunded, MessageDisputeOpened, MessageDisputeClosed}

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
	// nothing is forwarded: nothing but the review reasons changed, or
	// the payment is still pending (its events wait for the payment;
	// nothing is said of a payment paylock does not know yet).
	Message string
	// NewReview are the review reasons the event added.
	NewReview Review
}

// Apply is the Step of recording e on a payment whose state and version
// were prev and version; events are all its recorded events, e included.
func Apply(prev State, version int, events []Event, e Event) Step {
	next := Fold(events)
	st := Step{State: next, Changed: next != prev, Version: version, NewReview: next.Review &^ prev.Review}
	if next.Money() == prev.Money() || next.Status == Pending {
		return st
	}
	st.Version++
	st.Message = messageOf(e.Kind, next)
	return st
}

// messageOf is the type of the message forwarded when an event of kind k
// changes a payment's state to next. A success is payment.recorded, even
// when the refunds or the dispute that arrived before it change its status
// at once.
func messageOf(k Kind, next State) string {
	switch k {
	case Succeeded:
		return MessageRecorded
	case Authorized, AuthorizationAdjusted:
		return MessageAuthorized
	case Captured, CaptureFailed:
		return MessageCaptured
	case Failed:
		return MessageFailed
	case Canceled:
		return MessageCanceled
	case CancelOrRefund:
		if next.Status == StatusCanceled {
			return MessageCanceled
		}
		return MessageRefunded
	case Refund, RefundPending, RefundFailed:
		return MessageRefunded
	case DisputeOpened:
		return MessageDisputeOpened
	}
	return MessageDisputeClosed
}

// MessageOf is the type of the message forwarded when an event of kind k
// changes a payment's state (for a cancel-or-refund, the void's).
func MessageOf(k Kind) string { return messageOf(k, State{Status: StatusCanceled}) }
