package mapped

import (
	"strings"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
)

// sampleBody is a delivery of the samples' mapping (/data/id,
// /data/amount/minor, /data/amount/currency, /id) with replace applied.
func sampleBody(replace ...string) []byte {
	return []byte(strings.NewReplacer(replace...).Replace(
		`{"id":"evt-acme-1","type":"payment.completed","data":{"id":"acme-tx-1","amount":{"minor":4200,"currency":"USD"},"items":[{"sku":"a"}],"note":"kept"}}`))
}

// Samples are deliveries of a sender whose bodies nest the payment under
// data, with its event id at the top, signed with Standard Webhooks.
func (Provider) Samples() provider.Samples {
	return provider.Samples{
		Settings: provider.Settings{"fields": []byte(
			`{"transaction_id":"/data/id","amount":"/data/amount/minor","currency":"/data/amount/currency","event_id":"/id",` +
				`"type":"/event","refund_id":"/data/refund/id"}`),
			"types": []byte(`{"payment.completed":"payment","payment.refunded":"refund","payment.failed":"failed"}`)},
		Secret: "whsec_bWFwcGVkLXNhbXBsZS1zZWNyZXQtMDEyMzQ1Njc4OQ==",
		Deliveries: []provider.Delivery{
			{Name: "the mapped fields; the rest is kept", Body: sampleBody(), Events: []provider.Event{
				{TransactionID: "acme-tx-1", Amount: 4200, Currency: "USD", EventID: "evt-acme-1"}}},
			{Name: "case-variant keys off the path are kept", Body: sampleBody(`"evt-acme-1"`, `"evt-acme-2"`, `"acme-tx-1"`, `"acme-tx-2"`,
				`"type"`, `"Type":1,"type"`, `4200`, `1`), Events: []provider.Event{
				{TransactionID: "acme-tx-2", Amount: 1, Currency: "USD", EventID: "evt-acme-2"}}},
			{Name: "a refund: its type mapped, its id through refund_id", Body: []byte(
				`{"id":"evt-acme-r1","event":"payment.refunded","data":{"id":"acme-tx-1","amount":{"minor":1000,"currency":"USD"},"refund":{"id":"re-acme-1"}}}`),
				Events: []provider.Event{{Kind: lifecycle.Refund, TransactionID: "acme-tx-1", Amount: 1000, Currency: "USD",
					EventID: "evt-acme-r1", RefundID: "re-acme-1"}}},
			{Name: "a failure", Body: sampleBody(`"evt-acme-1"`, `"evt-acme-f1"`, `"type"`, `"event":"payment.failed","type"`, `"acme-tx-1"`, `"acme-tx-9"`),
				Events: []provider.Event{{Kind: lifecycle.Failed, TransactionID: "acme-tx-9", Amount: 4200, Currency: "USD", EventID: "evt-acme-f1"}}},
			{Name: "a type the mapping does not list is not recorded", Body: sampleBody(`"type"`, `"event":"customer.updated","type"`)},
		},
		Refused: []provider.Refusal{
			{Name: "transaction_id resolves to nothing", Body: sampleBody(`"id":"acme-tx-1",`, ``), Status: 422},
			{Name: "transaction_id a number", Body: sampleBody(`"acme-tx-1"`, `1`), Status: 422},
			{Name: "transaction_id with spaces, never trimmed", Body: sampleBody(`"acme-tx-1"`, `" acme-tx-1 "`), Status: 422},
			{Name: "amount a string", Body: sampleBody(`4200`, `"4200"`), Status: 422},
			{Name: "amount a fraction", Body: sampleBody(`4200`, `4200.5`), Status: 422},
			{Name: "amount zero", Body: sampleBody(`4200`, `0`), Status: 422},
			{Name: "currency lower case, never changed", Body: sampleBody(`"USD"`, `"usd"`), Status: 422},
			{Name: "event_id a number", Body: sampleBody(`"evt-acme-1"`, `7`), Status: 422},
			{Name: "a step through a string", Body: sampleBody(`{"minor":4200,"currency":"USD"}`, `"4200 USD"`), Status: 422},
			{Name: "case-variant key on the path", Body: sampleBody(`"minor":4200`, `"minor":4200,"Minor":1`), Status: 400},
			{Name: "a refund without its id", Body: sampleBody(`"type"`, `"event":"payment.refunded","type"`), Status: 422},
			{Name: "type a number", Body: sampleBody(`"type"`, `"event":7,"type"`), Status: 422},
			{Name: "repeated key off the path", Body: sampleBody(`"sku":"a"`, `"sku":"a","sku":"b"`), Status: 400},
		},
	}
}
