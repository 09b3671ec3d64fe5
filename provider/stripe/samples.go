package stripe

import (
	"bytes"
	"embed"
	"strings"
	"time"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
)

// sampleFiles are Stripe Events as Stripe sends them; signature/compat
// reads each with stripe-go, so that they cannot drift from Stripe's
// shapes.
//
//go:embed samples/*.json
var sampleFiles embed.FS

func sample(name string) []byte {
	b, err := sampleFiles.ReadFile("samples/" + name)
	if err != nil {
		panic(err)
	}
	return b
}

// eventJSON is a Stripe Event of type typ around data.object obj.
func eventJSON(typ, obj string) string {
	return `{"id":"evt_1","object":"event","api_version":"2025-08-27.basil","type":"` + typ +
		`","data":{"object":` + obj + `},"livemode":false}`
}

const piObject = `{"id":"pi_1","object":"payment_intent","amount":2000,"amount_received":2000,"currency":"jpy","status":"succeeded"}`

// piEvent is a payment_intent.succeeded Event with replace applied to its
// PaymentIntent.
func piEvent(replace ...string) []byte {
	return []byte(eventJSON("payment_intent.succeeded", strings.NewReplacer(replace...).Replace(piObject)))
}

// Samples are Stripe's own event shapes, delivered to a source that records
// both payment_intent.succeeded and charge.succeeded, signed with Stripe's
// scheme.
func (Provider) Samples() provider.Samples {
	ch := sample("charge.succeeded.json")
	chOfPI := bytes.Replace(ch, []byte(`"payment_intent": null`), []byte(`"payment_intent": "pi_3QpaylockPI0001"`), 1)
	chOfPI = bytes.Replace(chOfPI, []byte(`"evt_3QpaylockCH0001"`), []byte(`"evt_3QpaylockCH0002"`), 1)
	return provider.Samples{
		Settings: provider.Settings{"events": []byte(`["payment_intent.succeeded","charge.succeeded","payment_intent.payment_failed",` +
			`"payment_intent.canceled","charge.refunded","charge.dispute.created","charge.dispute.closed",` +
			`"payment_intent.amount_capturable_updated","charge.captured","refund.failed"]`)},
		Secret: "whsec_stripe-sample-secret-0123456789",
		Deliveries: []provider.Delivery{
			{Name: "payment_intent.succeeded", Body: sample("payment_intent.succeeded.json"), Events: []provider.Event{
				{TransactionID: "pi_3QpaylockPI0001", Amount: 2000, Currency: "JPY", EventID: "evt_3QpaylockPI0001"}}},
			{Name: "charge.succeeded without a PaymentIntent", Body: ch, Events: []provider.Event{
				{TransactionID: "ch_3QpaylockCH0001", Amount: 1500, Currency: "EUR", EventID: "evt_3QpaylockCH0001"}}},
			{Name: "charge of a PaymentIntent: its PaymentIntent's event records it", Body: chOfPI},
			{Name: "customer.created is not recorded", Body: sample("customer.created.json")},
			{Name: "payment_intent.payment_failed", Body: sample("payment_intent.payment_failed.json"), Events: []provider.Event{
				{Kind: lifecycle.Failed, TransactionID: "pi_3QpaylockPI0002", Amount: 2000, Currency: "JPY", EventID: "evt_3QpaylockPF0001", At: unix(1764500100)}}},
			{Name: "payment_intent.canceled", Body: sample("payment_intent.canceled.json"), Events: []provider.Event{
				{Kind: lifecycle.Canceled, TransactionID: "pi_3QpaylockPI0002", Amount: 2000, Currency: "JPY", EventID: "evt_3QpaylockPC0001", At: unix(1764500200)}}},
			{Name: "charge.refunded: the cumulative amount refunded, of the Charge's PaymentIntent", Body: sample("charge.refunded.json"), Events: []provider.Event{
				{Kind: lifecycle.Refund, Cumulative: true, TransactionID: "pi_3QpaylockPI0001", Amount: 500, Currency: "JPY", EventID: "evt_3QpaylockRF0001", At: unix(1764503600)}}},
			{Name: "payment_intent.amount_capturable_updated: authorised, held", Body: sample("payment_intent.amount_capturable_updated.json"), Events: []provider.Event{
				{Kind: lifecycle.Authorized, TransactionID: "pi_3QpaylockPI0003", Amount: 2000, Currency: "JPY", EventID: "evt_3QpaylockAC0001", At: unix(1764500300)}}},
			{Name: "charge.captured: the cumulative amount captured, of the Charge's PaymentIntent", Body: sample("charge.captured.json"), Events: []provider.Event{
				{Kind: lifecycle.Captured, Cumulative: true, CaptureID: "ch_3QpaylockCH0003", TransactionID: "pi_3QpaylockPI0003", Amount: 1500, Currency: "JPY",
					EventID: "evt_3QpaylockCP0001", At: unix(1764500400)}}},
			{Name: "refund.failed: the refund taken back", Body: sample("refund.failed.json"), Events: []provider.Event{
				{Kind: lifecycle.RefundFailed, RefundID: "re_3QpaylockRE0001", TransactionID: "pi_3QpaylockPI0001", Amount: 500, Currency: "JPY",
					EventID: "evt_3QpaylockRE0002", At: unix(1764590500)}}},
			{Name: "charge.dispute.created", Body: sample("charge.dispute.created.json"), Events: []provider.Event{
				{Kind: lifecycle.DisputeOpened, TransactionID: "pi_3QpaylockPI0001", Amount: 2000, Currency: "JPY", EventID: "evt_3QpaylockDP0001", At: unix(1764590000)}}},
			{Name: "charge.dispute.closed, lost", Body: sample("charge.dispute.closed.json"), Events: []provider.Event{
				{Kind: lifecycle.DisputeLost, TransactionID: "pi_3QpaylockPI0001", Amount: 2000, Currency: "JPY", EventID: "evt_3QpaylockDC0001", At: unix(1765500000)}}},
		},
		Refused: []provider.Refusal{
			{Name: "not an event", Body: []byte(`{"id":"pi_1","object":"payment_intent","amount_received":1,"currency":"jpy"}`), Status: 422},
			{Name: "type missing", Body: []byte(`{"id":"evt_1","object":"event"}`), Status: 422},
			{Name: "data.object of another type", Body: []byte(eventJSON("payment_intent.succeeded", `{"id":"ch_1","object":"charge","amount":1,"currency":"eur"}`)), Status: 422},
			{Name: "event id too long", Body: bytes.Replace(piEvent(), []byte(`"evt_1"`), []byte(`"evt_`+strings.Repeat("x", 255)+`"`), 1), Status: 422},
			{Name: "id with a space", Body: piEvent(`"pi_1"`, `"pi 1"`), Status: 422},
			{Name: "amount_received a string", Body: piEvent(`"amount_received":2000`, `"amount_received":"2000"`), Status: 400},
			{Name: "amount_received a fraction", Body: piEvent(`"amount_received":2000`, `"amount_received":2000.5`), Status: 422},
			{Name: "amount_received zero", Body: piEvent(`"amount_received":2000`, `"amount_received":0`), Status: 422},
			{Name: "currency unknown", Body: piEvent(`"jpy"`, `"abc"`), Status: 422},
			{Name: "amount_received case-variant", Body: piEvent(`"amount_received":2000`, `"amount_received":2000,"Amount_Received":1`), Status: 400},
			{Name: "a closed dispute neither won nor lost", Status: 422,
				Body: bytes.Replace(sample("charge.dispute.closed.json"), []byte(`"status": "lost"`), []byte(`"status": "needs_response"`), 1)},
			{Name: "a dispute of no payment", Status: 422, Body: bytes.Replace(bytes.Replace(sample("charge.dispute.created.json"),
				[]byte(`"charge": "ch_3QpaylockCH0002"`), []byte(`"charge": null`), 1), []byte(`"payment_intent": "pi_3QpaylockPI0001"`), []byte(`"payment_intent": null`), 1)},
			{Name: "a refund's payment_intent a number", Status: 400,
				Body: bytes.Replace(sample("charge.refunded.json"), []byte(`"payment_intent": "pi_3QpaylockPI0001"`), []byte(`"payment_intent": 1`), 1)},
			{Name: "repeated key elsewhere", Body: piEvent(`"status":"succeeded"`, `"metadata":{"k":"1","k":"2"}`), Status: 400},
		},
	}
}

// unix is a Stripe timestamp as an event's date.
func unix(sec int64) time.Time { return time.Unix(sec, 0).UTC() }
