package handler

import (
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/store"
)

// An adapter turns one verified delivery body into the payments it carries.
//
// adapt returns zero or more payments (zero: nothing in the delivery is a
// payment to record, and the delivery is acknowledged with 200 "ignored"),
// or an error for writeError, normally a 4xx *problem. headerID is the
// delivery id taken from the signature headers (webhook-id), "" when the
// scheme carries none. Every returned payment has passed checkPayment; the
// pipeline sets its Source. Adapters are safe for concurrent use.
type adapter interface {
	adapt(body []byte, headerID string) ([]store.Payment, error)
}

// acknowledger is implemented by adapters whose provider expects a 2xx
// answer of its own shape (Adyen's literal "[accepted]"), written once
// every payment of the delivery is confirmed recorded, duplicate or ignored.
type acknowledger interface {
	acknowledge() (contentType string, body []byte)
}

// paylockAdapter reads paylock's own flat body
// {"transaction_id","amount","currency"}.
type paylockAdapter struct{ rules *inputRules }

func (a paylockAdapter) adapt(body []byte, headerID string) ([]store.Payment, error) {
	in, err := a.rules.decodePayment(body)
	if err != nil {
		return nil, err
	}
	eventID := headerID
	if eventID == "" {
		eventID = in.EventID
	}
	return []store.Payment{{
		TransactionID: in.TransactionID, Amount: in.Amount, Currency: in.Currency,
		Payload: body, EventID: eventID,
	}}, nil
}

// checkPayment applies the payment body's validation rules to what an
// adapter extracted: a transaction id of 1 to 255 printable ASCII
// characters, an amount in minor units greater than 0, an upper-case ISO
// 4217 currency accepted here, an event id of at most 255 characters. Its
// errors are 422 problems naming field (the name in the provider's payload,
// such as "data.object.amount_received").
func (r *inputRules) checkPayment(p store.Payment, fields paymentFields) error {
	in := paymentInput{TransactionID: p.TransactionID, Amount: p.Amount, Currency: p.Currency}
	if err := r.check(in); err != nil {
		return payload.Renamed(err, fields)
	}
	if len(p.EventID) > 255 {
		return payload.Invalid(fields.name("event_id"), fields.name("event_id")+" must be at most 255 characters")
	}
	return nil
}

// paymentFields names, for error messages, where in a provider's payload
// each of a payment's fields came from; a missing entry keeps paylock's own
// name.
type paymentFields map[string]string

func (f paymentFields) name(field string) string {
	if n, ok := f[field]; ok {
		return n
	}
	return field
}
