package native

import "github.com/paylock/paylock/provider"

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
			{Name: "NUL escape", Body: []byte(`{"transaction_id":"tx-1","amount":1,"currency":"JPY","note":"\u0000"}`), Status: 422},
		},
	}
}
