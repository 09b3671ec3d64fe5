package checkout

import (
	"bytes"
	"embed"
	"strings"
	"time"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
)

// sampleFiles are Checkout.com webhook events in the shape of Checkout.com's
// documented examples; `paylock sign --scheme checkout` signs them.
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

// sampleSecret is a secret entry with an Authorization value: the suite's
// deliveries carry both headers.
const sampleSecret = "checkout-sample-secret-key-0123456789|Bearer checkout-sample-authorization"

// The sample payments: one approved, captured, refunded and disputed, one
// voided, one declined.
const (
	payA = "pay_paylockpaymentaaaaaaaaaa1"
	payB = "pay_paylockpaymentbbbbbbbbbb2"
	payC = "pay_paylockpaymentcccccccccc3"
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

// Samples are Checkout.com's event shapes, signed with Scheme, with an
// Authorization value.
func (Provider) Samples() provider.Samples {
	return provider.Samples{
		Secret:     sampleSecret,
		Deliveries: sampleDeliveries(),
		Refused: []provider.Refusal{
			{Name: "type missing", Body: []byte(`{"id":"evt_1","data":{}}`), Status: 422},
			{Name: "id missing", Body: replaced("payment_captured.json", `"id": "evt_paylockcaptured000000001",`, ``), Status: 422},
			{Name: "data missing", Body: []byte(`{"id":"evt_1","type":"payment_captured"}`), Status: 422},
			{Name: "payment id missing", Body: replaced("payment_captured.json", `"id": "pay_paylockpaymentaaaaaaaaaa1",`, ``), Status: 422},
			{Name: "payment id with a space", Body: replaced("payment_captured.json", `"id": "pay_paylockpaymentaaaaaaaaaa1"`, `"id": "pay 1"`), Status: 422},
			{Name: "event id too long", Body: replaced("payment_captured.json", `"evt_paylockcaptured000000001"`, `"evt_`+strings.Repeat("x", 255)+`"`), Status: 422},
			{Name: "amount a string", Body: replaced("payment_captured.json", `"amount": 6540`, `"amount": "6540"`), Status: 400},
			{Name: "amount a fraction", Body: replaced("payment_captured.json", `"amount": 6540`, `"amount": 65.40`), Status: 422},
			{Name: "amount zero", Body: replaced("payment_captured.json", `"amount": 6540`, `"amount": 0`), Status: 422},
			{Name: "currency unknown", Body: replaced("payment_captured.json", `"currency": "USD"`, `"currency": "ABC"`), Status: 422},
			{Name: "a capture without its action id", Body: replaced("payment_captured.json", `"action_id": "act_paylockcapture000000001",`, ``), Status: 422},
			{Name: "a refund without its action id", Body: replaced("payment_refunded.json", `"action_id": "act_paylockrefund0000000001",`, ``), Status: 422},
			{Name: "a dispute of no payment", Body: replaced("dispute_lost.json", `"payment_id": "pay_paylockpaymentaaaaaaaaaa1",`, ``), Status: 422},
			{Name: "created_on not a time", Body: replaced("payment_captured.json", `"2025-11-30T10:05:02Z"`, `"yesterday"`), Status: 422},
			{Name: "created_on a number", Body: replaced("payment_captured.json", `"2025-11-30T10:05:02Z"`, `1764497102`), Status: 400},
			{Name: "amount case-variant", Body: replaced("payment_captured.json", `"amount": 6540`, `"amount": 6540, "Amount": 1`), Status: 400},
			{Name: "repeated key elsewhere", Body: replaced("payment_captured.json", `"order_id": "ORD-5023-4E89"`, `"k": "1", "k": "2"`), Status: 400},
		},
	}
}

// sampleDeliveries are the recorded events of the samples, and one
// acknowledged without a record.
func sampleDeliveries() []provider.Delivery {
	return []provider.Delivery{
		{Name: "payment_approved: authorised, held", Body: sample("payment_approved.json"), Events: []provider.Event{
			{Kind: lifecycle.Authorized, TransactionID: payA, Amount: 6540, Currency: "USD", EventID: "evt_paylockapproved000000001", At: at("2025-11-30T10:00:01Z")}}},
		{Name: "payment_captured: one capture, its action", Body: sample("payment_captured.json"), Events: []provider.Event{
			{Kind: lifecycle.Captured, CaptureID: "act_paylockcapture000000001", TransactionID: payA, Amount: 6540, Currency: "USD",
				EventID: "evt_paylockcaptured000000001", At: at("2025-11-30T10:05:02Z")}}},
		{Name: "payment_capture_declined: that capture action failed", Body: sample("payment_capture_declined.json"), Events: []provider.Event{
			{Kind: lifecycle.CaptureFailed, CaptureID: "act_paylockcapture000000000", TransactionID: payA, Amount: 6540, Currency: "USD",
				EventID: "evt_paylockcapdeclined000001", At: at("2025-11-30T10:04:02Z")}}},
		{Name: "payment_capture_pending is not recorded", Body: sample("payment_capture_pending.json")},
		{Name: "payment_refunded: one refund, its action", Body: sample("payment_refunded.json"), Events: []provider.Event{
			{Kind: lifecycle.Refund, RefundID: "act_paylockrefund0000000001", TransactionID: payA, Amount: 2000, Currency: "USD",
				EventID: "evt_paylockrefunded000000001", At: at("2025-12-01T09:00:02Z")}}},
		{Name: "payment_voided", Body: sample("payment_voided.json"), Events: []provider.Event{
			{Kind: lifecycle.Canceled, TransactionID: payB, Amount: 1000, Currency: "EUR", EventID: "evt_paylockvoided00000000001", At: at("2025-11-30T11:00:02Z")}}},
		{Name: "payment_declined", Body: sample("payment_declined.json"), Events: []provider.Event{
			{Kind: lifecycle.Failed, TransactionID: payC, Amount: 2500, Currency: "GBP", EventID: "evt_paylockdeclined00000001", At: at("2025-11-30T12:00:02Z")}}},
		{Name: "dispute_received: of its payment_id", Body: sample("dispute_received.json"), Events: []provider.Event{
			{Kind: lifecycle.DisputeOpened, TransactionID: payA, Amount: 6540, Currency: "USD", EventID: "evt_paylockdisputerecvd00001", At: at("2025-12-05T08:00:02Z")}}},
		{Name: "dispute_lost", Body: sample("dispute_lost.json"), Events: []provider.Event{
			{Kind: lifecycle.DisputeLost, Stage: 1, TransactionID: payA, Amount: 6540, Currency: "USD", EventID: "evt_paylockdisputelost000001", At: at("2026-01-10T08:00:02Z")}}},
	}
}

// at is a sample's created_on.
func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}
