package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// wantError fails unless err is an *Error answered with status (400:
// ErrMalformed, 422: ErrInvalid) naming field.
func wantError(t *testing.T, err error, status int, field string) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v, want a %d error for %q", err, status, field)
	}
	kind := map[int]error{400: ErrMalformed, 422: ErrInvalid}[status]
	if !errors.Is(err, kind) || pe.Field != field {
		t.Fatalf("error = %v field %q (%s), want %d field %q", pe.Kind, pe.Field, pe.Detail, status, field)
	}
}

// wantRefusal fails unless err is nil or an *Error of either kind.
func wantRefusal(t *testing.T, err error) {
	t.Helper()
	var pe *Error
	if err != nil && (!errors.As(err, &pe) || !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalid)) {
		t.Fatalf("refusal is not a malformed or invalid body: %#v", err)
	}
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
		{"nested too deep", nested(maxDepth + 2), 422, "a" + strings.Repeat("[0]", maxDepth-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode([]byte(tc.body))
			wantError(t, err, tc.status, tc.field)
		})
	}
}

func TestStrictDecodeKeepsEachValueAsReceived(t *testing.T) {
	t.Parallel()
	body := []byte(" \n{ \"a\" : { \"b\" : [ 1 , {\"c\":\"d\\u00e9\"} , -2.5e3 ] } ,\t\"e\":\"f\", \"n\":null, \"t\":true, \"A\":1 }\r\n")
	root, err := Decode(body)
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
	if n := b.items[2]; n.kind != Number || n.str != "-2.5e3" || string(n.raw) != "-2.5e3" {
		t.Errorf("number = %+v", n)
	}
	if e := root.members["e"]; e.kind != String || string(e.raw) != `"f"` {
		t.Errorf("e = %+v", e)
	}
	if root.members["n"].kind != Null || root.members["t"].kind != Bool {
		t.Errorf("n, t = %v, %v", root.members["n"].kind, root.members["t"].kind)
	}
	// Keys that differ only in case may coexist, but are refused once read.
	_, err = root.Member("a", "a")
	wantError(t, err, 400, "a")
	if e, err := root.Member("e", "e"); err != nil || e.str != "f" {
		t.Errorf("member e = %v, %v", e, err)
	}
	if _, err := Decode([]byte(nested(maxDepth + 1))); err != nil {
		t.Errorf("%d levels under the body's object: %v", maxDepth, err)
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
		nested(maxDepth), nested(maxDepth + 1), `[]`, `null`, `"x"`, `1`, ``, `{`, "{\"a\":\"\xff\"}",
		`{"A":1,"a":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		root, err := Decode(body)
		wantRefusal(t, err)
		if err != nil {
			return
		}
		if !utf8.Valid(body) || !json.Valid(body) || Storable(body) != nil {
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
func checkNode(t *testing.T, n *Node) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(n.raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.InputOffset() != int64(len(n.raw)) {
		t.Fatalf("raw %q is not one value: %v", n.raw, err)
	}
	switch n.kind {
	case Object:
		m, ok := v.(map[string]any)
		if !ok || len(m) != len(n.keys) || len(n.members) != len(n.keys) {
			t.Fatalf("object %q read as %d members", n.raw, len(n.keys))
		}
		for _, k := range n.keys {
			checkNode(t, n.members[k])
		}
	case Array:
		if a, ok := v.([]any); !ok || len(a) != len(n.items) {
			t.Fatalf("array %q read as %d items", n.raw, len(n.items))
		}
		for _, c := range n.items {
			checkNode(t, c)
		}
	case String:
		if s, ok := v.(string); !ok || s != n.str {
			t.Fatalf("string %q read as %q", n.raw, n.str)
		}
	case Number:
		if s, ok := v.(json.Number); !ok || string(s) != n.str {
			t.Fatalf("number %q read as %q", n.raw, n.str)
		}
	case Bool:
		if _, ok := v.(bool); !ok {
			t.Fatalf("bool %q read as %v", n.raw, v)
		}
	case Null:
		if v != nil {
			t.Fatalf("null %q read as %v", n.raw, v)
		}
	}
}
