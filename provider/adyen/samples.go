package adyen

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"time"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

// sampleFiles are notifications in Adyen's documented shape (the
// AuthorisationNotificationRequestItem of Adyen's Webhooks API).
//
//go:embed samples/*.json
var sampleFiles embed.FS

// sampleKey is the HMAC key the samples are signed with, hex as Adyen's
// Customer Area shows it.
const sampleKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"

func sample(name string) []byte {
	b, err := sampleFiles.ReadFile("samples/" + name)
	if err != nil {
		panic(err)
	}
	return b
}

// item is one NotificationRequestItem wrapper; replace edits the item.
func item(psp, code, success string, replace ...string) string {
	it := `{"NotificationRequestItem":{"additionalData":{"hmacSignature":"c2ln"},` +
		`"amount":{"currency":"EUR","value":1000},"eventCode":"` + code + `",` +
		`"eventDate":"2026-11-30T12:00:00+01:00","merchantAccountCode":"PaylockECOM",` +
		`"merchantReference":"order-1","originalReference":"","paymentMethod":"visa",` +
		`"pspReference":"` + psp + `","reason":"","success":"` + success + `"}}`
	return strings.NewReplacer(replace...).Replace(it)
}

// batch is a notification of items.
func batch(items ...string) string {
	return `{"live":"false","notificationItems":[` + strings.Join(items, ",") + `]}`
}

