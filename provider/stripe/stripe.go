// Package stripe is the Stripe provider, registered as "stripe": Stripe
// Events (https://docs.stripe.com/api/events/object) signed with Stripe's
// scheme (Stripe-Signature; Standard Webhooks is accepted too), the
// sources-file key events (which event types a source records), and the
// listing of past events through Stripe's API (GET /v1/events) that
// reconciliation uses. A source with the key thin receives Stripe's thin
// events (https://docs.stripe.com/event-destinations#thin-events) instead:
// each names a PaymentIntent that paylock fetches from Stripe's API
// (thin.go).
package stripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

func init() { provider.Register("stripe", Provider{}) }

// Provider is Stripe.
type Provider struct{}

// record says how a Stripe event type carries a payment or an event of its
// lifecycle: the type of its data.object (which also says how it names its
// payment: adapter.paymentOf), the member holding the amount, and the
// lifecycle kind ("" for a payment that succeeded; a Refund's status
// decides its own).
type record struct {
	object string
	amount string
	kind   lifecycle.Kind
}

// records are the Stripe event types a source may record, in the order
// messages list them. The shapes are stripe-go's (stripe.Event,
// stripe.PaymentIntent, stripe.Charge); signature/compat checks the
// samples against them.
var records = []struct {
	typ string
	record
}{
	{"payment_intent.succeeded", record{object: "payment_intent", amount: "amount_received"}},
	{"charge.succeeded", record{object: "charge", amount: "amount"}},
	{"payment_intent.amount_capturable_updated", record{object: "payment_intent", amount: "amount_capturable", kind: lifecycle.Authorized}},
	{"charge.captured", record{object: "charge", amount: "amount_captured", kind: lifecycle.Captured}},
	{"payment_intent.payment_failed", record{object: "payment_intent", amount: "amount", kind: lifecycle.Failed}},
	{"payment_intent.canceled", record{object: "payment_intent", amount: "amount", kind: lifecycle.Canceled}},
	{"charge.expired", record{object: "charge", amount: "amount", kind: lifecycle.Canceled}},
	{"charge.refunded", record{object: "charge", amount: "amount_refunded", kind: lifecycle.Refund}},
	{"refund.created", record{object: "refund", amount: "amount", kind: lifecycle.Refund}},
	{"refund.updated", record{object: "refund", amount: "amount", kind: lifecycle.Refund}},
	{"refund.failed", record{object: "refund", amount: "amount", kind: lifecycle.Refund}},
	{"charge.refund.updated", record{object: "refund", amount: "amount", kind: lifecycle.Refund}},
	{"charge.dispute.created", record{object: "dispute", amount: "amount", kind: lifecycle.DisputeOpened}},
	{"charge.dispute.closed", record{object: "dispute", amount: "amount", kind: lifecycle.DisputeWon}},
}

// defaultEvent is the payment a source records when its settings name no
// events; it records every lifecycle event type too (lifecycleEvents).
const defaultEvent = "payment_intent.succeeded"

// lifecycleEvents are the event types of a payment's lifecycle after (or
// instead of) its success.
func lifecycleEvents() []string {
	var out []string
	for _, r := range records {
		if r.kind != "" {
			out = append(out, r.typ)
		}
	}
	return out
}

// Schemes are Stripe's, then Standard Webhooks.
func (Provider) Schemes() []signature.Scheme {
	return []signature.Scheme{signature.SchemeStripe, signature.SchemeStandard}
}

// OrderPointer: a Stripe Event names its order in the PaymentIntent's or
// Charge's metadata (provider.OrderNamer).
func (Provider) OrderPointer() string { return "/data/object/metadata/order_id" }

