package mapped

import (
	"fmt"

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
	names                  payload.Names // field -> its pointer, for errors
}

func (a adapter) Adapt(body []byte, headerID string) ([]provider.Event, error) {
	root, err := payload.Decode(body)
	if err != nil {
		return nil, err
	}
	e := provider.Event{Payload: body, EventID: headerID}
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
	return []provider.Event{e}, nil
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
