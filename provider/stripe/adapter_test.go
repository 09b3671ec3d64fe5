package stripe

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

// stripePI is a payment_intent.succeeded Event body with replace applied
// to its PaymentIntent.
func stripePI(replace ...string) string { return string(piEvent(replace...)) }

// newAdapter is the adapter of a source recording events (nil: the key is
// not set).
func newAdapter(t testing.TB, events []string) provider.Adapter {
	t.Helper()
	a, err := Provider{}.New(provider.Config{Rules: payload.NewRules("", nil), Settings: eventsSetting(events)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func eventsSetting(events []string) provider.Settings {
	if events == nil {
		return nil
	}
	raw, _ := json.Marshal(events)
	return provider.Settings{"events": raw}
}

func TestNewChecksTheEventsSetting(t *testing.T) {
	t.Parallel()
	rules := payload.NewRules("", nil)
	for _, events := range [][]string{nil, {"payment_intent.succeeded"}, {"charge.succeeded"},
		{"payment_intent.succeeded", "charge.succeeded"}} {
		if _, err := (Provider{}).New(provider.Config{Rules: rules, Settings: eventsSetting(events)}); err != nil {
			t.Errorf("New(events %q): %v", events, err)
		}
	}
	for _, tc := range []struct {
		settings provider.Settings
		want     string
	}{
		{eventsSetting([]string{"customer.created"}), `unknown Stripe event "customer.created" (want payment_intent.succeeded or charge.succeeded)`},
		{eventsSetting([]string{"payment_intent.succeeded", "Charge.Succeeded"}), `unknown Stripe event "Charge.Succeeded"`},
		{eventsSetting([]string{""}), `unknown Stripe event ""`},
		{eventsSetting([]string{}), "empty: omit it for the default, payment_intent.succeeded"},
		{eventsSetting([]string{"charge.succeeded", "charge.succeeded"}), `"charge.succeeded" listed twice`},
		{provider.Settings{"events": []byte(`"charge.succeeded"`)}, "want a list of event types"},
		{provider.Settings{"fields": []byte(`{}`)}, "unknown key"},
	} {
		_, err := (Provider{}).New(provider.Config{Rules: rules, Settings: tc.settings})
		var se *provider.SettingError
		if !errors.As(err, &se) || !strings.Contains(se.Err.Error(), tc.want) {
			t.Errorf("New(%s) = %v, want a *SettingError saying %q", tc.settings, err, tc.want)
			continue
		}
		if want := tc.settings.Keys()[0]; se.Key != want {
			t.Errorf("New(%s): key %q, want %q", tc.settings, se.Key, want)
		}
	}
}

func TestStripeAdapterRecordsTheListedEvents(t *testing.T) {
	t.Parallel()
	piFixture := sample("payment_intent.succeeded.json")
	chFixture := sample("charge.succeeded.json")
	cuFixture := sample("customer.created.json")
	chOfPI := bytes.Replace(chFixture, []byte(`"payment_intent": null`), []byte(`"payment_intent": "pi_3QpaylockPI0001"`), 1)
	both := []string{"payment_intent.succeeded", "charge.succeeded"}
	for _, tc := range []struct {
		name   string
		events []string
		body   []byte
		want   []provider.Event // Payload is the body
	}{
		{"payment_intent.succeeded", nil, piFixture, []provider.Event{
			{TransactionID: "pi_3QpaylockPI0001", Amount: 2000, Currency: "JPY", EventID: "evt_3QpaylockPI0001"}}},
		{"charge.succeeded listed", []string{"charge.succeeded"}, chFixture, []provider.Event{
			{TransactionID: "ch_3QpaylockCH0001", Amount: 1500, Currency: "EUR", EventID: "evt_3QpaylockCH0001"}}},
		{"charge.succeeded without a PaymentIntent, both listed", both, chFixture, []provider.Event{
			{TransactionID: "ch_3QpaylockCH0001", Amount: 1500, Currency: "EUR", EventID: "evt_3QpaylockCH0001"}}},
		{"charge of a PaymentIntent, both listed: its PaymentIntent records it", both, chOfPI, nil},
		{"charge of a PaymentIntent, only charges listed", []string{"charge.succeeded"}, chOfPI, []provider.Event{
			{TransactionID: "ch_3QpaylockCH0001", Amount: 1500, Currency: "EUR", EventID: "evt_3QpaylockCH0001"}}},
		{"charge.succeeded not listed", nil, chFixture, nil},
		{"payment_intent.succeeded not listed", []string{"charge.succeeded"}, piFixture, nil},
		{"customer.created", both, cuFixture, nil},
		{"ignored type without data", nil, []byte(`{"id":"evt_2","object":"event","type":"invoice.paid"}`), nil},
		{"upper-case currency as is", nil, []byte(stripePI(`"jpy"`, `"JPY"`)), []provider.Event{
			{TransactionID: "pi_1", Amount: 2000, Currency: "JPY", EventID: "evt_1"}}},
		{"amount_received, not amount", nil, []byte(stripePI(`"amount":2000`, `"amount":2500`)), []provider.Event{
			{TransactionID: "pi_1", Amount: 2000, Currency: "JPY", EventID: "evt_1"}}},
		{"case-variant keys off the path are kept", nil, []byte(stripePI(`"status"`, `"metadata":{"k":"1","K":"2"},"status"`)),
			[]provider.Event{{TransactionID: "pi_1", Amount: 2000, Currency: "JPY", EventID: "evt_1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := newAdapter(t, tc.events).Adapt(tc.body, "")
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			for i := range tc.want {
				tc.want[i].Payload = tc.body
			}
			providertest.WantEvents(t, got, tc.want)
		})
	}
}

func TestStripeAdapterRefusesMalformedEvents(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, []string{"payment_intent.succeeded", "charge.succeeded"})
	const ch = `{"id":"ch_1","object":"charge","amount":1500,"currency":"eur","payment_intent":null}`
	for _, tc := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"not JSON", `{"id":`, 400, ""},
		{"an array", `[]`, 400, ""},
		{"trailing data", stripePI() + `{}`, 400, ""},
		{"not an event", `{"id":"pi_1","object":"payment_intent","amount_received":1,"currency":"jpy"}`, 422, "object"},
		{"object missing", `{"id":"evt_1","type":"payment_intent.succeeded"}`, 422, "object"},
		{"event id missing", `{"object":"event","type":"payment_intent.succeeded"}`, 422, "id"},
		{"event id a number", `{"id":1,"object":"event","type":"payment_intent.succeeded"}`, 400, "id"},
		{"event id too long", strings.Replace(stripePI(), `"evt_1"`, `"evt_`+strings.Repeat("x", 255)+`"`, 1), 422, "id"},
		{"type missing", `{"id":"evt_1","object":"event"}`, 422, "type"},
		{"type null", `{"id":"evt_1","object":"event","type":null}`, 400, "type"},
		{"type case-variant", `{"id":"evt_1","object":"event","Type":"payment_intent.succeeded"}`, 400, "type"},
		{"data missing", `{"id":"evt_1","object":"event","type":"payment_intent.succeeded"}`, 422, "data"},
		{"data a string", `{"id":"evt_1","object":"event","type":"payment_intent.succeeded","data":"x"}`, 400, "data"},
		{"data.object missing", `{"id":"evt_1","object":"event","type":"payment_intent.succeeded","data":{}}`, 422, "data.object"},
		{"data.object a string", eventJSON("payment_intent.succeeded", `"pi_1"`), 400, "data.object"},
		{"data.object of another type", eventJSON("payment_intent.succeeded", ch), 422, "data.object.object"},
		{"charge event carrying a PaymentIntent", eventJSON("charge.succeeded", piObject), 422, "data.object.object"},
		{"id missing", stripePI(`"id":"pi_1",`, ``), 422, "data.object.id"},
		{"id empty", stripePI(`"pi_1"`, `""`), 422, "data.object.id"},
		{"id with a space", stripePI(`"pi_1"`, `"pi 1"`), 422, "data.object.id"},
		{"amount_received missing", stripePI(`"amount_received":2000,`, ``), 422, "data.object.amount_received"},
		{"amount_received a string", stripePI(`"amount_received":2000`, `"amount_received":"2000"`), 400, "data.object.amount_received"},
		{"amount_received null", stripePI(`"amount_received":2000`, `"amount_received":null`), 400, "data.object.amount_received"},
		{"amount_received a fraction", stripePI(`"amount_received":2000`, `"amount_received":2000.5`), 422, "data.object.amount_received"},
		{"amount_received an exponent", stripePI(`"amount_received":2000`, `"amount_received":2e3`), 422, "data.object.amount_received"},
		{"amount_received zero", stripePI(`"amount_received":2000`, `"amount_received":0`), 422, "data.object.amount_received"},
		{"amount_received negative", stripePI(`"amount_received":2000`, `"amount_received":-1`), 422, "data.object.amount_received"},
		{"amount_received beyond int64", stripePI(`"amount_received":2000`, `"amount_received":9223372036854775808`), 422, "data.object.amount_received"},
		{"amount_received repeated", stripePI(`"amount_received":2000`, `"amount_received":2000,"amount_received":1`), 400, "data.object.amount_received"},
		{"amount_received case-variant", stripePI(`"amount_received":2000`, `"amount_received":2000,"Amount_Received":1`), 400, "data.object.amount_received"},
		{"charge amount missing", eventJSON("charge.succeeded", strings.Replace(ch, `"amount":1500,`, ``, 1)), 422, "data.object.amount"},
		{"charge payment_intent case-variant", eventJSON("charge.succeeded", strings.Replace(ch, `"payment_intent"`, `"Payment_Intent"`, 1)), 400, "data.object.payment_intent"},
		{"currency missing", stripePI(`,"currency":"jpy"`, ``), 422, "data.object.currency"},
		{"currency null", stripePI(`"jpy"`, `null`), 400, "data.object.currency"},
		{"currency unknown", stripePI(`"jpy"`, `"abc"`), 422, "data.object.currency"},
		{"currency testing code", stripePI(`"jpy"`, `"xts"`), 422, "data.object.currency"},
		{"currency dotless i", stripePI(`"jpy"`, `"ıdr"`), 422, "data.object.currency"},
		{"repeated key elsewhere", stripePI(`"status":"succeeded"`, `"metadata":{"k":"1","k":"2"}`), 400, "data.object.metadata.k"},
		{"repeated key in an ignored event", `{"id":"evt_1","object":"event","type":"customer.created","data":{"object":{"id":"cus_1","id":"cus_2"}}}`, 400, "data.object.id"},
		{"NUL escape", stripePI(`"succeeded"`, `"succ\u0000eeded"`), 422, ""},
		{"invalid UTF-8", stripePI(`"succeeded"`, "\"succ\xffeeded\""), 400, ""},
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

// FuzzStripeAdapter checks that no body makes the Stripe adapter panic and
// that it returns either a 400/422 error or events the database accepts.
func FuzzStripeAdapter(f *testing.F) {
	f.Add(sample("payment_intent.succeeded.json"))
	f.Add(sample("charge.succeeded.json"))
	f.Add(sample("customer.created.json"))
	for _, s := range []string{
		stripePI(), stripePI(`"jpy"`, `"JPY"`), stripePI(`2000,"currency"`, `2000.5,"currency"`),
		stripePI(`"amount_received":2000`, `"amount_received":2000,"amount_received":1`),
		stripePI(`"amount_received":2000`, `"Amount_received":2000`), stripePI(`"jpy"`, `"ıdr"`),
		eventJSON("charge.succeeded", `{"id":"ch_1","object":"charge","amount":1,"currency":"eur","payment_intent":"pi_1"}`),
		eventJSON("charge.succeeded", `{"id":"ch_1","object":"charge","amount":1,"currency":"eur","payment_intent":null}`),
		`{"id":"evt_1","object":"event","type":"x"}`, `{}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	a := newAdapter(f, []string{"payment_intent.succeeded", "charge.succeeded"})
	f.Fuzz(func(t *testing.T, body []byte) {
		events, err := a.Adapt(body, "")
		providertest.CheckAdapted(t, events, err)
		if len(events) > 1 {
			t.Fatalf("one event made %d payments", len(events))
		}
		for _, p := range events {
			if !bytes.Equal(p.Payload, body) {
				t.Fatalf("payload is not the event body")
			}
		}
	})
}