// Samples are Adyen notifications signed with sampleKey, as Adyen sends
// them: one authorisation, a batch mixing a refused authorisation and a
// capture with two successful ones, modifications and disputes of a
// payment.
func (Provider) Samples() provider.Samples {
	one := signed(sample("authorisation.json"))
	mixed := signed(sample("batch.json"))
	capture := signed([]byte(batch(
		item("CPTR000000000001", "CAPTURE", "true", `"originalReference":""`, `"originalReference":"QFQTPCQ8HXSKGK82"`, `"value":1000`, `"value":400`),
		item("CPTR000000000002", "CAPTURE", "false", `"originalReference":""`, `"originalReference":"QFQTPCQ8HXSKGK82"`))))
	chargeback := signed([]byte(batch(
		item("DSPT000000000002", "CHARGEBACK", "true", `"originalReference":""`, `"originalReference":"QFQTPCQ8HXSKGK82"`),
		item("DSPT000000000003", "CHARGEBACK_REVERSED", "true", `"originalReference":""`, `"originalReference":"QFQTPCQ8HXSKGK82"`,
			`"2026-11-30T12:00:00+01:00"`, `"2026-11-29T12:00:00+01:00"`))))
	tooMany := make([]string, maxItems+1)
	for i := range tooMany {
		tooMany[i] = item(fmt.Sprintf("PSP%013d", i), "AUTHORISATION", "true")
	}
	later := signed([]byte(batch(
		item("RFND000000000001", "REFUND", "true", `"originalReference":""`, `"originalReference":"QFQTPCQ8HXSKGK82"`, `"value":1000`, `"value":300`),
		item("DSPT000000000001", "NOTIFICATION_OF_CHARGEBACK", "true", `"originalReference":""`, `"originalReference":"QFQTPCQ8HXSKGK82"`))))
	cancel := signed([]byte(batch(
		item("CNCL000000000001", "CANCELLATION", "true", `"originalReference":""`, `"originalReference":"UNKNOWN000000001"`))))
	noon := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	const acct = "PaylockECOM"
	ok := item("A1", "AUTHORISATION", "true")
	auth := func(replace ...string) []byte {
		return []byte(batch(ok, item("B2", "AUTHORISATION", "true", replace...)))
	}
	return provider.Samples{
		Secret: sampleKey,
		Deliveries: []provider.Delivery{
			{Name: "one authorisation", Body: one, Tampered: tampered(one), Events: []provider.Event{
				{TransactionID: "QFQTPCQ8HXSKGK82", Amount: 1000, Currency: "EUR", EventID: "QFQTPCQ8HXSKGK82:AUTHORISATION", Account: acct, Payload: itemOf(one, 0)}}},
			{Name: "a batch: the refused authorisation is a failure, the capture a capture of its payment", Body: mixed, Tampered: tampered(mixed), Events: []provider.Event{
				{TransactionID: "KHQC5N7G84BLNK43", Amount: 5000, Currency: "JPY", EventID: "KHQC5N7G84BLNK43:AUTHORISATION", Account: acct, Payload: itemOf(mixed, 0)},
				{Kind: lifecycle.Failed, TransactionID: "V4HZ4RBFJGXXGN82", Amount: 2500, Currency: "EUR", EventID: "V4HZ4RBFJGXXGN82:AUTHORISATION",
					Account: acct, At: time.Date(2026, 11, 30, 11, 2, 0, 0, time.UTC), Payload: itemOf(mixed, 1)},
				{Kind: lifecycle.Captured, TransactionID: "QFQTPCQ8HXSKGK82", Amount: 1000, Currency: "EUR", EventID: "QJJ7M5W2VS9N9K82:CAPTURE",
					CaptureID: "QJJ7M5W2VS9N9K82", Account: acct, At: time.Date(2026, 11, 30, 11, 3, 0, 0, time.UTC), Payload: itemOf(mixed, 2)},
				{TransactionID: "D7X2KL9M4PQRST61", Amount: 750, Currency: "USD", EventID: "D7X2KL9M4PQRST61:AUTHORISATION", Account: acct, Payload: itemOf(mixed, 3)}}},
			{Name: "a refund and a chargeback notice of the authorised payment", Body: later, Tampered: tampered(later), Events: []provider.Event{
				{Kind: lifecycle.Refund, TransactionID: "QFQTPCQ8HXSKGK82", Amount: 300, Currency: "EUR", EventID: "RFND000000000001:REFUND",
					RefundID: "RFND000000000001", Account: acct, At: noon, Payload: itemOf(later, 0)},
				{Kind: lifecycle.DisputeOpened, TransactionID: "QFQTPCQ8HXSKGK82", Amount: 1000, Currency: "EUR",
					EventID: "DSPT000000000001:NOTIFICATION_OF_CHARGEBACK", Account: acct, At: noon, Payload: itemOf(later, 1)}}},
			{Name: "a cancellation of a payment paylock does not know yet", Body: cancel, Tampered: tampered(cancel), Events: []provider.Event{
				{Kind: lifecycle.Canceled, TransactionID: "UNKNOWN000000001", Amount: 1000, Currency: "EUR", EventID: "CNCL000000000001:CANCELLATION",
					Account: acct, At: noon, Payload: itemOf(cancel, 0)}}},
			{Name: "a capture of the authorised payment; a capture Adyen could not make records nothing", Body: capture, Tampered: tampered(capture), Events: []provider.Event{
				{Kind: lifecycle.Captured, TransactionID: "QFQTPCQ8HXSKGK82", Amount: 400, Currency: "EUR", EventID: "CPTR000000000001:CAPTURE",
					CaptureID: "CPTR000000000001", Account: acct, At: noon, Payload: itemOf(capture, 0)}}},
			{Name: "a chargeback and its reversal: stages the signature covers", Body: chargeback, Tampered: tampered(chargeback), Events: []provider.Event{
				{Kind: lifecycle.DisputeLost, TransactionID: "QFQTPCQ8HXSKGK82", Amount: 1000, Currency: "EUR", EventID: "DSPT000000000002:CHARGEBACK",
					Stage: 1, Account: acct, At: noon, Payload: itemOf(chargeback, 0)},
				{Kind: lifecycle.DisputeWon, TransactionID: "QFQTPCQ8HXSKGK82", Amount: 1000, Currency: "EUR", EventID: "DSPT000000000003:CHARGEBACK_REVERSED",
					Stage: 2, Account: acct, At: noon.Add(-24 * time.Hour), Payload: itemOf(chargeback, 1)}}},
		},
		Refused: []provider.Refusal{
			{Name: "notificationItems missing", Body: []byte(`{"live":"false"}`), Status: 422},
			{Name: "notificationItems an object", Body: []byte(`{"notificationItems":` + ok + `}`), Status: 400},
			{Name: "more than 100 items", Body: []byte(batch(tooMany...)), Status: 422},
			{Name: "an item not an object", Body: []byte(batch(ok, `"x"`)), Status: 400},
			{Name: "success neither true nor false", Body: auth(`"success":"true"`, `"success":"TRUE"`), Status: 422},
			{Name: "pspReference with a space", Body: auth(`"pspReference":"B2"`, `"pspReference":"B 2"`), Status: 422},
			{Name: "value a fraction", Body: auth(`"value":1000`, `"value":10.5`), Status: 422},
			{Name: "value a string", Body: auth(`"value":1000`, `"value":"1000"`), Status: 400},
			{Name: "currency lower case", Body: auth(`"EUR"`, `"eur"`), Status: 422},
			{Name: "a refund naming no payment", Body: []byte(batch(item("R1", "REFUND", "true"))), Status: 422},
			{Name: "pspReference repeated with another amount", Body: []byte(batch(ok, item("A1", "AUTHORISATION", "true", `"value":1000`, `"value":999`))), Status: 422},
		},
	}
}

// signed is body signed with sampleKey.
func signed(body []byte) []byte {
	secrets, err := signature.ParseSecrets(signature.SchemeAdyen, sampleKey)
	if err != nil {
		panic(err)
	}
	out, err := signature.SignAdyenNotification(secrets[0], body)
	if err != nil {
		panic(err)
	}
	return out
}

// tampered is a signed body whose first merchantReference, a signed
// value, changed after signing.
func tampered(body []byte) []byte {
	return bytes.Replace(body, []byte(`"merchantReference":"order-`), []byte(`"merchantReference":"0rder-`), 1)
}

// itemOf is the NotificationRequestItem of body's i-th item, as received.
func itemOf(body []byte, i int) []byte {
	root, err := payload.Decode(body)
	if err != nil {
		panic(err)
	}
	list, _, err := root.Child("", "notificationItems")
	if err != nil {
		panic(err)
	}
	it, _, err := list.Items()[i].RequiredObject("", "NotificationRequestItem")
	if err != nil {
		panic(err)
	}
	return it.Raw()
}
