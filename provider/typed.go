package provider

import (
	"slices"

	"github.com/paylock/paylock/lifecycle"
)

// EventType is one event type a provider's adapter understands.
type EventType struct {
	// Name is the provider's name for it (Stripe's charge.refunded,
	// Adyen's REFUND).
	Name string
	// Kind is what it records: lifecycle.Succeeded for a payment that
	// succeeded, else the lifecycle event (the one a Refund's status or an
	// item's success does not change).
	Kind lifecycle.Kind
	// Recorded says the source records it; false when the source's
	// settings leave it out (Stripe's events), so that its deliveries are
	// acknowledged and written nowhere.
	Recorded bool
}

// A Typed adapter names the event types it understands and which of them
// its source records. Implementing it is optional: the sources-file
// loader warns about a source that leaves out lifecycle types (LeftOut),
// and the webhook pipeline labels an ignored delivery's metric with its
// type only when the adapter names it (a type a sender invents would make
// the label unbounded).
type Typed interface {
	Types() []EventType
}

// LeftOut returns the names of the types t understands but does not
// record that are events of a payment's lifecycle (refunds, disputes,
// failures, cancellations, captures, authorisations), in t's order: a
// source that leaves them out acknowledges those deliveries and records
// nothing, so that a refunded or disputed payment stays "succeeded". A
// payment type left out (Stripe's charge.succeeded beside
// payment_intent.succeeded) is not one of them.
func LeftOut(t Typed) []string {
	var out []string
	for _, e := range t.Types() {
		if !e.Recorded && e.Kind != lifecycle.Succeeded && e.Kind != "" && !slices.Contains(out, e.Name) {
			out = append(out, e.Name)
		}
	}
	return out
}

// MovesMoney reports whether an event of kind k changes what a payment is
// worth to the merchant: a refund, a dispute, a failure, a cancellation or
// a capture (an authorisation only holds money; a payment that succeeded is
// not a change).
func MovesMoney(k lifecycle.Kind) bool {
	switch k {
	case lifecycle.Captured, lifecycle.CaptureFailed, lifecycle.Failed, lifecycle.Canceled, lifecycle.CancelOrRefund,
		lifecycle.Refund, lifecycle.RefundPending, lifecycle.RefundFailed,
		lifecycle.DisputeOpened, lifecycle.DisputeWon, lifecycle.DisputeLost:
		return true
	}
	return false
}
