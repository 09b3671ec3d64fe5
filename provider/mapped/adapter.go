package mapped

import (
	"fmt"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// adapter reads any JSON object body through the configured pointers.
//
// transaction_id and currency must resolve to JSON strings and amount to a
// JSON integer in minor units; a pointer that resolves to nothing or to
// another type is a 422 whose field is the pointer. Values are taken as
// they are: a lower-case currency or a transaction id with spaces is
// refused, never changed. The event id is the string at the event_id
// pointer when one is configured (it must then resolve), else the
// delivery's header id (webhook-id), else none. The stored payload is the
// whole body. The body is one payment: zero events are never returned.
type adapter struct {
	rules                  *payload.Rules
	txID, amount, currency payload.Pointer
	eventID                *payload.Pointer
	typ, refundID          *payload.Pointer  // nil: every body is a payment
	types                  map[string]string // the sender's type -> paylock's; nil: paylock's own
	names                  payload.Names     // field -> its pointer, for errors
}

// kinds are paylock's type names and the events they are.
var kinds = map[string]lifecycle.Kind{
	"payment": lifecycle.Succeeded, "refund": lifecycle.Refund,
	"failed": lifecycle.Failed, "canceled": lifecycle.Canceled,
}

func (a adapter) Adapt(body []byte, headerID string) ([]provider.Event, error) {
	root, err := payload.Decode(body)
	if err != nil {
		return nil, err
	}
	e := provider.Event{Payload: body, EventID: headerID}
	kind, ok, err := a.kind(root)
	if err != nil || !ok {
		return nil, err
	}
	if e.TransactionID, err = a.str(root, a.txID); err != nil {
		return nil, err
	}
	if e.Amount, err = a.integer(root, a.amount); err != nil {
		return nil, err
	}
	if e.Currency, err = a.str(root, a.currency); err != nil {
		return nil, err
	}
	if a.eventID != nil {
		if e.EventID, err = a.str(root, *a.eventID); err != nil {
			return nil, err
		}
	}
	if err := a.rules.CheckPayment(e.Payment(), a.names); err != nil {
		return nil, err
	}
	if kind != lifecycle.Succeeded {
		if err := a.lifecycleEvent(root, kind, &e); err != nil {
			return nil, err
		}
	}
	return []provider.Event{e}, nil
}

// kind is what the body is: a payment without the type field or when its
// pointer resolves to nothing, else the kind its type value names (ok false: a type the types setting does not
// list, acknowledged and written nowhere).
func (a adapter) kind(root *payload.Node) (lifecycle.Kind, bool, error) {
	if a.typ == nil {
		return lifecycle.Succeeded, true, nil
	}
	if n, err := a.typ.Resolve(root); err != nil || n == nil {
		return lifecycle.Succeeded, err == nil, err // no type: a payment
	}
	v, err := a.str(root, *a.typ)
	if err != nil {
		return "", false, err
	}
	if a.types != nil {
		name, ok := a.types[v]
		return kinds[name], ok, nil
	}
	k, ok := kinds[v]
	if !ok {
		return "", false, payload.Invalid(a.typ.String(), a.typ.String()+` must be "payment", "refund", "failed" or "canceled"`)
	}
	return k, true, nil
}

// lifecycleEvent completes e, a lifecycle event of kind k: a refund's id
// (required for a refund), and an event id when neither the event_id
// pointer nor the delivery gave one ("refund:<refund_id>",
// "failed:<transaction_id>", "canceled:<transaction_id>").
func (a adapter) lifecycleEvent(root *payload.Node, k lifecycle.Kind, e *provider.Event) error {
	e.Kind = k
	if k == lifecycle.Refund {
		if a.refundID == nil {
			return payload.Invalid("refund_id", "a refund needs fields.refund_id, the pointer of its id")
		}
		id, err := a.str(root, *a.refundID)
		if err != nil {
			return err
		}
		if id == "" || len(id) > 255 {
			return payload.Invalid(a.refundID.String(), a.refundID.String()+" must be 1 to 255 characters")
		}
		e.RefundID = id
	}
	if e.EventID == "" {
		e.EventID = string(k) + ":" + e.TransactionID
		if e.RefundID != "" {
			e.EventID = "refund:" + e.RefundID
		}
	}
	return nil
}

// value resolves ptr, refusing a pointer that resolves to nothing or to a
// value of another kind than want.
func (a adapter) value(root *payload.Node, ptr payload.Pointer, want payload.Kind) (*payload.Node, error) {
	n, err := ptr.Resolve(root)
	switch {
	case err != nil:
		return nil, err
	case n == nil:
		return nil, payload.Invalid(ptr.String(), "the pointer "+ptr.String()+" resolves to nothing in this body")
	case n.Kind() != want:
		return nil, payload.Invalid(ptr.String(), fmt.Sprintf("%s must be %s, not %s", ptr, want, n.Kind()))
	}
	return n, nil
}

func (a adapter) str(root *payload.Node, ptr payload.Pointer) (string, error) {
	n, err := a.value(root, ptr, payload.String)
	if err != nil {
		return "", err
	}
	return n.Text(), nil
}

// integer reads an amount under payload.DecodeAmount's rules.
func (a adapter) integer(root *payload.Node, ptr payload.Pointer) (int64, error) {
	n, err := a.value(root, ptr, payload.Number)
	if err != nil {
		return 0, err
	}
	var v int64
	var set bool
	if err := payload.DecodeAmount(ptr.String(), &v, &set)(n.Raw()); err != nil {
		return 0, err
	}
	return v, nil
}

// Kept keeps the body whole, keyed by its hash as any body is, and typed
// by the value at the type pointer (provider.Keeper), so that an ignored
// delivery's answer, log line and delivery-log row name the sender's type
// wherever its body holds it; without a type field, by a top-level "type"
// string, as the delivery log types any body.
func (a adapter) Kept(body []byte) []provider.Kept {
	k := provider.Kept{Body: body}
	root, err := payload.Decode(body)
	if err != nil {
		return []provider.Kept{k}
	}
	ptr := payload.Pointer{}
	if a.typ != nil {
		ptr = *a.typ
	} else if ptr, err = payload.ParsePointer("/type"); err != nil {
		return []provider.Kept{k}
	}
	if n, err := ptr.Resolve(root); err == nil && n != nil && n.Kind() == payload.String {
		k.EventType, _ = a.str(root, ptr)
	}
	return []provider.Kept{k}
}
