package handler

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/store"
)

// errAdapterConfig is wrapped by the errors of the adapter constructors: a
// source's configuration names something the adapter cannot do.
var errAdapterConfig = errors.New("handler: invalid adapter configuration")

// stripeRecord says how a Stripe event type carries a payment: the type of
// its data.object and the member holding the amount received.
type stripeRecord struct {
	object string
	amount string
}

// stripeRecords are the Stripe event types a source may record. The shapes
// are stripe-go's (stripe.Event, stripe.PaymentIntent, stripe.Charge);
// signature/compat checks the fixtures in testdata/stripe against them.
var stripeRecords = map[string]stripeRecord{
	"payment_intent.succeeded": {object: "payment_intent", amount: "amount_received"},
	"charge.succeeded":         {object: "charge", amount: "amount"},
}

// stripeAdapter reads a Stripe Event (https://docs.stripe.com/api/events/object).
type stripeAdapter struct {
	rules  *inputRules
	events map[string]stripeRecord
}

// newStripeAdapter returns an adapter for Stripe Events that records the
// listed event types (default: payment_intent.succeeded):
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
// Every other event type is acknowledged and written nowhere. The event id
// is the event's own "id" (evt_...): Stripe's signature header carries none,
// and Stripe resends an event with the same id. The stored payload is the
// whole event body. An event name it cannot record is an error wrapping
// errAdapterConfig.
func newStripeAdapter(rules *inputRules, events []string) (adapter, error) {
	if len(events) == 0 {
		events = []string{"payment_intent.succeeded"}
	}
	a := stripeAdapter{rules: rules, events: make(map[string]stripeRecord, len(events))}
	for _, e := range events {
		rec, ok := stripeRecords[e]
		if !ok {
			known := make([]string, 0, len(stripeRecords))
			for k := range stripeRecords {
				known = append(known, k)
			}
			slices.Sort(known)
			return nil, fmt.Errorf("%w: stripe event %q cannot be recorded (known: %s)",
				errAdapterConfig, e, strings.Join(known, ", "))
		}
		a.events[e] = rec
	}
	return a, nil
}

func (a stripeAdapter) adapt(body []byte, _ string) ([]store.Payment, error) {
	root, err := decodeStrict(body)
	if err != nil {
		return nil, err
	}
	object, _, err := root.requiredString("", "object")
	if err != nil {
		return nil, err
	}
	if object != "event" {
		return nil, payload.Invalid("object", `object must be "event" (a Stripe Event)`)
	}
	eventID, _, err := root.requiredString("", "id")
	if err != nil {
		return nil, err
	}
	typ, _, err := root.requiredString("", "type")
	if err != nil {
		return nil, err
	}
	rec, ok := a.events[typ]
	if !ok {
		return nil, nil
	}
	obj, objName, err := root.requiredObject("", "data", "object")
	if err != nil {
		return nil, err
	}
	kind, kindName, err := obj.requiredString(objName, "object")
	if err != nil {
		return nil, err
	}
	if kind != rec.object {
		return nil, payload.Invalid(kindName, fmt.Sprintf("%s must be %q for a %s event", kindName, rec.object, typ))
	}
	if _, both := a.events["payment_intent.succeeded"]; both && typ == "charge.succeeded" {
		pi, _, err := obj.child(objName, "payment_intent")
		if err != nil {
			return nil, err
		}
		if pi != nil && pi.kind != jsonNull {
			return nil, nil
		}
	}
	p := store.Payment{Payload: body, EventID: eventID}
	var txName, amountName, currencyName string
	if p.TransactionID, txName, err = obj.requiredString(objName, "id"); err != nil {
		return nil, err
	}
	if p.Amount, amountName, err = obj.requiredAmount(objName, rec.amount); err != nil {
		return nil, err
	}
	if p.Currency, currencyName, err = obj.requiredString(objName, "currency"); err != nil {
		return nil, err
	}
	p.Currency = asciiUpper(p.Currency)
	err = a.rules.checkPayment(p, paymentFields{
		"transaction_id": txName, "amount": amountName, "currency": currencyName, "event_id": "id",
	})
	if err != nil {
		return nil, err
	}
	return []store.Payment{p}, nil
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