// Keys: events, the event types the source records (default
// payment_intent.succeeded and every lifecycle type:
// payment_intent.amount_capturable_updated, charge.captured,
// payment_intent.payment_failed, payment_intent.canceled, charge.expired,
// charge.refunded, refund.created, refund.updated, refund.failed,
// charge.refund.updated, charge.dispute.created, charge.dispute.closed);
// every other type is acknowledged and written nowhere. Stripe needs no
// capture mode: its events say whether money was held
// (amount_capturable_updated) or taken (payment_intent.succeeded's
// amount_received, charge.captured).
//
// api_key_env and api_url are its status API's (sync): the environment
// variable holding the secret key, and the base URL (default
// https://api.stripe.com).
//
// thin (true or false, default false): the source's deliveries are thin
// events, which paylock records only as Stripe's API answers the
// PaymentIntent each names (KeyThin).
func (Provider) Keys() []string {
	return []string{"events", provider.KeyAPIKeyEnv, provider.KeyAPIURL, KeyThin}
}

// KeyDocs says what Keys mean (provider.Documented).
func (Provider) KeyDocs() []provider.KeyDoc {
	return append(append([]provider.KeyDoc{
		{Key: "events", Doc: "the event types the source records (default: `payment_intent.succeeded` and every lifecycle type); any other type is acknowledged `ignored` and kept in the delivery log"},
	}, provider.APIKeyDocs("the secret key (`sk_…`; default `STRIPE_API_KEY`)", "for syncs, the janitor and reconciliation; required with `thin`", DefaultURL)...),
		provider.KeyDoc{Key: KeyThin, Doc: "`true`: the source receives thin events (`v2.core.event`), each recorded as Stripe's API answers the PaymentIntent it names (default `false`)"})
}

// New returns the adapter of s's events, or a *provider.SettingError for
// events that are not a list of the known types, empty or repeated, or a
// thin that is not a boolean. A thin source's adapter is a
// provider.Notifier (thinAdapter).
func (Provider) New(cfg provider.Config) (provider.Adapter, error) {
	events, err := eventTypes(cfg.Settings)
	if err != nil {
		return nil, err
	}
	a := adapter{rules: cfg.Rules, events: make(map[string]record, len(events))}
	a.byCharge = slices.Contains(events, "charge.succeeded") && !slices.Contains(events, defaultEvent)
	for _, e := range events {
		for _, r := range records {
			if r.typ == e {
				a.events[e] = r.record
			}
		}
	}
	if thin, _ := thinSetting(cfg.Settings); thin {
		return thinAdapter{a}, nil
	}
	return a, nil
}

// eventTypes are the event types settings name, or the default, once
// every setting is checked.
func eventTypes(s provider.Settings) ([]string, error) {
	if err := s.Only("events", provider.KeyAPIKeyEnv, provider.KeyAPIURL, KeyThin); err != nil {
		return nil, err
	}
	if err := checkAPI(s); err != nil {
		return nil, err
	}
	thin, err := thinSetting(s)
	if err != nil {
		return nil, err
	}
	raw, ok := s["events"]
	if !ok {
		return append([]string{defaultEvent}, lifecycleEvents()...), nil
	}
	fail := func(err error) error { return &provider.SettingError{Key: "events", Err: err} }
	var events []string
	if err := json.Unmarshal(raw, &events); err != nil {
		return nil, fail(errors.New("want a list of event types"))
	}
	if len(events) == 0 {
		return nil, fail(errors.New("empty: omit it for the default, " + defaultEvent + " and every lifecycle event"))
	}
	known := make([]string, len(records))
	for i, r := range records {
		known[i] = r.typ
	}
	for i, e := range events {
		if !slices.Contains(known, e) {
			return nil, fail(fmt.Errorf("unknown Stripe event %q (want %s or charge.succeeded), or a lifecycle event (%s)",
				e, defaultEvent, strings.Join(lifecycleEvents(), ", ")))
		}
		if slices.Contains(events[:i], e) {
			return nil, fail(fmt.Errorf("%q listed twice", e))
		}
	}
	if thin && !slices.Contains(events, defaultEvent) {
		return nil, fail(errThinByCharge)
	}
	return events, nil
}
