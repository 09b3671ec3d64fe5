package adyen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/paylock/paylock/lifecycle"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

// The samples in samples/ follow Adyen's documented standard
// notification (docs.adyen.com, Webhooks API AuthorisationNotificationRequest;
// adyen-go-api-library src/webhook NotificationRequestItem): "live" and
// "success" are strings, amount.value an integer in minor units.

// adyenItem and adyenBatch build notifications (samples.go).
var (
	adyenItem  = item
	adyenBatch = batch
)

var testAdapter = adapter{rules: payload.NewRules("", nil)}

// itemJSON is the NotificationRequestItem object of wrapper, as received.
func itemJSON(t *testing.T, body []byte, i int) []byte {
	t.Helper()
	var b struct {
		NotificationItems []struct {
			NotificationRequestItem json.RawMessage
		} `json:"notificationItems"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	return b.NotificationItems[i].NotificationRequestItem
}

func TestAdyenAdapterAcknowledgesWithAccepted(t *testing.T) {
	t.Parallel()
	a, err := Provider{}.New(provider.Config{Rules: payload.NewRules("", nil)})
	if err != nil {
		t.Fatal(err)
	}
	ack, ok := a.(provider.Acknowledger)
	if !ok {
		t.Fatal("the Adyen adapter is not an acknowledger")
	}
	if ct, body := ack.Acknowledge(); ct != "text/plain" || string(body) != "[accepted]" {
		t.Errorf("acknowledge() = %q, %q", ct, body)
	}
}

func TestAdyenAdapterRecordsSuccessfulAuthorisations(t *testing.T) {
	t.Parallel()
	a := testAdapter
	single := sample("authorisation.json")
	batch := sample("batch.json")
	hundred := make([]string, maxItems)
	hundredWant := make([]provider.Event, maxItems)
	hundredItems := make([]int, maxItems)
	for i := range hundred {
		psp := fmt.Sprintf("PSP%013d", i)
		hundred[i] = adyenItem(psp, "AUTHORISATION", "true")
		hundredWant[i] = provider.Event{TransactionID: psp, Amount: 1000, Currency: "EUR", EventID: psp + ":AUTHORISATION"}
		hundredItems[i] = i
	}
	for _, tc := range []struct {
		name  string
		body  []byte
		want  []provider.Event
		items []int // which item is each payment's payload
	}{
		{"one authorisation", single, []provider.Event{
			{TransactionID: "QFQTPCQ8HXSKGK82", Amount: 1000, Currency: "EUR", EventID: "QFQTPCQ8HXSKGK82:AUTHORISATION"}}, []int{0}},
		// Issue #23: a refused authorisation is the payment's failure (it
		// was skipped before).
		{"a batch: refused is a failure, the capture its payment's", batch, []provider.Event{
			{TransactionID: "KHQC5N7G84BLNK43", Amount: 5000, Currency: "JPY", EventID: "KHQC5N7G84BLNK43:AUTHORISATION"},
			{Kind: lifecycle.Failed, TransactionID: "V4HZ4RBFJGXXGN82", Amount: 2500, Currency: "EUR", EventID: "V4HZ4RBFJGXXGN82:AUTHORISATION",
				At: time.Date(2026, 11, 30, 11, 2, 0, 0, time.UTC)},
			{Kind: lifecycle.Captured, TransactionID: "QFQTPCQ8HXSKGK82", CaptureID: "QJJ7M5W2VS9N9K82", Amount: 1000, Currency: "EUR",
				EventID: "QJJ7M5W2VS9N9K82:CAPTURE", At: time.Date(2026, 11, 30, 11, 3, 0, 0, time.UTC)},
			{TransactionID: "D7X2KL9M4PQRST61", Amount: 750, Currency: "USD", EventID: "D7X2KL9M4PQRST61:AUTHORISATION"}}, []int{0, 1, 2, 3}},
		{"no items", []byte(adyenBatch()), nil, nil},
		{"only other events", []byte(adyenBatch(adyenItem("A1", "CAPTURE", "false"), adyenItem("A2", "REFUND", "false"),
			adyenItem("A3", "REPORT_AVAILABLE", "true"))), nil, nil},
		{"failed authorisation without pspReference or amount", []byte(adyenBatch(adyenItem("A1", "AUTHORISATION", "false",
			`"pspReference":"A1",`, ``, `"amount":{"currency":"EUR","value":1000},`, ``))), nil, nil},
		{"the same pspReference twice, same amount: once", []byte(adyenBatch(adyenItem("A1", "AUTHORISATION", "true"),
			adyenItem("A1", "AUTHORISATION", "true", `"order-1"`, `"order-2"`))), []provider.Event{
			{TransactionID: "A1", Amount: 1000, Currency: "EUR", EventID: "A1:AUTHORISATION"}}, []int{0}},
		{"a capture of the authorisation", []byte(adyenBatch(adyenItem("A1", "AUTHORISATION", "true"),
			adyenItem("C1", "CAPTURE", "true", `"value":1000`, `"value":1`, `"originalReference":""`, `"originalReference":"A1"`))), []provider.Event{
			{TransactionID: "A1", Amount: 1000, Currency: "EUR", EventID: "A1:AUTHORISATION"},
			{Kind: lifecycle.Captured, TransactionID: "A1", CaptureID: "C1", Amount: 1, Currency: "EUR", EventID: "C1:CAPTURE", At: time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)}}, []int{0, 1}},
		{"unknown members are kept", []byte(adyenBatch(adyenItem("A1", "AUTHORISATION", "true",
			`"reason":""`, `"reason":"","futureField":{"x":[1,2]}`))), []provider.Event{
			{TransactionID: "A1", Amount: 1000, Currency: "EUR", EventID: "A1:AUTHORISATION"}}, []int{0}},
		{"case-variant keys in additionalData are kept", []byte(adyenBatch(adyenItem("A1", "AUTHORISATION", "true",
			`"hmacSignature":"c2ln"`, `"hmacSignature":"c2ln","HmacSignature":"x"`))), []provider.Event{
			{TransactionID: "A1", Amount: 1000, Currency: "EUR", EventID: "A1:AUTHORISATION"}}, []int{0}},
		{"100 items", []byte(adyenBatch(hundred...)), hundredWant, hundredItems},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := a.Adapt(tc.body, "webhook-id-ignored")
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			for i, item := range tc.items {
				tc.want[i].Payload = itemJSON(t, tc.body, item)
			}
			for i := range tc.want {
				tc.want[i].Account = "PaylockECOM" // every item of these cases is of this merchant account
			}
			providertest.WantEvents(t, got, tc.want)
		})
	}
}

func TestAdyenAdapterRefusesTheWholeBatchForOneBadItem(t *testing.T) {
	t.Parallel()
	a := testAdapter
	ok := adyenItem("A1", "AUTHORISATION", "true")
	auth := func(replace ...string) string {
		return adyenBatch(ok, adyenItem("B2", "AUTHORISATION", "true", replace...))
	}
	const item1 = "notificationItems[1].NotificationRequestItem"
	tooMany := make([]string, maxItems+1)
	for i := range tooMany {
		tooMany[i] = adyenItem(fmt.Sprintf("PSP%013d", i), "AUTHORISATION", "true")
	}
	for _, tc := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"not JSON", `{"notificationItems":[`, 400, ""},
		{"an array", `[` + ok + `]`, 400, ""},
		{"notificationItems missing", `{"live":"false"}`, 422, "notificationItems"},
		{"notificationItems an object", `{"notificationItems":` + ok + `}`, 400, "notificationItems"},
		{"notificationItems case-variant", `{"NotificationItems":[` + ok + `]}`, 400, "notificationItems"},
		{"more than 100 items", adyenBatch(tooMany...), 422, "notificationItems"},
		{"an item not an object", adyenBatch(ok, `"x"`), 400, "notificationItems[1]"},
		{"NotificationRequestItem missing", adyenBatch(ok, `{}`), 422, item1},
		{"NotificationRequestItem null", adyenBatch(ok, `{"NotificationRequestItem":null}`), 400, item1},
		{"eventCode missing", auth(`"eventCode":"AUTHORISATION",`, ``), 422, item1 + ".eventCode"},
		{"success missing", auth(`,"success":"true"`, ``), 422, item1 + ".success"},
		{"success a boolean", auth(`"success":"true"`, `"success":true`), 400, item1 + ".success"},
		{"success neither true nor false", auth(`"success":"true"`, `"success":"TRUE"`), 422, item1 + ".success"},
		{"success malformed on a skipped item", adyenBatch(ok, adyenItem("B2", "CAPTURE", "yes")), 422, item1 + ".success"},
		{"pspReference missing", auth(`"pspReference":"B2",`, ``), 422, item1 + ".pspReference"},
		{"pspReference a number", auth(`"pspReference":"B2"`, `"pspReference":2`), 400, item1 + ".pspReference"},
		{"pspReference empty", auth(`"pspReference":"B2"`, `"pspReference":""`), 422, item1 + ".pspReference"},
		{"pspReference with a space", auth(`"pspReference":"B2"`, `"pspReference":"B 2"`), 422, item1 + ".pspReference"},
		{"amount missing", auth(`"amount":{"currency":"EUR","value":1000},`, ``), 422, item1 + ".amount"},
		{"amount a number", auth(`{"currency":"EUR","value":1000}`, `1000`), 400, item1 + ".amount"},
		{"value missing", auth(`"value":1000`, `"v":1000`), 422, item1 + ".amount.value"},
		{"value a string", auth(`"value":1000`, `"value":"1000"`), 400, item1 + ".amount.value"},
		{"value a fraction", auth(`"value":1000`, `"value":10.5`), 422, item1 + ".amount.value"},
		{"value zero", auth(`"value":1000`, `"value":0`), 422, item1 + ".amount.value"},
		{"value repeated", auth(`"value":1000`, `"value":1000,"value":1`), 400, item1 + ".amount.value"},
		{"currency missing", auth(`"currency":"EUR",`, ``), 422, item1 + ".amount.currency"},
		{"currency lower case", auth(`"EUR"`, `"eur"`), 422, item1 + ".amount.currency"},
		{"currency unknown", auth(`"EUR"`, `"ABC"`), 422, item1 + ".amount.currency"},
		{"pspReference repeated with another amount", adyenBatch(ok, adyenItem("A1", "AUTHORISATION", "true", `"value":1000`, `"value":999`)),
			422, item1 + ".amount.value"},
		{"pspReference repeated with another currency", adyenBatch(ok, adyenItem("A1", "AUTHORISATION", "true", `"EUR"`, `"USD"`)),
			422, item1 + ".amount.value"},
		{"repeated key in additionalData", auth(`"hmacSignature":"c2ln"`, `"hmacSignature":"c2ln","hmacSignature":"x"`),
			400, item1 + ".additionalData.hmacSignature"},
		{"trailing data", adyenBatch(ok) + `[accepted]`, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			events, err := a.Adapt([]byte(tc.body), "")
			if events != nil {
				t.Errorf("events = %+v", events)
			}
			providertest.WantRefused(t, err, tc.status, tc.field)
		})
	}
}

// FuzzAdyenAdapter checks that no body makes the Adyen adapter panic, that
// it returns a 400/422 error or events the database accepts, each
// pspReference once, each payload a NotificationRequestItem object taken
// from the body.
func FuzzAdyenAdapter(f *testing.F) {
	f.Add(sample("authorisation.json"))
	f.Add(sample("batch.json"))
	ok := adyenItem("A1", "AUTHORISATION", "true")
	for _, s := range []string{
		adyenBatch(), adyenBatch(ok, ok), adyenBatch(ok, adyenItem("A1", "AUTHORISATION", "true", `1000`, `1001`)),
		adyenBatch(adyenItem("A1", "AUTHORISATION", "false")), adyenBatch(adyenItem("A1", "CAPTURE", "true")),
		adyenBatch(adyenItem("A1", "AUTHORISATION", "true", `"success"`, `"Success"`)),
		adyenBatch(adyenItem("A1", "AUTHORISATION", "true", `"EUR"`, `"eur"`)), adyenBatch(`{}`), `{"notificationItems":{}}`,
		`{}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	a := testAdapter
	f.Fuzz(func(t *testing.T, body []byte) {
		payments, err := a.Adapt(body, "")
		providertest.CheckAdapted(t, payments, err)
		seen := map[string]bool{}
		for _, p := range payments {
			if !p.Succeeded() {
				continue
			}
			if seen[p.TransactionID] {
				t.Fatalf("pspReference %q recorded twice", p.TransactionID)
			}
			seen[p.TransactionID] = true
			if p.EventID != p.TransactionID+":AUTHORISATION" {
				t.Fatalf("event id %q for %q", p.EventID, p.TransactionID)
			}
			if len(p.Payload) == 0 || p.Payload[0] != '{' || !bytes.Contains(body, p.Payload) {
				t.Fatalf("payload %q is not an object of the body", p.Payload)
			}
		}
		if len(payments) > maxItems {
			t.Fatalf("%d payments", len(payments))
		}
	})
}
