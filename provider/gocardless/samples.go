package gocardless

import (
	"bytes"
	"embed"
	"fmt"
	"strings"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
)

// sampleFiles are GoCardless webhooks (webhook_*.json), in the shape of
// GoCardless's documented examples, and the fetcher's answers about the
// payments they name (api_*.json: GoCardless's documented payment and
// refund objects, side by side as Fetch returns them); `paylock sign
// --scheme gocardless` signs the webhooks.
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

// sampleSecret is a webhook endpoint secret, as the source's secrets_env
// holds it.
const sampleSecret = "gocardless-sample-webhook-endpoint-secret-0123"

// The sample payments and refunds.
const (
	pmConfirmed = "PM0PAYLOCK0001"
	pmPaidOut   = "PM0PAYLOCK0002"
	pmFailed    = "PM0PAYLOCK0003"
	pmCancelled = "PM0PAYLOCK0004"
	pmDenied    = "PM0PAYLOCK0005"
	pmCharged   = "PM0PAYLOCK0006"
	pmRefunded  = "PM0PAYLOCK0007"
	pmReturned  = "PM0PAYLOCK0008"
	pmPending   = "PM0PAYLOCK0009"
	rfPaid      = "RF0PAYLOCK007A"
	rfBounced   = "RF0PAYLOCK007B"
	rfPending   = "RF0PAYLOCK007C"
	rfReturned  = "RF0PAYLOCK0008"
)

// replaced is the sample name with each old, new pair of replace applied
// once; it panics when an old is not there, so that a sample edit cannot
// silently turn a refusal into the authentic body.
func replaced(name string, replace ...string) []byte {
	b := sample(name)
	for i := 0; i+1 < len(replace); i += 2 {
		if !bytes.Contains(b, []byte(replace[i])) {
			panic(fmt.Sprintf("sample %s holds no %q", name, replace[i]))
		}
		b = bytes.Replace(b, []byte(replace[i]), []byte(replace[i+1]), 1)
	}
	return b
}

// batchOf is a webhook of n payment events, each of its own payment.
func batchOf(n int) []byte {
	events := make([]string, n)
	for i := range events {
		events[i] = fmt.Sprintf(`{"id":"EV0BATCH%06d","created_at":"2025-11-07T12:00:00.000Z","resource_type":"payments",`+
			`"action":"confirmed","links":{"payment":"PM0BATCH%06d"},"details":{"origin":"gocardless","cause":"payment_confirmed"},"metadata":{}}`, i, i)
	}
	return []byte(`{"events":[` + strings.Join(events, ",") + `],"meta":{"webhook_id":"WB0BATCH000001"}}`)
}

// Samples are GoCardless's webhooks, signed with Scheme, with the payments
// each names, and the API's answers about those payments with the events
// each records (a Notifier's samples, provider.Samples.Notices).
func (Provider) Samples() provider.Samples {
	return provider.Samples{
		Secret:     sampleSecret,
		Deliveries: sampleDeliveries(),
		Notices:    sampleNotices(),
		Refused:    sampleRefused(),
	}
}

// sampleNotices are the sample webhooks and the payments each names.
func sampleNotices() []provider.NoticeSample {
	return []provider.NoticeSample{
		{Name: "payments.confirmed", Body: sample("webhook_confirmed.json"), Refs: []string{pmConfirmed}},
		{Name: "a batch naming two payments, several times each, and a mandate", Body: sample("webhook_batch.json"),
			Refs: []string{pmPaidOut, pmRefunded}},
		{Name: "payments.failed", Body: sample("webhook_failed.json"), Refs: []string{pmFailed}},
		{Name: "payments.cancelled and payments.customer_approval_denied", Body: sample("webhook_cancelled.json"),
			Refs: []string{pmCancelled, pmDenied}},
		{Name: "payments.charged_back", Body: sample("webhook_charged_back.json"), Refs: []string{pmCharged}},
		{Name: "refunds.funds_returned linking its refund alone", Body: sample("webhook_refund.json"), Refs: []string{rfReturned}},
		{Name: "a mandate, a payout and a subscription name no payment", Body: sample("webhook_no_payment.json")},
	}
}

