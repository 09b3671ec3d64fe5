package gocardless

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// MaxEvents is the most events a webhook body may carry: GoCardless sends
// at most 250 in one request.
const MaxEvents = 250

// Notices reads a GoCardless webhook:
//
//	{"events": [{"id": "EV...", "created_at": "2025-...Z",
//	             "resource_type": "payments", "action": "confirmed",
//	             "links": {"payment": "PM..."},
//	             "details": {"origin": "gocardless", "cause": "payment_confirmed", ...},
//	             "metadata": {}, "resource_metadata": {...}}, ...],
//	 "meta": {"webhook_id": "WB..."}}
//
// and returns the payments its events name, in order, each once (a batch
// often holds several events of one payment, which one fetch answers),
// with the first naming event's id and type (payments.confirmed):
//
//   - a payments event names links.payment;
//   - a refunds event names links.payment when it links the payment, and
//     else its refund, links.refund (GoCardless documents links.refund
//     alone for refund events): the fetcher takes a refund id and fetches
//     the refund's payment, so that the events are recorded under the
//     payment's id all the same (a refund of a mandate links no payment:
//     its fetch is an unknown payment). The pipeline then locks the
//     refund's ref, not the payment's: a fetch of the payment at the same
//     time may record the same events, which the database records once
//     (their ids are the state's);
//   - every other resource type (mandates, payouts, subscriptions,
//     billing_requests, ...) names nothing: a body of those alone is
//     acknowledged "ignored".
//
// Every event must have an id (EV...), a resource_type and an action
// (lower-case tokens); an id GoCardless would not send is refused, as is a
// body of more than MaxEvents events or without its events array. Nothing
// else of the body is read: what is recorded is what GoCardless's API
// answers, never what a webhook says.
func (adapter) Notices(body []byte, _ string) ([]provider.Notice, error) {
	root, err := payload.Decode(body)
	if err != nil {
		return nil, err
	}
	events, err := requiredArray(root, "events")
	if err != nil {
		return nil, err
	}
	if n := len(events.Items()); n > MaxEvents {
		return nil, payload.Invalid("events", fmt.Sprintf("events holds %d events: GoCardless sends at most %d in one webhook", n, MaxEvents))
	}
	var out []provider.Notice
	for i, ev := range events.Items() {
		n, ok, err := noticeOf(ev, "events["+strconv.Itoa(i)+"]")
		if err != nil {
			return nil, err
		}
		if ok && !slices.ContainsFunc(out, func(o provider.Notice) bool { return o.Ref == n.Ref }) {
			out = append(out, n)
		}
	}
	return out, nil
}

// noticeOf reads event ev, named name: the notice of the payment it
// names, ok false when it names none.
func noticeOf(ev *payload.Node, name string) (n provider.Notice, ok bool, err error) {
	if ev.Kind() != payload.Object {
		return n, false, payload.Malformed(name, name+" must be a JSON object")
	}
	id, idName, err := ev.RequiredString(name, "id")
	if err != nil {
		return n, false, err
	}
	if !eventID.MatchString(id) {
		return n, false, payload.Invalid(idName, idName+" must be a GoCardless event id (EV...)")
	}
	var typ [2]string
	for i, key := range []string{"resource_type", "action"} {
		v, vName, err := ev.RequiredString(name, key)
		if err != nil {
			return n, false, err
		}
		if !token.MatchString(v) {
			return n, false, payload.Invalid(vName, vName+" must be a lower-case token")
		}
		typ[i] = v
	}
	n = provider.Notice{EventID: id, Type: typ[0] + "." + typ[1]}
	switch typ[0] {
	case "payments":
		n.Ref, err = linked(ev, name, "payment", paymentID, true)
	case "refunds":
		if n.Ref, err = linked(ev, name, "payment", paymentID, false); err == nil && n.Ref == "" {
			n.Ref, err = linked(ev, name, "refund", refundID, true)
		}
	default:
		return n, false, nil
	}
	if err != nil {
		return provider.Notice{}, false, err
	}
	return n, true, nil
}

// linked is the id at links.key of event ev, named name, which must match
// shape: ErrInvalid when required and absent (links included), or when
// another id; ErrMalformed when not a string. "" when absent and not
// required.
func linked(ev *payload.Node, name, key string, shape *regexp.Regexp, required bool) (string, error) {
	c, cName, err := ev.Child(name, "links", key)
	switch {
	case err != nil:
		return "", err
	case c == nil && required:
		return "", payload.Invalid(cName, cName+" is required")
	case c == nil:
		return "", nil
	case c.Kind() != payload.String:
		return "", payload.Malformed(cName, cName+" must be a JSON string")
	case !shape.MatchString(c.Text()):
		return "", payload.Invalid(cName, cName+" is not a GoCardless "+key+" id")
	}
	return c.Text(), nil
}
