package handler

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/paylock/paylock/store"
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

func TestParseJSONPointer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"/a", []string{"a"}},
		{"/a/b/0", []string{"a", "b", "0"}},
		{"/", []string{""}},
		{"/a//b", []string{"a", "", "b"}},
		{"/a~1b/~0c", []string{"a/b", "~c"}},
		{"/~01", []string{"~1"}},
		{"/~10", []string{"/0"}},
	} {
		p, err := parseJSONPointer(tc.in)
		if err != nil || !slices.Equal(p.tokens, tc.want) || p.text != tc.in {
			t.Errorf("parseJSONPointer(%q) = %q, %v, want %q", tc.in, p.tokens, err, tc.want)
		}
	}
	for _, in := range []string{"", "a/b", "#/a", "/a~", "/a~2", "/~a", "/a/~/b"} {
		if _, err := parseJSONPointer(in); err == nil {
			t.Errorf("parseJSONPointer(%q) accepted", in)
		}
	}
}

func TestMappedAdapterConstructor(t *testing.T) {
	t.Parallel()
	rules := newInputRules("", nil)
	for _, fields := range []map[string]string{
		mappedTestFields,
		withFields(map[string]string{"event_id": "/event/id"}),
		withFields(map[string]string{"transaction_id": "/a~1b/~0c"}),
	} {
		if _, err := newMappedAdapter(rules, fields); err != nil {
			t.Errorf("newMappedAdapter(%v): %v", fields, err)
		}
	}
	for _, tc := range []struct {
		name   string
		fields map[string]string
		names  string // what the error must name
	}{
		{"no fields", nil, `"transaction_id"`},
		{"transaction_id missing", withFields(map[string]string{"transaction_id": ""}), `"transaction_id"`},
		{"amount missing", withFields(map[string]string{"amount": ""}), `"amount"`},
		{"currency missing", withFields(map[string]string{"currency": ""}), `"currency"`},
		{"unknown field", withFields(map[string]string{"txid": "/id"}), `"txid"`},
		{"unknown field, case variant", withFields(map[string]string{"Amount": "/x"}), `"Amount"`},
		{"no leading slash", withFields(map[string]string{"amount": "data/amount"}), `"amount"`},
		{"no leading slash, currency", withFields(map[string]string{"currency": "x"}), `"currency"`},
		{"empty pointer", map[string]string{"transaction_id": "/a", "amount": "/b", "currency": ""}, `"currency"`},
		{"a URI fragment", withFields(map[string]string{"transaction_id": "#/data/id"}), `"transaction_id"`},
		{"bad escape", withFields(map[string]string{"event_id": "/event/~2"}), `"event_id"`},
		{"trailing tilde", withFields(map[string]string{"currency": "/data/~"}), `"currency"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := newMappedAdapter(rules, tc.fields)
			if !errors.Is(err, errAdapterConfig) || a != nil {
				t.Fatalf("newMappedAdapter = %v, %v, want errAdapterConfig", a, err)
			}
			if !strings.Contains(err.Error(), tc.names) {
				t.Errorf("error %q does not name %s", err, tc.names)
			}
		})
	}
}

func TestMappedAdapterReadsThePointers(t *testing.T) {
	t.Parallel()
	rules := newInputRules("", nil)
	for _, tc := range []struct {
		name     string
		fields   map[string]string
		body     string
		headerID string
		want     store.Payment
	}{
		{"the mapped fields, event id from the header", mappedTestFields, mappedBody, "msg_1",
			store.Payment{TransactionID: "tx-1", Amount: 1000, Currency: "JPY", EventID: "msg_1"}},
		{"no event id anywhere", mappedTestFields, mappedBody, "",
			store.Payment{TransactionID: "tx-1", Amount: 1000, Currency: "JPY"}},
		{"event id from the body wins", withFields(map[string]string{"event_id": "/event/id"}), mappedBody, "msg_1",
			store.Payment{TransactionID: "tx-1", Amount: 1000, Currency: "JPY", EventID: "ev-1"}},
		{"an array index", withFields(map[string]string{"transaction_id": "/data/items/1/sku"}), mappedBody, "",
			store.Payment{TransactionID: "b", Amount: 1000, Currency: "JPY"}},
		{"escaped keys", withFields(map[string]string{"transaction_id": "/a~1b/~0c"}), mappedBody, "",
			store.Payment{TransactionID: "tx-slash", Amount: 1000, Currency: "JPY"}},
		{"empty keys", withFields(map[string]string{"transaction_id": "//"}), mappedBody, "",
			store.Payment{TransactionID: "tx-empty", Amount: 1000, Currency: "JPY"}},
		{"case-variant keys off the path are kept", mappedTestFields, mappedVariant(`"type"`, `"Type":1,"type"`), "",
			store.Payment{TransactionID: "tx-1", Amount: 1000, Currency: "JPY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := newMappedAdapter(rules, tc.fields)
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.adapt([]byte(tc.body), tc.headerID)
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			tc.want.Payload = []byte(tc.body)
			wantPayments(t, got, []store.Payment{tc.want})
		})
	}
}

func TestMappedAdapterRefusesWhatThePointersCannotRead(t *testing.T) {
	t.Parallel()
	rules := newInputRules("", nil)
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
			a, err := newMappedAdapter(rules, tc.fields)
			if err != nil {
				t.Fatal(err)
			}
			payments, err := a.adapt([]byte(tc.body), "msg_1")
			if payments != nil {
				t.Errorf("payments = %+v", payments)
			}
			wantAdapterProblem(t, err, tc.status, tc.field)
		})
	}
}

// FuzzMappedAdapter checks that no body makes the mapped adapter panic and
// that it returns a 400/422 problem or exactly one payment the database
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
	a, err := newMappedAdapter(newInputRules("", nil), withFields(map[string]string{"event_id": "/event/id"}))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		payments, err := a.adapt(body, "")
		checkAdapted(t, payments, err)
		if err == nil && (len(payments) != 1 || !bytes.Equal(payments[0].Payload, body)) {
			t.Fatalf("payments = %+v", payments)
		}
	})
}
