package stripe

import (
	"bytes"
	"errors"
	"strings"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// KeyThin is the sources-file key of a source whose deliveries are
// Stripe's thin events (an event destination with the thin payload,
// https://docs.stripe.com/event-destinations#thin-events): true or false,
// default false. A thin source receives thin events only; its adapter is a
// provider.Notifier (thinAdapter), so the pipeline fetches each
// PaymentIntent a thin event names with the source's Fetcher (api_key_env
// must name its secret key) and records what Stripe's API answers.
//
// A thin source's events, when set, must list payment_intent.succeeded:
// without it the source files its payments under their Charge's id,
// while a thin event names (and the pipeline locks) the PaymentIntent.
// The types it lists are honoured as for any source: a fetched
// PaymentIntent whose event type is not listed is acknowledged and written
// nowhere.
const KeyThin = "thin"

// thinObject is the object of a thin event (a v2 Event).
const thinObject = "v2.core.event"

// errThinByCharge is a thin source's events setting without
// payment_intent.succeeded.
var errThinByCharge = errors.New("a thin source must list " + defaultEvent +
	": thin events name PaymentIntents, which a source of Charges (charge.succeeded alone) files nowhere")

// thinSetting is the source's thin setting (false when absent), or a
// *provider.SettingError for any value but true or false.
func thinSetting(s provider.Settings) (bool, error) {
	raw, ok := s[KeyThin]
	if !ok {
		return false, nil
	}
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, &provider.SettingError{Key: KeyThin, Err: errors.New("want true (the source receives thin events) or false")}
}

// thinAdapter is the adapter of a thin source, a provider.Notifier.
//
// Notices reads a thin event (a v2 Event as an event destination sends
// it: https://docs.stripe.com/api/v2/core/events/object) strictly, as
// payload.Decode does (no repeated key, no case-variant spelling of a
// member it reads), and requires object "v2.core.event", an id evt_...,
// a type, and, when related_object is not null, its id and type. Members
// it does not read (created, livemode, reason, changes, snapshot_event,
// related_object.url...) may be anything: a thin payload is unversioned
// and grows. Then:
//
//   - a thin event whose related_object is a PaymentIntent (type
//     "payment_intent", id pi_...) names that payment: one notice, Ref the
//     PaymentIntent's id, EventID the event's id, Type its type
//     (v1.payment_intent.succeeded...). Every type does (created,
//     processing, requires_action too): the fetch answers the
//     PaymentIntent's state now, and one that is not final records
//     nothing;
//   - any other related object (a Charge, a Refund, a Dispute, a billing
//     Meter, a v2 resource), none (related_object null or absent), or a
//     PaymentIntent of another account (context not null: a Connect
//     event, which the source's Fetcher, asking without Stripe-Context,
//     cannot read) names nothing: no notice, acknowledged "ignored". A
//     thin source's refunds and disputes are therefore recorded by
//     reconciliation (GET /v1/events lists them as snapshot events, which
//     Adapt reads), not by its webhooks;
//   - a snapshot event (object "event") is refused with 422: the source
//     takes thin events, and a snapshot's amounts are never recorded from
//     a webhook of it.
//
// Adapt is the snapshot adapter's (adapter.Adapt): a thin source's Adapt
// is given only what Stripe's API answers, the fetcher's
// sync:<pi>:<status> events and reconciliation's listed events, which are
// snapshot events. Types is the snapshot adapter's too.
type thinAdapter struct {
	adapter
}

// Notices returns the PaymentIntent body names, if any; headerID is
// unused (Stripe-Signature carries no delivery id).
func (a thinAdapter) Notices(body []byte, _ string) ([]provider.Notice, error) {
	root, err := payload.Decode(body)
	if err != nil {
		return nil, err
	}
	object, objectName, err := root.RequiredString("", "object")
	if err != nil {
		return nil, err
	}
	switch object {
	case thinObject:
	case "event":
		return nil, payload.Invalid(objectName, `object is "event", a snapshot event: this source takes Stripe's thin events (object "`+
			thinObject+`"); send snapshot events to a source without thin`)
	default:
		return nil, payload.Invalid(objectName, `object must be "`+thinObject+`" (a Stripe thin event)`)
	}
	eventID, idName, err := root.RequiredString("", "id")
	if err != nil {
		return nil, err
	}
	if !stripeID(eventID, "evt_") {
		return nil, payload.Invalid(idName, idName+" must be a Stripe event id (evt_...) of at most 255 characters")
	}
	typ, typeName, err := root.RequiredString("", "type")
	if err != nil {
		return nil, err
	}
	if typ == "" || len(typ) > 255 || strings.ContainsFunc(typ, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return nil, payload.Invalid(typeName, typeName+" must be an event type of 1 to 255 printable ASCII characters")
	}
	account, accountName, err := root.Child("", "context")
	if err != nil {
		return nil, err
	}
	if account != nil && account.Kind() != payload.Null && account.Kind() != payload.String {
		return nil, payload.Malformed(accountName, accountName+" must be a JSON string or null")
	}
	related, relatedName, err := root.Child("", "related_object")
	switch {
	case err != nil:
		return nil, err
	case related == nil || related.Kind() == payload.Null:
		return nil, nil
	case related.Kind() != payload.Object:
		return nil, payload.Malformed(relatedName, relatedName+" must be a JSON object or null")
	}
	relatedType, _, err := related.RequiredString(relatedName, "type")
	if err != nil {
		return nil, err
	}
	ref, refName, err := related.RequiredString(relatedName, "id")
	if err != nil {
		return nil, err
	}
	if relatedType != "payment_intent" {
		return nil, nil
	}
	if !stripeID(ref, "pi_") {
		return nil, payload.Invalid(refName, refName+" must be a PaymentIntent's id (pi_...) of at most 255 characters")
	}
	if account != nil && account.Kind() == payload.String && account.Text() != "" {
		return nil, nil
	}
	return []provider.Notice{{Ref: ref, EventID: eventID, Type: typ}}, nil
}

// stripeID reports whether id is a Stripe id with prefix: the prefix, then
// letters, digits and underscores, 255 characters at most.
func stripeID(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || rest == "" || len(id) > 255 {
		return false
	}
	for _, c := range rest {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
