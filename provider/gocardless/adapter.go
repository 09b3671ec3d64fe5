package gocardless

import (
	"strconv"
	"strings"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// adapter is a gocardless source's provider.Notifier: Notices reads
// GoCardless's webhooks (notices.go), Adapt the payments the fetcher
// brings from GoCardless's API. It is safe for concurrent use.
type adapter struct {
	rules *payload.Rules
}

// Adapt reads a payment as the fetcher returns it (fetch.go), GoCardless's
// answers to GET /payments/{id} and GET /refunds?payment={id} side by
// side:
//
//	{"payments": {"id": "PM...", "amount": 1000, "currency": "GBP",
//	              "status": "confirmed", "metadata": {...}, ...},
//	 "refunds": [{"id": "RF...", "amount": 500, "currency": "GBP",
//	              "status": "paid", "links": {"payment": "PM..."}, ...}]}
//
// and returns the events its state records (lifecycle.go): first the
// payment's, then each refund's in the order listed, every one under the
// payment's id, checked with the source's rules. Amounts are in minor
// units (payments.amount, a refund's own amount), currencies upper-cased.
// Every event's payload is the whole body, so that the order pointer
// (/payments/metadata/order_id) reads the payment whichever event
// recorded it first; At is zero, since the API says when a payment was
// created, not when it reached its status. A webhook body (events) is
// refused: only the API's answers are recorded.
func (a adapter) Adapt(body []byte, _ string) ([]provider.Event, error) {
	root, err := payload.Decode(body)
	if err != nil {
		return nil, err
	}
	pay, payName, err := root.RequiredObject("", "payments")
	if err != nil {
		return nil, err
	}
	p, err := a.payment(pay, payName)
	if err != nil {
		return nil, err
	}
	refunds, err := requiredArray(root, "refunds")
	if err != nil {
		return nil, err
	}
	var out []provider.Event
	for _, kind := range paymentStatuses[p.status] {
		e := provider.Event{Kind: kind, TransactionID: p.id, Amount: p.amount, Currency: p.currency,
			EventID: p.id + ":" + p.status, Payload: body}
		switch kind {
		case lifecycle.Succeeded:
			e.Kind, e.EventID = "", p.id+":"+successStatus
		case lifecycle.DisputeLost:
			e.Stage = chargebackStage
		}
		out = append(out, e)
	}
	for i, r := range refunds.Items() {
		e, ok, err := a.refund(r, "refunds["+strconv.Itoa(i)+"]", p.id)
		if err != nil {
			return nil, err
		}
		if ok {
			e.Payload = body
			out = append(out, e)
		}
	}
	return out, nil
}

// fetched is what Adapt reads of the payment.
type fetched struct {
	id, status, currency string
	amount               int64
}

// payment reads the payment object pay, named name, and checks it with
// the source's rules.
func (a adapter) payment(pay *payload.Node, name string) (fetched, error) {
	var p fetched
	names := payload.Names{}
	var err error
	if p.id, names["transaction_id"], err = pay.RequiredString(name, "id"); err != nil {
		return p, err
	}
	if !paymentID.MatchString(p.id) {
		return p, payload.Invalid(names["transaction_id"], names["transaction_id"]+" must be a GoCardless payment id (PM...)")
	}
	names["event_id"] = names["transaction_id"]
	if p.status, err = statusOf(pay, name); err != nil {
		return p, err
	}
	if p.amount, names["amount"], err = pay.RequiredAmount(name, "amount"); err != nil {
		return p, err
	}
	if p.currency, names["currency"], err = pay.RequiredString(name, "currency"); err != nil {
		return p, err
	}
	p.currency = strings.ToUpper(p.currency)
	eventID := p.id + ":" + p.status
	return p, a.rules.CheckPayment(payload.Payment{TransactionID: p.id, Amount: p.amount, Currency: p.currency, EventID: eventID}, names)
}

// refund reads refund r, named name, of the payment payment: its event,
// or ok false when its status records nothing. A refund of another
// payment is refused.
func (a adapter) refund(r *payload.Node, name, payment string) (e provider.Event, ok bool, err error) {
	if r.Kind() != payload.Object {
		return e, false, payload.Malformed(name, name+" must be a JSON object")
	}
	names := payload.Names{}
	var id, status, linked string
	if id, names["event_id"], err = r.RequiredString(name, "id"); err != nil {
		return e, false, err
	}
	if !refundID.MatchString(id) {
		return e, false, payload.Invalid(names["event_id"], names["event_id"]+" must be a GoCardless refund id (RF...)")
	}
	if linked, names["transaction_id"], err = r.RequiredString(name, "links", "payment"); err != nil {
		return e, false, err
	}
	if linked != payment {
		return e, false, payload.Invalid(names["transaction_id"], names["transaction_id"]+" must be the payment's id: a refund of another payment")
	}
	if status, err = statusOf(r, name); err != nil {
		return e, false, err
	}
	e = provider.Event{TransactionID: payment, RefundID: id, EventID: id + ":" + status}
	if e.Amount, names["amount"], err = r.RequiredAmount(name, "amount"); err != nil {
		return e, false, err
	}
	if e.Currency, names["currency"], err = r.RequiredString(name, "currency"); err != nil {
		return e, false, err
	}
	e.Currency = strings.ToUpper(e.Currency)
	if err := a.rules.CheckPayment(e.Payment(), names); err != nil {
		return e, false, err
	}
	e.Kind, ok = refundStatuses[status]
	return e, ok, nil
}

// statusOf is the status of the payment or refund n, named name: a
// lower-case token (one this package does not know records nothing).
func statusOf(n *payload.Node, name string) (string, error) {
	status, statusName, err := n.RequiredString(name, "status")
	if err == nil && !token.MatchString(status) {
		err = payload.Invalid(statusName, statusName+" must be a lower-case token (confirmed, paid_out, ...)")
	}
	return status, err
}

// requiredArray is the array member key of root: ErrInvalid when absent,
// ErrMalformed when another type.
func requiredArray(root *payload.Node, key string) (*payload.Node, error) {
	n, name, err := root.Child("", key)
	switch {
	case err != nil:
		return nil, err
	case n == nil:
		return nil, payload.Invalid(name, name+" is required")
	case n.Kind() != payload.Array:
		return nil, payload.Malformed(name, name+" must be a JSON array")
	}
	return n, nil
}
