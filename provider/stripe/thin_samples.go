package stripe

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
)

// thinFetchedAt is when the thin samples' fetches answered: the created of
// their sync:<pi>:<status> events, the date of their lifecycle events.
var thinFetchedAt = unix(1764600000)

// ThinSamples are the samples of a thin source (thin: true), a
// provider.Notifier, signed with the secret of Samples: Notices are thin
// events as an event destination sends them (samples/thin_*.json), each
// with the PaymentIntent it names; Deliveries are what the source's
// Fetcher returns for those PaymentIntents (syncEvent, as Fetch builds it,
// around the PaymentIntents of the snapshot samples, fetched at
// thinFetchedAt), each for its Ref; Refused are webhook bodies Notices
// refuses, a snapshot event among them. Samples stay the snapshot
// source's: the conformance suite takes one Samples per provider.
func ThinSamples() provider.Samples {
	notice := func(name, file string, refs ...string) provider.NoticeSample {
		return provider.NoticeSample{Name: name, Body: sample(file), Refs: refs}
	}
	return provider.Samples{
		Settings: provider.Settings{KeyThin: json.RawMessage(`true`)},
		Secret:   Provider{}.Samples().Secret,
		Notices: []provider.NoticeSample{
			notice("v1.payment_intent.succeeded", "thin_payment_intent.succeeded.json", "pi_3QpaylockPI0001"),
			notice("v1.payment_intent.amount_capturable_updated", "thin_payment_intent.amount_capturable_updated.json", "pi_3QpaylockPI0003"),
			notice("v1.payment_intent.canceled", "thin_payment_intent.canceled.json", "pi_3QpaylockPI0002"),
			notice("v1.payment_intent.payment_failed", "thin_payment_intent.payment_failed.json", "pi_3QpaylockPI0004"),
			notice("a Charge's event names no PaymentIntent: ignored", "thin_charge.succeeded.json"),
			notice("a billing Meter's event: ignored", "thin_billing.meter.error_report_triggered.json"),
			{Name: "no related object: ignored", Body: thinEvent(`"evt_test_1"`, `"evt_test_65RpaylockThinNO0001"`,
				`{"id":"pi_1","type":"payment_intent","url":"/v1/payment_intents/pi_1"}`, `null`)},
			{Name: "a connected account's PaymentIntent (context): ignored", Body: thinEvent(`"evt_test_1"`, `"evt_test_65RpaylockThinCX0001"`,
				`"context":null`, `"context":"acct_1QpaylockConnect01"`)},
		},
		Deliveries: []provider.Delivery{
			thinFetched("succeeded", "payment_intent.succeeded.json", "pi_3QpaylockPI0001", provider.Event{
				TransactionID: "pi_3QpaylockPI0001", Amount: 2000, Currency: "JPY", EventID: "sync:pi_3QpaylockPI0001:succeeded"}),
			thinFetched("requires_capture: authorised, held", "payment_intent.amount_capturable_updated.json", "pi_3QpaylockPI0003", provider.Event{
				Kind: lifecycle.Authorized, TransactionID: "pi_3QpaylockPI0003", Amount: 2000, Currency: "JPY",
				EventID: "sync:pi_3QpaylockPI0003:requires_capture", At: thinFetchedAt}),
			thinFetched("canceled", "payment_intent.canceled.json", "pi_3QpaylockPI0002", provider.Event{
				Kind: lifecycle.Canceled, TransactionID: "pi_3QpaylockPI0002", Amount: 2000, Currency: "JPY",
				EventID: "sync:pi_3QpaylockPI0002:canceled", At: thinFetchedAt}),
			thinFetched("requires_payment_method after a failure: failed", "payment_intent.payment_failed.json", "pi_3QpaylockPI0004", provider.Event{
				Kind: lifecycle.Failed, TransactionID: "pi_3QpaylockPI0004", Amount: 2000, Currency: "JPY",
				EventID: "sync:pi_3QpaylockPI0004:requires_payment_method", At: thinFetchedAt}),
		},
		Refused: []provider.Refusal{
			{Name: "a snapshot event: the source takes thin events", Body: sample("payment_intent.succeeded.json"), Status: 422},
			{Name: "object missing", Body: thinEvent(`"object":"v2.core.event",`, ``), Status: 422},
			{Name: "object of another kind", Body: thinEvent(`"v2.core.event"`, `"payment_intent"`), Status: 422},
			{Name: "id missing", Body: thinEvent(`"id":"evt_test_1",`, ``), Status: 422},
			{Name: "id not an event's", Body: thinEvent(`"evt_test_1"`, `"pi_2"`), Status: 422},
			{Name: "id with a space", Body: thinEvent(`"evt_test_1"`, `"evt_test 1"`), Status: 422},
			{Name: "type missing", Body: thinEvent(`"type":"v1.payment_intent.succeeded",`, ``), Status: 422},
			{Name: "type a number", Body: thinEvent(`"v1.payment_intent.succeeded"`, `1`), Status: 400},
			{Name: "context a number", Body: thinEvent(`"context":null`, `"context":1`), Status: 400},
			{Name: "related_object a string", Body: thinEvent(`{"id":"pi_1","type":"payment_intent","url":"/v1/payment_intents/pi_1"}`, `"pi_1"`), Status: 400},
			{Name: "related_object without an id", Body: thinEvent(`"id":"pi_1",`, ``), Status: 422},
			{Name: "related_object's type null", Body: thinEvent(`"type":"payment_intent"`, `"type":null`), Status: 400},
			{Name: "a PaymentIntent's id that is not pi_", Body: thinEvent(`"pi_1"`, `"ch_1"`), Status: 422},
			{Name: "a PaymentIntent's id with a slash", Body: thinEvent(`"id":"pi_1"`, `"id":"pi_1/../../v1/charges"`), Status: 422},
			{Name: "related_object's id repeated", Body: thinEvent(`"id":"pi_1"`, `"id":"pi_1","id":"pi_2"`), Status: 400},
			{Name: "related_object case-variant", Body: thinEvent(`"related_object"`, `"Related_Object"`), Status: 400},
		},
	}
}

// thinFetched is the sample of what the thin source's Fetcher returns for
// ref, Stripe's API answering the PaymentIntent of the snapshot sample
// file (its id made ref) at thinFetchedAt.
func thinFetched(name, file, ref string, want provider.Event) provider.Delivery {
	var ev struct {
		Data struct {
			Object json.RawMessage `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(sample(file), &ev); err != nil {
		panic(err)
	}
	var head struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(ev.Data.Object, &head); err != nil {
		panic(err)
	}
	pi := bytes.ReplaceAll(ev.Data.Object, []byte(head.ID), []byte(ref))
	body, _, err := syncEvent(pi, ref, thinFetchedAt)
	if err != nil || body == nil {
		panic("stripe: thin sample " + file + " is no final PaymentIntent")
	}
	return provider.Delivery{Name: "fetched " + name, Body: body, Ref: ref, Events: []provider.Event{want}}
}

// thinPI is a compact thin event naming PaymentIntent pi_1.
const thinPI = `{"id":"evt_test_1","object":"v2.core.event","type":"v1.payment_intent.succeeded","context":null,` +
	`"created":"2025-11-30T10:53:20.000Z","livemode":false,"reason":null,` +
	`"related_object":{"id":"pi_1","type":"payment_intent","url":"/v1/payment_intents/pi_1"}}`

// thinEvent is thinPI with replace applied (strings.NewReplacer's pairs).
func thinEvent(replace ...string) []byte {
	return []byte(strings.NewReplacer(replace...).Replace(thinPI))
}
