package paypal

import (
	"bytes"
	"embed"
	"time"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
)

// sampleFiles are PayPal webhook events in the shape of PayPal's
// documented examples (https://developer.paypal.com/api/rest/webhooks/event-names/).
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

// sampleWebhookID is the samples' source secret: a webhook id in PayPal's
// form.
const sampleWebhookID = "8PT597110X687430LKGECATA"

// The sample payments: a capture (completed, refunded, then disputed: the
// dispute created, updated, resolved in the seller's favour), a denied
// capture, an authorization (created, voided).
const (
	capA  = "42311647XV020574X"
	capB  = "7NW873794T343360M"
	authC = "0VF52814937998046"
)

// replaced is the sample name with each old, new pair of replace applied
// once.
func replaced(name string, replace ...string) []byte {
	b := sample(name)
	for i := 0; i+1 < len(replace); i += 2 {
		b = bytes.Replace(b, []byte(replace[i]), []byte(replace[i+1]), 1)
	}
	return b
}

// Samples are PayPal's event shapes. They are signed with Scheme, which
// needs a signer (the package's tests set a test key pair and CA): PayPal
// alone holds the real private key.
func (Provider) Samples() provider.Samples {
	const c, d = "payment_capture_completed.json", "customer_dispute_created.json"
	return provider.Samples{
		Secret:     sampleWebhookID,
		Deliveries: sampleDeliveries(),
		Refused: []provider.Refusal{
			{Name: "event_type missing", Body: []byte(`{"id":"WH-1","resource":{}}`), Status: 422},
			{Name: "id missing", Body: replaced(c, `"id": "WH-58D329510W468432D-8HN650336L201105X",`, ``), Status: 422},
			{Name: "resource missing", Body: []byte(`{"id":"WH-1","event_type":"PAYMENT.CAPTURE.COMPLETED"}`), Status: 422},
			{Name: "amount a number", Body: replaced(c, `"value": "65.40"`, `"value": 65.40`), Status: 400},
			{Name: "amount with too many decimals", Body: replaced(c, `"value": "65.40"`, `"value": "65.401"`), Status: 422},
			{Name: "amount negative", Body: replaced(c, `"value": "65.40"`, `"value": "-65.40"`), Status: 422},
			{Name: "amount in exponent form", Body: replaced(c, `"value": "65.40"`, `"value": "6.54e1"`), Status: 422},
			{Name: "amount zero", Body: replaced(c, `"value": "65.40"`, `"value": "0.00"`), Status: 422},
			{Name: "JPY with decimals", Body: replaced("payment_authorization_created.json", `"value": "1500"`, `"value": "1500.5"`), Status: 422},
			{Name: "currency unknown", Body: replaced(c, `"currency_code": "USD"`, `"currency_code": "ABC"`), Status: 422},
			{Name: "a refund without its capture", Body: replaced("payment_capture_refunded.json", `"rel": "up"`, `"rel": "parent"`), Status: 422},
			{Name: "create_time not a time", Body: replaced(c, `"2025-11-30T10:05:02.123Z"`, `"yesterday"`), Status: 422},
			{Name: "repeated key", Body: replaced(c, `"status": "COMPLETED"`, `"k": "1", "k": "2"`), Status: 400},
			{Name: "a dispute naming no capture", Body: replaced(d, `"seller_transaction_id": "42311647XV020574X",`, ``), Status: 422},
			{Name: "a dispute naming two captures", Body: replaced(d, `"items": [],`, `"items": []}, {"seller_transaction_id": "7NW873794T343360M",`), Status: 422},
			{Name: "a dispute resolved with outcome NONE", Body: replaced("customer_dispute_resolved.json", `"RESOLVED_SELLER_FAVOUR"`, `"NONE"`), Status: 422},
		},
	}
}

// sampleDeliveries are the recorded events of the samples, and one
// acknowledged without a record.
func sampleDeliveries() []provider.Delivery {
	return []provider.Delivery{
		{Name: "PAYMENT.CAPTURE.COMPLETED: the capture succeeded", Body: sample("payment_capture_completed.json"), Events: []provider.Event{
			{Kind: lifecycle.Succeeded, CaptureID: capA, TransactionID: capA, Amount: 6540, Currency: "USD",
				EventID: "WH-58D329510W468432D-8HN650336L201105X", At: at("2025-11-30T10:05:02.123Z")}}},
		{Name: "PAYMENT.CAPTURE.REFUNDED: on the capture it links up to", Body: sample("payment_capture_refunded.json"), Events: []provider.Event{
			{Kind: lifecycle.Refund, RefundID: "1Y107995YT783435V", TransactionID: capA, Amount: 2000, Currency: "USD",
				EventID: "WH-1S115631EN580315E-9KH94552VF7913711", At: at("2025-12-01T09:00:02Z")}}},
		{Name: "PAYMENT.CAPTURE.DENIED", Body: sample("payment_capture_denied.json"), Events: []provider.Event{
			{Kind: lifecycle.Failed, CaptureID: capB, TransactionID: capB, Amount: 1000, Currency: "EUR",
				EventID: "WH-1GE84257G0350133W-6RW800890C634293G", At: at("2025-11-30T12:00:02Z")}}},
		{Name: "PAYMENT.AUTHORIZATION.CREATED: JPY has no minor unit", Body: sample("payment_authorization_created.json"), Events: []provider.Event{
			{Kind: lifecycle.Authorized, TransactionID: authC, Amount: 1500, Currency: "JPY",
				EventID: "WH-6CM36937R6406184B-0NY26446ND1512015", At: at("2025-11-30T11:00:02Z")}}},
		{Name: "PAYMENT.AUTHORIZATION.VOIDED", Body: sample("payment_authorization_voided.json"), Events: []provider.Event{
			{Kind: lifecycle.Canceled, TransactionID: authC, Amount: 1500, Currency: "JPY",
				EventID: "WH-4SW78779LY2325805-07E03580SX1414828", At: at("2025-11-30T11:30:02Z")}}},
		{Name: "CUSTOMER.DISPUTE.CREATED: on the capture it disputes", Body: sample("customer_dispute_created.json"), Events: []provider.Event{
			{Kind: lifecycle.DisputeOpened, TransactionID: capA, Amount: 6540, Currency: "USD",
				EventID: "WH-4M0448861G563140B-9EX36365822141321", At: at("2025-12-05T13:36:33Z")}}},
		{Name: "CUSTOMER.DISPUTE.UPDATED: still open", Body: sample("customer_dispute_updated.json"), Events: []provider.Event{
			{Kind: lifecycle.DisputeOpened, TransactionID: capA, Amount: 6540, Currency: "USD",
				EventID: "WH-8TS44576HW2314420-5XB64471F9354873V", At: at("2025-12-26T10:12:07Z")}}},
		{Name: "CUSTOMER.DISPUTE.RESOLVED: won at the claim stage", Body: sample("customer_dispute_resolved.json"), Events: []provider.Event{
			{Kind: lifecycle.DisputeWon, Stage: 1, TransactionID: capA, Amount: 6540, Currency: "USD",
				EventID: "WH-2W7154467N658993B-0AL83124PS6405224", At: at("2026-01-09T16:20:41Z")}}},
		{Name: "CHECKOUT.ORDER.APPROVED is not recorded", Body: sample("checkout_order_approved.json")},
	}
}

// at is a sample's create_time.
func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}
