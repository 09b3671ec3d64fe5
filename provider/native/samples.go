package native

import (
	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
)

// Samples are flat bodies signed with Standard Webhooks: each records its
// one payment under the delivery's webhook-id.
func (Provider) Samples() provider.Samples {
	return provider.Samples{
		Secret: "whsec_bmF0aXZlLXNhbXBsZS1zZWNyZXQtMDEyMzQ1Njc4OQ==",
		Deliveries: []provider.Delivery{
			{Name: "a payment", HeaderID: "msg_native_1",
				Body:   []byte(`{"transaction_id":"native-tx-1","amount":1000,"currency":"JPY"}`),
				Events: []provider.Event{{TransactionID: "native-tx-1", Amount: 1000, Currency: "JPY", EventID: "msg_native_1"}}},
			{Name: "unknown members are kept; the header's id is the event id", HeaderID: "msg_native_2",
				Body:   []byte(`{"transaction_id":"native-tx-2","amount":250,"currency":"EUR","id":"evt_body","metadata":{"order":"o-2"}}`),
				Events: []provider.Event{{TransactionID: "native-tx-2", Amount: 250, Currency: "EUR", EventID: "msg_native_2"}}},
			{Name: "the transaction id is trimmed", HeaderID: "msg_native_3",
				Body:   []byte(`{"transaction_id":"  native-tx-3\t","amount":9223372036854775807,"currency":"USD"}`),
				Events: []provider.Event{{TransactionID: "native-tx-3", Amount: 9223372036854775807, Currency: "USD", EventID: "msg_native_3"}}},
			{Name: "a refund of a recorded payment", HeaderID: "msg_native_refund",
				Body: []byte(`{"type":"refund","refund_id":"re_native_1","transaction_id":"native-tx-1","amount":400,"currency":"JPY"}`),
				Events: []provider.Event{{Kind: lifecycle.Refund, TransactionID: "native-tx-1", Amount: 400, Currency: "JPY",
					EventID: "msg_native_refund", RefundID: "re_native_1"}}},
			{Name: "a failure of a payment paylock does not know yet", HeaderID: "msg_native_failed",
				Body:   []byte(`{"type":"failed","transaction_id":"native-tx-9","amount":700,"currency":"EUR"}`),
				Events: []provider.Event{{Kind: lifecycle.Failed, TransactionID: "native-tx-9", Amount: 700, Currency: "EUR", EventID: "msg_native_failed"}}},
			{Name: "a cancellation", HeaderID: "msg_native_canceled",
				Body:   []byte(`{"type":"canceled","transaction_id":"native-tx-9","amount":700,"currency":"EUR"}`),
				Events: []provider.Event{{Kind: lifecycle.Canceled, TransactionID: "native-tx-9", Amount: 700, Currency: "EUR", EventID: "msg_native_canceled"}}},
			{Name: "type payment is today's body", HeaderID: "msg_native_4",
				Body:   []byte(`{"type":"payment","transaction_id":"native-tx-4","amount":5,"currency":"EUR"}`),
				Events: []provider.Event{{TransactionID: "native-tx-4", Amount: 5, Currency: "EUR", EventID: "msg_native_4"}}},
		},
		Refused: []provider.Refusal{
			{Name: "transaction_id missing", Body: []byte(`{"amount":1,"currency":"JPY"}`), Status: 422},
			{Name: "transaction_id a number", Body: []byte(`{"transaction_id":1,"amount":1,"currency":"JPY"}`), Status: 400},
			{Name: "transaction_id blank", Body: []byte(`{"transaction_id":"  ","amount":1,"currency":"JPY"}`), Status: 422},
			{Name: "amount a string", Body: []byte(`{"transaction_id":"tx-1","amount":"1","currency":"JPY"}`), Status: 400},
			{Name: "amount a fraction", Body: []byte(`{"transaction_id":"tx-1","amount":1.5,"currency":"JPY"}`), Status: 422},
			{Name: "amount zero", Body: []byte(`{"transaction_id":"tx-1","amount":0,"currency":"JPY"}`), Status: 422},
			{Name: "amount null", Body: []byte(`{"transaction_id":"tx-1","amount":null,"currency":"JPY"}`), Status: 400},
			{Name: "currency lower case", Body: []byte(`{"transaction_id":"tx-1","amount":1,"currency":"jpy"}`), Status: 422},
			{Name: "currency missing, no default", Body: []byte(`{"transaction_id":"tx-1","amount":1}`), Status: 422},
			{Name: "repeated key", Body: []byte(`{"transaction_id":"tx-1","amount":1,"amount":2,"currency":"JPY"}`), Status: 400},
			{Name: "case-variant key", Body: []byte(`{"transaction_id":"tx-1","Amount":1,"currency":"JPY"}`), Status: 400},
			{Name: "type unknown", Body: []byte(`{"type":"chargeback","transaction_id":"tx-1","amount":1,"currency":"JPY"}`), Status: 422},
			{Name: "type a number", Body: []byte(`{"type":1,"transaction_id":"tx-1","amount":1,"currency":"JPY"}`), Status: 400},
			{Name: "refund without refund_id", Body: []byte(`{"type":"refund","transaction_id":"tx-1","amount":1,"currency":"JPY"}`), Status: 422},
			{Name: "refund_id on a payment", Body: []byte(`{"refund_id":"re_1","transaction_id":"tx-1","amount":1,"currency":"JPY"}`), Status: 422},
			{Name: "NUL escape", Body: []byte(`{"transaction_id":"tx-1","amount":1,"currency":"JPY","note":"\u0000"}`), Status: 422},
		},
	}
}
