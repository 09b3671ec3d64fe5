package checkout

import (
	"time"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// adapter reads a Checkout.com webhook event:
//
//	{"id": "evt_...", "type": "payment_captured", "created_on": "2025-...Z",
//	 "data": {"id": "pay_...", "action_id": "act_...", "amount": 6540,
//	          "currency": "USD", "reference": "ORD-5023", ...}, "_links": {...}}
//
// and records one lifecycle event of the payment data.id (a dispute's
// data.payment_id): the event id is the event's "id" (Cko-Signature's
// headers carry none, and Checkout.com resends an event with the same
// id), the amount data.amount in minor units, the currency data.currency
// (upper-case ISO 4217), a capture's or a refund's own id its
// data.action_id, a dispute outcome's stage its type's (records), the date
// created_on (signed, as the whole body is). The stored payload is the
// whole body. Every other event type is acknowledged and written nowhere.
type adapter struct {
	rules *payload.Rules
}

func (a adapter) Adapt(body []byte, _ string) ([]provider.Event, error) {
	root, err := payload.Decode(body)
	if err != nil {
		return nil, err
	}
	eventID, _, err := root.RequiredString("", "id")
	if err != nil {
		return nil, err
	}
	typ, _, err := root.RequiredString("", "type")
	if err != nil {
		return nil, err
	}
	rec, ok := recordOf(typ)
	if !ok {
		return nil, nil
	}
	data, dataName, err := root.RequiredObject("", "data")
	if err != nil {
		return nil, err
	}
	e, err := a.event(data, dataName, rec, eventID)
	if err != nil {
		return nil, err
	}
	if e.At, err = createdOn(root); err != nil {
		return nil, err
	}
	e.Payload = body
	return []provider.Event{e}, nil
}

// recordOf is what type typ records; ok false for a type not recorded.
func recordOf(typ string) (record, bool) {
	for _, r := range records {
		if r.typ == typ {
			return r.record, true
		}
	}
	return record{}, false
}

// event reads the payment, amount and action of data and checks them with
// the source's rules, naming each field where the event holds it.
func (a adapter) event(data *payload.Node, dataName string, rec record, eventID string) (provider.Event, error) {
	e := provider.Event{Kind: rec.kind, EventID: eventID, Stage: rec.stage}
	names := payload.Names{"event_id": "id"}
	payment := "id"
	if rec.dispute {
		payment = "payment_id"
	}
	var err error
	if e.TransactionID, names["transaction_id"], err = data.RequiredString(dataName, payment); err != nil {
		return e, err
	}
	if e.Amount, names["amount"], err = data.RequiredAmount(dataName, "amount"); err != nil {
		return e, err
	}
	if e.Currency, names["currency"], err = data.RequiredString(dataName, "currency"); err != nil {
		return e, err
	}
	switch rec.kind {
	case lifecycle.Captured, lifecycle.CaptureFailed:
		e.CaptureID, _, err = data.RequiredString(dataName, "action_id")
	case lifecycle.Refund, lifecycle.RefundFailed:
		e.RefundID, _, err = data.RequiredString(dataName, "action_id")
	}
	if err != nil {
		return e, err
	}
	return e, a.rules.CheckPayment(e.Payment(), names)
}

// createdOn is the event's created_on, an RFC 3339 time; zero when absent.
func createdOn(root *payload.Node) (time.Time, error) {
	n, name, err := root.Child("", "created_on")
	if err != nil || n == nil || n.Kind() == payload.Null {
		return time.Time{}, err
	}
	if n.Kind() != payload.String {
		return time.Time{}, payload.Malformed(name, name+" must be a string (an RFC 3339 time)")
	}
	t, err := time.Parse(time.RFC3339Nano, n.Text())
	if err != nil {
		return time.Time{}, payload.Invalid(name, name+" must be an RFC 3339 time")
	}
	return t.UTC(), nil
}

// Types are every event type a Checkout.com source records, in records'
// order (provider.Typed); a source records them all.
func (a adapter) Types() []provider.EventType {
	out := make([]provider.EventType, len(records))
	for i, r := range records {
		out[i] = provider.EventType{Name: r.typ, Kind: r.kind, Recorded: true}
	}
	return out
}
