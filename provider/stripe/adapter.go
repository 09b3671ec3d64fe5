package stripe

import (
	"fmt"
	"strconv"
	"time"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// adapter reads a Stripe Event and records the listed event types:
//
//   - payment_intent.succeeded records the PaymentIntent: transaction id
//     data.object.id (pi_...), amount data.object.amount_received, currency
//     data.object.currency upper-cased (Stripe sends "jpy");
//   - charge.succeeded records the Charge: data.object.id (ch_...) with
//     data.object.amount. When payment_intent.succeeded is listed too, a
//     charge that belongs to a PaymentIntent (data.object.payment_intent is
//     not null) is ignored: its PaymentIntent's event records that money,
//     and recording both would count it twice under two ids.
//
// and the lifecycle of a payment (package lifecycle), each named by the
// id the source files its payments under: the PaymentIntent (a source that
// records payment_intent.succeeded, the default), else the Charge (a
// source that records charge.succeeded alone: a refund's or a dispute's
// charge, a PaymentIntent's latest_charge), so that a source recording
// charges gets its charges' refunds and disputes:
//
//   - payment_intent.amount_capturable_updated: authorised (manual
//     capture), data.object.amount_capturable held;
//   - charge.captured: captured, data.object.amount_captured being the
//     cumulative amount captured of the Charge (its capture id);
//   - payment_intent.payment_failed and payment_intent.canceled: failed
//     and canceled (a void of an authorisation), data.object.id with
//     data.object.amount; charge.expired: an uncaptured Charge voided;
//   - charge.refunded: a refund of the Charge's payment,
//     data.object.amount_refunded being the cumulative amount refunded so
//     far;
//   - refund.created, refund.updated, refund.failed and
//     charge.refund.updated: the Refund data.object.id of
//     data.object.amount, by its data.object.status: pending (pending,
//     requires_action), succeeded, or failed (failed, canceled);
//   - charge.dispute.created: a dispute opened, data.object.payment_intent
//     (else data.object.charge) with data.object.amount;
//   - charge.dispute.closed: the dispute won (data.object.status "won" or
//     "warning_closed") or lost ("lost").
//
// Their date is the event's created (signed, as the whole body is). Every other event type is
// acknowledged and written nowhere. The event id
// is the event's own "id" (evt_...): Stripe's signature header carries none,
// and Stripe resends an event with the same id. The stored payload is the
// whole event body.
type adapter struct {
	rules  *payload.Rules
	events map[string]record
	// byCharge: the source records charge.succeeded and not
	// payment_intent.succeeded, so its payments are filed under their
	// Charge's id, and so are their lifecycle events.
	byCharge bool
}

func (a adapter) Adapt(body []byte, _ string) ([]provider.Event, error) {
	root, err := payload.Decode(body)
	if err != nil {
		return nil, err
	}
	object, _, err := root.RequiredString("", "object")
	if err != nil {
		return nil, err
	}
	if object != "event" {
		return nil, payload.Invalid("object", `object must be "event" (a Stripe Event)`)
	}
	eventID, _, err := root.RequiredString("", "id")
	if err != nil {
		return nil, err
	}
	typ, _, err := root.RequiredString("", "type")
	if err != nil {
		return nil, err
	}
	rec, ok := a.events[typ]
	if !ok {
		return nil, nil
	}
	obj, objName, err := root.RequiredObject("", "data", "object")
	if err != nil {
		return nil, err
	}
	if kind, kindName, err := obj.RequiredString(objName, "object"); err != nil {
		return nil, err
	} else if kind != rec.object {
		return nil, payload.Invalid(kindName, fmt.Sprintf("%s must be %q for a %s event", kindName, rec.object, typ))
	}
	if _, both := a.events["payment_intent.succeeded"]; both && typ == "charge.succeeded" {
		pi, _, err := obj.Child(objName, "payment_intent")
		if err != nil {
			return nil, err
		}
		if pi != nil && pi.Kind() != payload.Null {
			return nil, nil
		}
	}
	if rec.kind == lifecycle.Authorized {
		// amount_capturable falls to 0 once captured or canceled: that
		// change is the capture's or the void's event to say.
		if n, _, err := obj.Child(objName, rec.amount); err == nil && n != nil && string(n.Raw()) == "0" {
			return nil, nil
		}
	}
	e, err := a.event(obj, objName, rec, eventID)
	if err != nil {
		return nil, err
	}
	if rec.kind != "" {
		if e, err = a.lifecycleEvent(root, obj, objName, rec, e); err != nil {
			return nil, err
		}
	}
	e.Payload = body
	return []provider.Event{e}, nil
}

// lifecycleEvent completes e, read from a lifecycle event type's object:
// its kind, the payment it belongs to, its date.
func (a adapter) lifecycleEvent(root, obj *payload.Node, objName string, rec record, e provider.Event) (provider.Event, error) {
	own := e.TransactionID // the object's own id
	e.Kind = rec.kind
	switch rec.object {
	case "charge":
		// charge.refunded and charge.captured say the Charge's totals.
		e.Cumulative = rec.kind == lifecycle.Refund || rec.kind == lifecycle.Captured
		if rec.kind == lifecycle.Captured {
			e.CaptureID = own
		}
	case "refund":
		e.RefundID = own
		status, name, err := obj.RequiredString(objName, "status")
		if err != nil {
			return e, err
		}
		switch status {
		case "pending", "requires_action":
			e.Kind = lifecycle.RefundPending
		case "succeeded":
			e.Kind = lifecycle.Refund
		case "failed", "canceled":
			e.Kind = lifecycle.RefundFailed
		default:
			return e, payload.Invalid(name, name+` must be "pending", "requires_action", "succeeded", "failed" or "canceled"`)
		}
	}
	ref, err := a.paymentOf(obj, objName, rec)
	if err != nil {
		return e, err
	}
	if ref != "" {
		e.TransactionID = ref
	}
	if rec.kind == lifecycle.DisputeWon {
		status, name, err := obj.RequiredString(objName, "status")
		if err != nil {
			return e, err
		}
		switch status {
		case "won", "warning_closed":
		case "lost":
			e.Kind = lifecycle.DisputeLost
		default:
			return e, payload.Invalid(name, name+` must be "won", "warning_closed" or "lost" for a closed dispute`)
		}
	}
	created, _, err := root.Child("", "created")
	if err != nil {
		return e, err
	}
	if created != nil && created.Kind() == payload.Number {
		if sec, err := strconv.ParseInt(string(created.Raw()), 10, 64); err == nil && sec > 0 {
			e.At = time.Unix(sec, 0).UTC()
		}
	}
	return e, nil
}

// paymentOf is the id the payment of a lifecycle event's object is filed
// under, "" for the object's own id. By PaymentIntent (the default): a
// Charge's, a Refund's or a Dispute's payment_intent, else a Refund's or a
// Dispute's charge; a Charge without a PaymentIntent is filed under its own
// id. By Charge: a Refund's or a Dispute's charge (else its
// payment_intent), a PaymentIntent's latest_charge (else its own id), a
// Charge's own id.
func (a adapter) paymentOf(obj *payload.Node, objName string, rec record) (string, error) {
	var keys []string
	switch {
	case a.byCharge && rec.object == "payment_intent":
		keys = []string{"latest_charge"}
	case a.byCharge && rec.object == "charge":
		return "", nil
	case a.byCharge:
		keys = []string{"charge", "payment_intent"}
	case rec.object == "payment_intent":
		return "", nil
	case rec.object == "charge":
		keys = []string{"payment_intent"}
	default:
		keys = []string{"payment_intent", "charge"}
	}
	for _, key := range keys {
		n, name, err := obj.Child(objName, key)
		if err != nil {
			return "", err
		}
		switch {
		case n == nil || n.Kind() == payload.Null:
			continue
		case n.Kind() != payload.String:
			return "", payload.Malformed(name, name+" must be a string (an id)")
		}
		return n.Text(), nil
	}
	if rec.object == "dispute" || rec.object == "refund" {
		return "", payload.Invalid(objName+".charge", "a "+rec.object+" must name its payment_intent or its charge")
	}
	return "", nil
}

// event reads the payment of data.object and checks it, naming each field
// where the event holds it.
func (a adapter) event(obj *payload.Node, objName string, rec record, eventID string) (provider.Event, error) {
	e := provider.Event{EventID: eventID}
	names := payload.Names{"event_id": "id"}
	var err error
	if e.TransactionID, names["transaction_id"], err = obj.RequiredString(objName, "id"); err != nil {
		return e, err
	}
	if e.Amount, names["amount"], err = obj.RequiredAmount(objName, rec.amount); err != nil {
		return e, err
	}
	if e.Currency, names["currency"], err = obj.RequiredString(objName, "currency"); err != nil {
		return e, err
	}
	e.Currency = asciiUpper(e.Currency)
	return e, a.rules.CheckPayment(e.Payment(), names)
}

// asciiUpper upper-cases ASCII letters only: strings.ToUpper would turn a
// dotless ı into I, making "ıdr" an accepted "IDR".
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}

// Types are every event type a Stripe source may record, in records'
// order, each marked with whether this source records it
// (provider.Typed).
func (a adapter) Types() []provider.EventType {
	out := make([]provider.EventType, len(records))
	for i, r := range records {
		kind := r.kind
		if kind == "" {
			kind = lifecycle.Succeeded
		}
		_, rec := a.events[r.typ]
		out[i] = provider.EventType{Name: r.typ, Kind: kind, Recorded: rec}
	}
	return out
}
