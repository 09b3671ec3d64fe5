package handler

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/paylock/paylock/store"
)

// stripeEventJSON is a Stripe Event of type typ around data.object obj.
func stripeEventJSON(typ, obj string) string {
	return `{"id":"evt_1","object":"event","api_version":"2025-08-27.basil","type":"` + typ +
		`","data":{"object":` + obj + `},"livemode":false}`
}

const stripePIObject = `{"id":"pi_1","object":"payment_intent","amount":2000,"amount_received":2000,"currency":"jpy","status":"succeeded"}`

func stripePI(replace ...string) string {
	return stripeEventJSON("payment_intent.succeeded", strings.NewReplacer(replace...).Replace(stripePIObject))
}

func TestStripeAdapterConstructor(t *testing.T) {
	t.Parallel()
	rules := newInputRules("", nil)
	for _, events := range [][]string{nil, {}, {"payment_intent.succeeded"}, {"charge.succeeded"},
		{"payment_intent.succeeded", "charge.succeeded"}} {
		if _, err := newStripeAdapter(rules, events); err != nil {
			t.Errorf("newStripeAdapter(%q): %v", events, err)
		}
	}
	for _, events := range [][]string{{"customer.created"}, {"payment_intent.succeeded", "Charge.Succeeded"}, {""}} {
		_, err := newStripeAdapter(rules, events)
		if !errors.Is(err, errAdapterConfig) {
			t.Errorf("newStripeAdapter(%q) = %v, want errAdapterConfig", events, err)
			continue
		}
		if bad := events[len(events)-1]; !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("newStripeAdapter(%q) = %v, does not name %q", events, err, bad)
		}
	}
}

func TestStripeAdapterRecordsTheListedEvents(t *testing.T) {
	t.Parallel()
	rules := newInputRules("", nil)
	piFixture := readFixture(t, "stripe", "payment_intent.succeeded.json")
	chFixture := readFixture(t, "stripe", "charge.succeeded.json")
	cuFixture := readFixture(t, "stripe", "customer.created.json")
	chOfPI := bytes.Replace(chFixture, []byte(`"payment_intent": null`), []byte(`"payment_intent": "pi_3QpaylockPI0001"`), 1)
	both := []string{"payment_intent.succeeded", "charge.succeeded"}
	for _, tc := range []struct {
		name   string
		events []string
		body   []byte
		want   []store.Payment // Payload is the body unless set
	}{
		{"payment_intent.succeeded", nil, piFixture, []store.Payment{
			{TransactionID: "pi_3QpaylockPI0001", Amount: 2000, Currency: "JPY", EventID: "evt_3QpaylockPI0001"}}},
		{"charge.succeeded listed", []string{"charge.succeeded"}, chFixture, []store.Payment{
			{TransactionID: "ch_3QpaylockCH0001", Amount: 1500, Currency: "EUR", EventID: "evt_3QpaylockCH0001"}}},
		{"charge.succeeded without a PaymentIntent, both listed", both, chFixture, []store.Payment{
			{TransactionID: "ch_3QpaylockCH0001", Amount: 1500, Currency: "EUR", EventID: "evt_3QpaylockCH0001"}}},
		{"charge of a PaymentIntent, both listed: its PaymentIntent records it", both, chOfPI, nil},
		{"charge of a PaymentIntent, only charges listed", []string{"charge.succeeded"}, chOfPI, []store.Payment{
			{TransactionID: "ch_3QpaylockCH0001", Amount: 1500, Currency: "EUR", EventID: "evt_3QpaylockCH0001"}}},
		{"charge.succeeded not listed", nil, chFixture, nil},
		{"payment_intent.succeeded not listed", []string{"charge.succeeded"}, piFixture, nil},
		{"customer.created", both, cuFixture, nil},
		{"ignored type without data", nil, []byte(`{"id":"evt_2","object":"event","type":"invoice.paid"}`), nil},
		{"upper-case currency as is", nil, []byte(stripePI(`"jpy"`, `"JPY"`)), []store.Payment{
			{TransactionID: "pi_1", Amount: 2000, Currency: "JPY", EventID: "evt_1"}}},
		{"amount_received, not amount", nil, []byte(stripePI(`"amount":2000`, `"amount":2500`)), []store.Payment{
			{TransactionID: "pi_1", Amount: 2000, Currency: "JPY", EventID: "evt_1"}}},
		{"case-variant keys off the path are kept", nil, []byte(stripePI(`"status"`, `"metadata":{"k":"1","K":"2"},"status"`)),
			[]store.Payment{{TransactionID: "pi_1", Amount: 2000, Currency: "JPY", EventID: "evt_1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := newStripeAdapter(rules, tc.events)
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.adapt(tc.body, "")
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			for i := range tc.want {
				tc.want[i].Payload = tc.body
			}
			wantPayments(t, got, tc.want)
		})
	}
}

// wantPayments compares payments field by field, payloads as bytes.
func wantPayments(t *testing.T, got, want []store.Payment) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d payments %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Source != "" || g.TransactionID != w.TransactionID || g.Amount != w.Amount ||
			g.Currency != w.Currency || g.EventID != w.EventID {
			t.Errorf("payment %d = %s %d %s event %q source %q, want %s %d %s event %q", i,
				g.TransactionID, g.Amount, g.Currency, g.EventID, g.Source, w.TransactionID, w.Amount, w.Currency, w.EventID)
		}
		if !bytes.Equal(g.Payload, w.Payload) {
			t.Errorf("payment %d payload = %s, want %s", i, g.Payload, w.Payload)
		}
	}
}

