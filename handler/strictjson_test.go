package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// wantAdapterProblem fails unless err is a *payload.Error answered with
// status and field.
func wantAdapterProblem(t *testing.T, err error, status int, field string) {
	t.Helper()
	var pe *payload.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v, want a %d problem for %q", err, status, field)
	}
	p := problem.From(err)
	if p.Status != status || p.Field != field {
		t.Fatalf("problem = %d field %q (%s), want %d field %q", p.Status, p.Field, p.Detail, status, field)
	}
}

// checkAdapted fails unless err is a 400 or 422 problem, or every payment
// holds what the pipeline and the database rely on.
func checkAdapted(t *testing.T, payments []store.Payment, err error) {
	t.Helper()
	if err != nil {
		var pe *payload.Error
		if p := problem.From(err); !errors.As(err, &pe) || (p.Status != http.StatusBadRequest && p.Status != http.StatusUnprocessableEntity) {
			t.Fatalf("refusal is not a 400/422 problem: %#v", err)
		}
		if payments != nil {
			t.Fatalf("payments %v returned with an error", payments)
		}
		return
	}
	for _, p := range payments {
		if p.Amount <= 0 {
			t.Fatalf("accepted amount %d", p.Amount)
		}
		if n := len(p.TransactionID); n == 0 || n > 255 ||
			strings.ContainsFunc(p.TransactionID, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Fatalf("accepted transaction_id %q", p.TransactionID)
		}
		if len(p.Currency) != 3 || nonTender[p.Currency] || strings.ToUpper(p.Currency) != p.Currency {
			t.Fatalf("accepted currency %q", p.Currency)
		}
		if len(p.EventID) > 255 {
			t.Fatalf("accepted an event id of %d bytes", len(p.EventID))
		}
		if !json.Valid(p.Payload) || jsonbUnsafe(p.Payload) != "" || hugeExponent(p.Payload) {
			t.Fatalf("accepted a payload jsonb cannot store: %q", p.Payload)
		}
		if p.Source != "" {
			t.Fatalf("adapter set Source %q; the pipeline sets it", p.Source)
		}
	}
}

func readFixture(t testing.TB, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nested is an object holding levels-1 nested arrays under "a".
func nested(levels int) string {
	return `{"a":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`
}

func TestStrictDecodeRefusesWhatParsersCouldReadTwoWays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"empty body", ``, 400, ""},
		{"not JSON", `{"a":`, 400, ""},
		{"top-level array", `[{"a":1}]`, 400, ""},
		{"top-level null", `null`, 400, ""},
		{"top-level string", `"a"`, 400, ""},
		{"trailing object", `{"a":1} {}`, 400, ""},
		{"trailing garbage", `{"a":1}x`, 400, ""},
		{"trailing comma", `{"a":1,}`, 400, ""},
		{"duplicate at the top", `{"a":1,"a":1}`, 400, "a"},
		{"duplicate deep", `{"data":{"object":{"amount":1,"x":[],"amount":2}}}`, 400, "data.object.amount"},
		{"duplicate inside an array", `{"items":[{"k":1},{"k":1,"k":2}]}`, 400, "items[1].k"},
		{"duplicate spelled with an escape", `{"o":{"a":1,"\u0061":2}}`, 400, "o.a"},
		{"invalid UTF-8 in a value", "{\"a\":{\"b\":\"\xff\"}}", 400, ""},
		{"invalid UTF-8 in a key", "{\"a\":{\"\xc3\":1}}", 400, ""},
		{"NUL escape deep", `{"a":{"b":["\u0000"]}}`, 422, ""},
		{"unpaired surrogate deep", `{"a":{"b":"\udc00"}}`, 422, ""},
		{"huge exponent deep", `{"a":[{"b":1e131071}]}`, 422, ""},
		{"nested too deep", nested(maxJSONDepth + 2), 422, "a" + strings.Repeat("[0]", maxJSONDepth-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := decodeStrict([]byte(tc.body))
			wantAdapterProblem(t, err, tc.status, tc.field)
		})
	}
}