// sampleDeliveries are the fetcher's answers about the payments the
// webhooks name, each for its ref, and the events each records (every
// payload the whole answer).
func sampleDeliveries() []provider.Delivery {
	return []provider.Delivery{
		{Name: "confirmed: the payment succeeded", Ref: pmConfirmed, Body: sample("api_confirmed.json"), Events: []provider.Event{
			{TransactionID: pmConfirmed, Amount: 1000, Currency: "GBP", EventID: pmConfirmed + ":confirmed"}}},
		{Name: "paid_out: succeeded, under the id of its confirmation", Ref: pmPaidOut, Body: sample("api_paid_out.json"), Events: []provider.Event{
			{TransactionID: pmPaidOut, Amount: 2500, Currency: "EUR", EventID: pmPaidOut + ":confirmed"}}},
		{Name: "failed", Ref: pmFailed, Body: sample("api_failed.json"), Events: []provider.Event{
			{Kind: lifecycle.Failed, TransactionID: pmFailed, Amount: 1500, Currency: "GBP", EventID: pmFailed + ":failed"}}},
		{Name: "cancelled", Ref: pmCancelled, Body: sample("api_cancelled.json"), Events: []provider.Event{
			{Kind: lifecycle.Canceled, TransactionID: pmCancelled, Amount: 800, Currency: "GBP", EventID: pmCancelled + ":cancelled"}}},
		{Name: "customer_approval_denied: failed", Ref: pmDenied, Body: sample("api_customer_approval_denied.json"), Events: []provider.Event{
			{Kind: lifecycle.Failed, TransactionID: pmDenied, Amount: 1200, Currency: "GBP", EventID: pmDenied + ":customer_approval_denied"}}},
		{Name: "charged_back: succeeded, then a lost dispute", Ref: pmCharged, Body: sample("api_charged_back.json"), Events: []provider.Event{
			{TransactionID: pmCharged, Amount: 4200, Currency: "GBP", EventID: pmCharged + ":confirmed"},
			{Kind: lifecycle.DisputeLost, Stage: chargebackStage, TransactionID: pmCharged, Amount: 4200, Currency: "GBP", EventID: pmCharged + ":charged_back"}}},
		{Name: "paid_out with a paid refund, a bounced one and a pending one", Ref: pmRefunded, Body: sample("api_refunded.json"), Events: []provider.Event{
			{TransactionID: pmRefunded, Amount: 5000, Currency: "GBP", EventID: pmRefunded + ":confirmed"},
			{Kind: lifecycle.Refund, RefundID: rfPaid, TransactionID: pmRefunded, Amount: 2000, Currency: "GBP", EventID: rfPaid + ":paid"},
			{Kind: lifecycle.RefundFailed, RefundID: rfBounced, TransactionID: pmRefunded, Amount: 1000, Currency: "GBP", EventID: rfBounced + ":bounced"},
			{Kind: lifecycle.RefundPending, RefundID: rfPending, TransactionID: pmRefunded, Amount: 500, Currency: "GBP", EventID: rfPending + ":pending_submission"}}},
		{Name: "fetched by its refund's id: confirmed, the refund's funds returned", Ref: rfReturned, Body: sample("api_refund_funds_returned.json"), Events: []provider.Event{
			{TransactionID: pmReturned, Amount: 3000, Currency: "EUR", EventID: pmReturned + ":confirmed"},
			{Kind: lifecycle.RefundFailed, RefundID: rfReturned, TransactionID: pmReturned, Amount: 3000, Currency: "EUR", EventID: rfReturned + ":funds_returned"}}},
	}
}

// sampleRefused are webhook bodies Notices refuses.
func sampleRefused() []provider.Refusal {
	const confirmed = "webhook_confirmed.json"
	return []provider.Refusal{
		{Name: "events missing", Body: []byte(`{"meta":{"webhook_id":"WB0PAYLOCK0001"}}`), Status: 422},
		{Name: "an API answer delivered as a webhook", Body: sample("api_confirmed.json"), Status: 422},
		{Name: "events an object", Body: []byte(`{"events":{"id":"EV0PAYLOCK0001"}}`), Status: 400},
		{Name: "an event a string", Body: []byte(`{"events":["EV0PAYLOCK0001"]}`), Status: 400},
		{Name: "more than 250 events", Body: batchOf(MaxEvents + 1), Status: 422},
		{Name: "event id missing", Body: replaced(confirmed, `"id": "EV0PAYLOCK0001",`, ``), Status: 422},
		{Name: "event id not a GoCardless id", Body: replaced(confirmed, `"EV0PAYLOCK0001"`, `"evt_1"`), Status: 422},
		{Name: "event id a number", Body: replaced(confirmed, `"EV0PAYLOCK0001"`, `1`), Status: 400},
		{Name: "resource_type missing", Body: replaced(confirmed, `"resource_type": "payments",`, ``), Status: 422},
		{Name: "action missing", Body: replaced(confirmed, `"action": "confirmed",`, ``), Status: 422},
		{Name: "action not a token", Body: replaced(confirmed, `"action": "confirmed"`, `"action": "Confirmed!"`), Status: 422},
		{Name: "a payment event without links", Body: replaced(confirmed, `"links": {
        "payment": "PM0PAYLOCK0001"
      },`, ``), Status: 422},
		{Name: "links an array", Body: replaced(confirmed, `"links": {
        "payment": "PM0PAYLOCK0001"
      },`, `"links": ["PM0PAYLOCK0001"],`), Status: 400},
		{Name: "links.payment not a payment id", Body: replaced(confirmed, `"payment": "PM0PAYLOCK0001"`, `"payment": "MD0PAYLOCK0001"`), Status: 422},
		{Name: "links.payment with a space", Body: replaced(confirmed, `"payment": "PM0PAYLOCK0001"`, `"payment": "PM0PAYLOCK 0001"`), Status: 422},
		{Name: "links.payment a number", Body: replaced(confirmed, `"payment": "PM0PAYLOCK0001"`, `"payment": 1`), Status: 400},
		{Name: "links.payment case-variant", Body: replaced(confirmed, `"payment": "PM0PAYLOCK0001"`, `"payment": "PM0PAYLOCK0001", "Payment": "PM0PAYLOCK0002"`), Status: 400},
		{Name: "a refund event linking no refund", Body: replaced("webhook_refund.json", `"refund": "RF0PAYLOCK0008"`, `"mandate": "MD0PAYLOCK0008"`), Status: 422},
		{Name: "a refund event linking a malformed payment", Body: replaced("webhook_refund.json", `"refund": "RF0PAYLOCK0008"`,
			`"refund": "RF0PAYLOCK0008", "payment": "pm_1"`), Status: 422},
		{Name: "a mandate event without an id", Body: replaced("webhook_no_payment.json", `"id": "EV0PAYLOCK0014",`, ``), Status: 422},
		{Name: "events repeated", Body: replaced(confirmed, `"meta": {`, `"events": [], "meta": {`), Status: 400},
		{Name: "events case-variant", Body: replaced(confirmed, `"meta": {`, `"Events": [], "meta": {`), Status: 400},
		{Name: "a repeated key inside an event", Body: replaced(confirmed, `"metadata": {},`, `"metadata": {}, "metadata": {},`), Status: 400},
	}
}
