package adyen

import (
	"bytes"
	"embed"
	"fmt"
	"strings"

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
// capture with two successful ones, and a capture alone.
func (Provider) Samples() provider.Samples {
	one := signed(sample("authorisation.json"))
	mixed := signed(sample("batch.json"))
	capture := signed(bytes.ReplaceAll(sample("authorisation.json"), []byte(`"AUTHORISATION"`), []byte(`"CAPTURE"`)))
	tooMany := make([]string, maxItems+1)
	for i := range tooMany {
		tooMany[i] = item(fmt.Sprintf("PSP%013d", i), "AUTHORISATION", "true")
	}
	ok := item("A1", "AUTHORISATION", "true")
	auth := func(replace ...string) []byte {
		return []byte(batch(ok, item("B2", "AUTHORISATION", "true", replace...)))
	}
	return provider.Samples{
		Secret: sampleKey,
		Deliveries: []provider.Delivery{
			{Name: "one authorisation", Body: one, Tampered: tampered(one), Events: []provider.Event{
				{TransactionID: "QFQTPCQ8HXSKGK82", Amount: 1000, Currency: "EUR", EventID: "QFQTPCQ8HXSKGK82:AUTHORISATION", Payload: itemOf(one, 0)}}},
			{Name: "a batch: the refused authorisation and the capture are not recorded", Body: mixed, Tampered: tampered(mixed), Events: []provider.Event{
				{TransactionID: "KHQC5N7G84BLNK43", Amount: 5000, Currency: "JPY", EventID: "KHQC5N7G84BLNK43:AUTHORISATION", Payload: itemOf(mixed, 0)},
				{TransactionID: "D7X2KL9M4PQRST61", Amount: 750, Currency: "USD", EventID: "D7X2KL9M4PQRST61:AUTHORISATION", Payload: itemOf(mixed, 3)}}},
			{Name: "a capture alone records nothing", Body: capture, Tampered: tampered(capture)},
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
