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
// PaymentIntent it belongs to:
//
//   - payment_intent.payment_failed and payment_intent.canceled: failed
//     and canceled, data.object.id with data.object.amount;
//   - charge.refunded: a refund of the Charge's data.object.payment_intent
//     (the Charge's own id when it has none), data.object.amount_refunded
//     being the cumulative amount refunded so far;
//   - charge.dispute.created: a dispute opened, data.object.payment_intent
//     (else data.object.charge) with data.object.amount;
//   - charge.dispute.closed: the dispute won (data.object.status "won" or
//     "warning_closed") or lost ("lost").
//
// Their date is the event's created. Every other event type is
// acknowledged and written nowhere. The event id
// is the event's own "id" (evt_...): Stripe's signature header carries none,
// and Stripe resends an event with the same id. The stored payload is the
// whole event body.
type adapter struct {
	rules  *payload.Rules
	events map[string]record
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
	e, err := a.event(obj, objName, rec, eventID)
	if err != nil {
		return nil, err
	}
	if rec.kind != "" {
		if e, err = lifecycleEvent(root, obj, objName, rec, e); err != nil {
			return nil, err
		}
	}
	e.Payload = body
	return []provider.Event{e}, nil
}

// lifecycleEvent completes e, read from a lifecycle event type's object:
// its kind, the payment it belongs to, its date.
func lifecycleEvent(root, obj *payload.Node, objName string, rec record, e provider.Event) (provider.Event, error) {
	e.Kind, e.Cumulative = rec.kind, rec.kind == lifecycle.Refund
	if rec.linked {
		ref, err := paymentOf(obj, objName, rec)
		if err != nil {
			return e, err
		}
		if ref != "" {
			e.TransactionID = ref
		}
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

// paymentOf is the PaymentIntent a Charge or a Dispute belongs to, else a
// Dispute's Charge; "" for a Charge without a PaymentIntent (recorded
// under its own id).
func paymentOf(obj *payload.Node, objName string, rec record) (string, error) {
	keys := []string{"payment_intent"}
	if rec.object == "dispute" {
		keys = append(keys, "charge")
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
	if rec.object == "dispute" {
		return "", payload.Invalid(objName+".charge", "a dispute must name its payment_intent or its charge")
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