func TestStripeAdapterRefusesMalformedEvents(t *testing.T) {
	t.Parallel()
	a, err := newStripeAdapter(newInputRules("", nil), []string{"payment_intent.succeeded", "charge.succeeded"})
	if err != nil {
		t.Fatal(err)
	}
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
		{"data.object a string", stripeEventJSON("payment_intent.succeeded", `"pi_1"`), 400, "data.object"},
		{"data.object of another type", stripeEventJSON("payment_intent.succeeded", ch), 422, "data.object.object"},
		{"charge event carrying a PaymentIntent", stripeEventJSON("charge.succeeded", stripePIObject), 422, "data.object.object"},
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
		{"charge amount missing", stripeEventJSON("charge.succeeded", strings.Replace(ch, `"amount":1500,`, ``, 1)), 422, "data.object.amount"},
		{"charge payment_intent case-variant", stripeEventJSON("charge.succeeded", strings.Replace(ch, `"payment_intent"`, `"Payment_Intent"`, 1)), 400, "data.object.payment_intent"},
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
			payments, err := a.adapt([]byte(tc.body), "")
			if payments != nil {
				t.Errorf("payments = %+v", payments)
			}
			wantAdapterProblem(t, err, tc.status, tc.field)
		})
	}
}

// FuzzStripeAdapter checks that no body makes the Stripe adapter panic and
// that it returns either a 400/422 problem or payments the database accepts.
func FuzzStripeAdapter(f *testing.F) {
	f.Add(readFixture(f, "stripe", "payment_intent.succeeded.json"))
	f.Add(readFixture(f, "stripe", "charge.succeeded.json"))
	f.Add(readFixture(f, "stripe", "customer.created.json"))
	for _, s := range []string{
		stripePI(), stripePI(`"jpy"`, `"JPY"`), stripePI(`2000,"currency"`, `2000.5,"currency"`),
		stripePI(`"amount_received":2000`, `"amount_received":2000,"amount_received":1`),
		stripePI(`"amount_received":2000`, `"Amount_received":2000`), stripePI(`"jpy"`, `"ıdr"`),
		stripeEventJSON("charge.succeeded", `{"id":"ch_1","object":"charge","amount":1,"currency":"eur","payment_intent":"pi_1"}`),
		stripeEventJSON("charge.succeeded", `{"id":"ch_1","object":"charge","amount":1,"currency":"eur","payment_intent":null}`),
		`{"id":"evt_1","object":"event","type":"x"}`, `{}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	a, err := newStripeAdapter(newInputRules("", nil), []string{"payment_intent.succeeded", "charge.succeeded"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		payments, err := a.adapt(body, "")
		checkAdapted(t, payments, err)
		if len(payments) > 1 {
			t.Fatalf("one event made %d payments", len(payments))
		}
		for _, p := range payments {
			if !bytes.Equal(p.Payload, body) {
				t.Fatalf("payload is not the event body")
			}
		}
	})
}
