package mapped

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

var mappedTestFields = map[string]string{
	"transaction_id": "/data/id",
	"amount":         "/data/amount/value",
	"currency":       "/data/amount/currency",
}

func withFields(extra map[string]string) map[string]string {
	m := maps.Clone(mappedTestFields)
	for k, v := range extra {
		if v == "" {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	return m
}

const mappedBody = `{"type":"payment.completed","event":{"id":"ev-1"},` +
	`"data":{"id":"tx-1","amount":{"value":1000,"currency":"JPY"},"items":[{"sku":"a"},{"sku":"b"}]},` +
	`"a/b":{"~c":"tx-slash"},"":{"":"tx-empty"}}`

func mappedVariant(replace ...string) string {
	return strings.NewReplacer(replace...).Replace(mappedBody)
}

// settings are the fields setting of fields (nil: the key is not set).
func settings(fields map[string]string) provider.Settings {
	if fields == nil {
		return nil
	}
	raw, _ := json.Marshal(fields)
	return provider.Settings{"fields": raw}
}

// newAdapter is the adapter of fields, or fails the test.
func newAdapter(t testing.TB, fields map[string]string) provider.Adapter {
	t.Helper()
	a, err := Provider{}.New(provider.Config{Rules: payload.NewRules("", nil), Settings: settings(fields)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestMappedAdapterConstructor(t *testing.T) {
	t.Parallel()
	rules := payload.NewRules("", nil)
	for _, fields := range []map[string]string{
		mappedTestFields,
		withFields(map[string]string{"event_id": "/event/id"}),
		withFields(map[string]string{"transaction_id": "/a~1b/~0c"}),
	} {
		if _, err := (Provider{}).New(provider.Config{Rules: rules, Settings: settings(fields)}); err != nil {
			t.Errorf("New(%v): %v", fields, err)
		}
	}
	for _, tc := range []struct {
		name     string
		settings provider.Settings
		key      string // what the error must name
		want     string // and say
	}{
		{"no fields", nil, "fields", "missing: adapter mapped needs JSON pointers for transaction_id, amount, currency"},
		{"fields not a map", provider.Settings{"fields": []byte(`["/id"]`)}, "fields", "want a map of payment field to JSON pointer"},
		{"another key", provider.Settings{"fields": []byte(`{}`), "events": []byte(`[]`)}, "events", "unknown key"},
		{"transaction_id missing", settings(withFields(map[string]string{"transaction_id": ""})), "fields.transaction_id", "missing: a JSON pointer such as /data/id"},
		{"amount missing", settings(withFields(map[string]string{"amount": ""})), "fields.amount", "missing"},
		{"currency missing", settings(withFields(map[string]string{"currency": ""})), "fields.currency", "missing"},
		{"unknown field", settings(withFields(map[string]string{"txid": "/id"})), "fields.txid", "unknown field (want transaction_id, amount, currency, event_id)"},
		{"unknown field, case variant", settings(withFields(map[string]string{"Amount": "/x"})), "fields.Amount", "unknown field"},
		{"no leading slash", settings(withFields(map[string]string{"amount": "data/amount"})), "fields.amount", `"data/amount" is not a JSON pointer (must start with /)`},
		{"no leading slash, currency", settings(withFields(map[string]string{"currency": "x"})), "fields.currency", "must start with /"},
		{"empty pointer", settings(map[string]string{"transaction_id": "/a", "amount": "/b", "currency": ""}), "fields.currency", "must start with /"},
		{"a URI fragment", settings(withFields(map[string]string{"transaction_id": "#/data/id"})), "fields.transaction_id", "must start with /"},
		{"bad escape", settings(withFields(map[string]string{"event_id": "/event/~2"})), "fields.event_id", "~ must be written ~0"},
		{"trailing tilde", settings(withFields(map[string]string{"currency": "/data/~"})), "fields.currency", "not a JSON pointer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := Provider{}.New(provider.Config{Rules: rules, Settings: tc.settings})
			var se *provider.SettingError
			if !errors.As(err, &se) || a != nil {
				t.Fatalf("New = %v, %v, want a *provider.SettingError", a, err)
			}
			if se.Key != tc.key || !strings.Contains(se.Err.Error(), tc.want) {
				t.Errorf("error key %q, %q; want %q saying %q", se.Key, se.Err, tc.key, tc.want)
			}
		})
	}
}

func TestMappedAdapterReadsThePointers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		fields   map[string]string
		body     string
		headerID string
		want     provider.Event
	}{
		{"the mapped fields, event id from the header", mappedTestFields, mappedBody, "msg_1",
			provider.Event{TransactionID: "tx-1", Amount: 1000, Currency: "JPY", EventID: "msg_1"}},
		{"no event id anywhere", mappedTestFields, mappedBody, "",
			provider.Event{TransactionID: "tx-1", Amount: 1000, Currency: "JPY"}},
		{"event id from the body wins", withFields(map[string]string{"event_id": "/event/id"}), mappedBody, "msg_1",
			provider.Event{TransactionID: "tx-1", Amount: 1000, Currency: "JPY", EventID: "ev-1"}},
		{"an array index", withFields(map[string]string{"transaction_id": "/data/items/1/sku"}), mappedBody, "",
			provider.Event{TransactionID: "b", Amount: 1000, Currency: "JPY"}},
		{"escaped keys", withFields(map[string]string{"transaction_id": "/a~1b/~0c"}), mappedBody, "",
			provider.Event{TransactionID: "tx-slash", Amount: 1000, Currency: "JPY"}},
		{"empty keys", withFields(map[string]string{"transaction_id": "//"}), mappedBody, "",
			provider.Event{TransactionID: "tx-empty", Amount: 1000, Currency: "JPY"}},
		{"case-variant keys off the path are kept", mappedTestFields, mappedVariant(`"type"`, `"Type":1,"type"`), "",
			provider.Event{TransactionID: "tx-1", Amount: 1000, Currency: "JPY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := newAdapter(t, tc.fields).Adapt([]byte(tc.body), tc.headerID)
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			tc.want.Payload = []byte(tc.body)
			providertest.WantEvents(t, got, []provider.Event{tc.want})
		})
	}
}

func TestMappedAdapterRefusesWhatThePointersCannotRead(t *testing.T) {
	t.Parallel()
	withEvent := withFields(map[string]string{"event_id": "/event/id"})
	for _, tc := range []struct {
		name   string
		fields map[string]string
		body   string
		status int
		field  string
	}{
		{"not JSON", mappedTestFields, `{"data":`, 400, ""},
		{"an array", mappedTestFields, `[` + mappedBody + `]`, 400, ""},
		{"trailing data", mappedTestFields, mappedBody + `{}`, 400, ""},
		{"repeated key off the path", mappedTestFields, mappedVariant(`"sku":"a"`, `"sku":"a","sku":"b"`), 400, "data.items[0].sku"},
		{"repeated key on the path", mappedTestFields, mappedVariant(`"value":1000`, `"value":1000,"value":1`), 400, "data.amount.value"},
		{"case-variant key on the path", mappedTestFields, mappedVariant(`"value":1000`, `"value":1000,"Value":1`), 400, "/data/amount/value"},
		{"transaction_id resolves to nothing", mappedTestFields, mappedVariant(`"id":"tx-1",`, ``), 422, "/data/id"},
		{"transaction_id a number", mappedTestFields, mappedVariant(`"tx-1"`, `1`), 422, "/data/id"},
		{"transaction_id null", mappedTestFields, mappedVariant(`"tx-1"`, `null`), 422, "/data/id"},
		{"transaction_id with spaces, never trimmed", mappedTestFields, mappedVariant(`"tx-1"`, `" tx-1 "`), 422, "/data/id"},
		{"transaction_id too long", mappedTestFields, mappedVariant(`"tx-1"`, `"`+strings.Repeat("t", 256)+`"`), 422, "/data/id"},
		{"a step through a string", mappedTestFields, mappedVariant(`"amount":{"value":1000,"currency":"JPY"}`, `"amount":"1000 JPY"`), 422, "/data/amount/value"},
		{"amount a string", mappedTestFields, mappedVariant(`1000`, `"1000"`), 422, "/data/amount/value"},
		{"amount a fraction", mappedTestFields, mappedVariant(`1000`, `1000.5`), 422, "/data/amount/value"},
		{"amount an exponent", mappedTestFields, mappedVariant(`1000`, `1e3`), 422, "/data/amount/value"},
		{"amount zero", mappedTestFields, mappedVariant(`1000`, `0`), 422, "/data/amount/value"},
		{"amount negative", mappedTestFields, mappedVariant(`1000`, `-1000`), 422, "/data/amount/value"},
		{"amount beyond int64", mappedTestFields, mappedVariant(`1000`, `99999999999999999999`), 422, "/data/amount/value"},
		{"currency lower case, never changed", mappedTestFields, mappedVariant(`"JPY"`, `"jpy"`), 422, "/data/amount/currency"},
		{"currency unknown", mappedTestFields, mappedVariant(`"JPY"`, `"ABC"`), 422, "/data/amount/currency"},
		{"currency an object", mappedTestFields, mappedVariant(`"JPY"`, `{"code":"JPY"}`), 422, "/data/amount/currency"},
		{"event_id resolves to nothing", withEvent, mappedVariant(`"event":{"id":"ev-1"}`, `"event":{}`), 422, "/event/id"},
		{"event_id a number", withEvent, mappedVariant(`"ev-1"`, `7`), 422, "/event/id"},
		{"event_id too long", withEvent, mappedVariant(`"ev-1"`, `"`+strings.Repeat("e", 256)+`"`), 422, "/event/id"},
		{"index with a leading zero", withFields(map[string]string{"transaction_id": "/data/items/01/sku"}), mappedBody, 422, "/data/items/01/sku"},
		{"index past the end", withFields(map[string]string{"transaction_id": "/data/items/2/sku"}), mappedBody, 422, "/data/items/2/sku"},
		{"index -", withFields(map[string]string{"transaction_id": "/data/items/-"}), mappedBody, 422, "/data/items/-"},
		{"index not a number", withFields(map[string]string{"transaction_id": "/data/items/a"}), mappedBody, 422, "/data/items/a"},
		{"index beyond int", withFields(map[string]string{"transaction_id": "/data/items/99999999999999999999"}), mappedBody, 422, "/data/items/99999999999999999999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			events, err := newAdapter(t, tc.fields).Adapt([]byte(tc.body), "msg_1")
			if events != nil {
				t.Errorf("events = %+v", events)
			}
			providertest.WantRefused(t, err, tc.status, tc.field)
		})
	}
}

// FuzzMappedAdapter checks that no body makes the mapped adapter panic and
// that it returns a 400/422 error or exactly one event the database
// accepts, with the whole body as payload.
func FuzzMappedAdapter(f *testing.F) {
	for _, s := range []string{
		mappedBody, mappedVariant(`"JPY"`, `"jpy"`), mappedVariant(`1000`, `1e3`), mappedVariant(`1000`, `"1000"`),
		mappedVariant(`"value":1000`, `"value":1000,"Value":1`), mappedVariant(`"id":"tx-1",`, ``),
		`{"data":{"id":"x","amount":{"value":1,"currency":"EUR"}},"event":{"id":""}}`,
		`{"data":[]}`, `{}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	a := newAdapter(f, withFields(map[string]string{"event_id": "/event/id"}))
	f.Fuzz(func(t *testing.T, body []byte) {
		payments, err := a.Adapt(body, "")
		providertest.CheckAdapted(t, payments, err)
		if err == nil && (len(payments) != 1 || !bytes.Equal(payments[0].Payload, body)) {
			t.Fatalf("payments = %+v", payments)
		}
	})
}

func TestMappedKeptNamesTheTypeWhereverTheBodyHoldsIt(t *testing.T) {
	t.Parallel()
	raw, _ := json.Marshal(withFields(map[string]string{"type": "/event/kind"}))
	a, err := Provider{}.New(provider.Config{Rules: payload.NewRules("", nil),
		Settings: provider.Settings{"fields": raw, "types": []byte(`{"payment.completed": "payment"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"top","event":{"kind":"payment.disputed"},"data":{"id":"tx-1","amount":{"value":1000,"currency":"JPY"}}}`)
	if events, err := a.Adapt(body, ""); err != nil || len(events) != 0 {
		t.Fatalf("Adapt: %v, %v; want the unlisted type ignored", events, err)
	}
	kept := a.(provider.Keeper).Kept(body)
	if len(kept) != 1 || kept[0].EventType != "payment.disputed" || !bytes.Equal(kept[0].Body, body) || kept[0].Key != nil {
		t.Errorf("Kept = %+v; want the body whole, typed payment.disputed", kept)
	}
	// Without a type field: a top-level "type" string, as any body.
	if kept := newAdapter(t, mappedTestFields).(provider.Keeper).Kept([]byte(mappedBody)); kept[0].EventType != "payment.completed" {
		t.Errorf("Kept without a type field = %+v; want the top-level type", kept)
	}
}