func TestStrictDecodeKeepsEachValueAsReceived(t *testing.T) {
	t.Parallel()
	body := []byte(" \n{ \"a\" : { \"b\" : [ 1 , {\"c\":\"d\\u00e9\"} , -2.5e3 ] } ,\t\"e\":\"f\", \"n\":null, \"t\":true, \"A\":1 }\r\n")
	root, err := decodeStrict(body)
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.TrimSpace(body); !bytes.Equal(root.raw, want) {
		t.Errorf("root raw = %q", root.raw)
	}
	if got := strings.Join(root.keys, ","); got != "a,e,n,t,A" {
		t.Errorf("keys = %s", got)
	}
	a := root.members["a"]
	if string(a.raw) != `{ "b" : [ 1 , {"c":"d\u00e9"} , -2.5e3 ] }` {
		t.Errorf("a raw = %q", a.raw)
	}
	b := a.members["b"]
	if len(b.items) != 3 || string(b.items[1].raw) != `{"c":"d\u00e9"}` || b.items[1].members["c"].str != "dé" {
		t.Errorf("b = %+v", b.items)
	}
	if n := b.items[2]; n.kind != jsonNumber || n.str != "-2.5e3" || string(n.raw) != "-2.5e3" {
		t.Errorf("number = %+v", n)
	}
	if e := root.members["e"]; e.kind != jsonString || string(e.raw) != `"f"` {
		t.Errorf("e = %+v", e)
	}
	if root.members["n"].kind != jsonNull || root.members["t"].kind != jsonBool {
		t.Errorf("n, t = %v, %v", root.members["n"].kind, root.members["t"].kind)
	}
	// Keys that differ only in case may coexist, but are refused once read.
	_, err = root.member("a", "a")
	wantAdapterProblem(t, err, 400, "a")
	if e, err := root.member("e", "e"); err != nil || e.str != "f" {
		t.Errorf("member e = %v, %v", e, err)
	}
	if _, err := decodeStrict([]byte(nested(maxJSONDepth + 1))); err != nil {
		t.Errorf("%d levels under the body's object: %v", maxJSONDepth, err)
	}
}

// FuzzStrictDecode checks that no body makes the decoder panic, that every
// refusal is a 400 or 422 problem, and that an accepted body is valid UTF-8
// JSON that jsonb stores, has no repeated key anywhere, and decodes to
// nodes whose raw bytes are their own values.
func FuzzStrictDecode(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":{"b":[1,2,{"c":null}]},"d":"e"}`,
		`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `{"a":[{"k":1,"k":1}]}`, `{"a":1,"\u0061":2}`,
		`{"a":1}{}`, `{"a":1} `, ` {"a":1}`, `{"a":"\u0000"}`, `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`,
		`{"a":1e131071}`, `{"a":1E-5}`, `{"a":-0.0}`, `{"a":true,"b":false,"c":null}`,
		nested(maxJSONDepth), nested(maxJSONDepth + 1), `[]`, `null`, `"x"`, `1`, ``, `{`, "{\"a\":\"\xff\"}",
		`{"A":1,"a":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		root, err := decodeStrict(body)
		checkAdapted(t, nil, err)
		if err != nil {
			return
		}
		if !utf8.Valid(body) || !json.Valid(body) || jsonbUnsafe(body) != "" || hugeExponent(body) {
			t.Fatalf("accepted %q", body)
		}
		if !bytes.Equal(root.raw, bytes.TrimSpace(body)) {
			t.Fatalf("root raw %q of %q", root.raw, body)
		}
		checkNode(t, root)
	})
}

// checkNode compares each node with encoding/json's reading of its raw
// bytes: a repeated key would make the map smaller than the node.
func checkNode(t *testing.T, n *jsonNode) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(n.raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.InputOffset() != int64(len(n.raw)) {
		t.Fatalf("raw %q is not one value: %v", n.raw, err)
	}
	switch n.kind {
	case jsonObject:
		m, ok := v.(map[string]any)
		if !ok || len(m) != len(n.keys) || len(n.members) != len(n.keys) {
			t.Fatalf("object %q read as %d members", n.raw, len(n.keys))
		}
		for _, k := range n.keys {
			checkNode(t, n.members[k])
		}
	case jsonArray:
		if a, ok := v.([]any); !ok || len(a) != len(n.items) {
			t.Fatalf("array %q read as %d items", n.raw, len(n.items))
		}
		for _, c := range n.items {
			checkNode(t, c)
		}
	case jsonString:
		if s, ok := v.(string); !ok || s != n.str {
			t.Fatalf("string %q read as %q", n.raw, n.str)
		}
	case jsonNumber:
		if s, ok := v.(json.Number); !ok || string(s) != n.str {
			t.Fatalf("number %q read as %q", n.raw, n.str)
		}
	case jsonBool:
		if _, ok := v.(bool); !ok {
			t.Fatalf("bool %q read as %v", n.raw, v)
		}
	case jsonNull:
		if v != nil {
			t.Fatalf("null %q read as %v", n.raw, v)
		}
	}
}
