package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/paylock/paylock/payload"
)

// maxJSONDepth bounds the nesting of a provider's body. Stripe's deepest
// objects (payment_method_details.card.three_d_secure...) are about ten
// levels down.
const maxJSONDepth = 64

// jsonKind is the type of a jsonNode.
type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

func (k jsonKind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// jsonNode is one value of a strictly decoded JSON document.
type jsonNode struct {
	kind jsonKind
	// str is a string's decoded value, or a number's literal.
	str string
	// keys lists an object's members in the order received; members maps
	// them to their values. Keys are unique.
	keys    []string
	members map[string]*jsonNode
	items   []*jsonNode
	// raw is the value's bytes as received, a subslice of the body.
	raw []byte
}

// decodeStrict decodes body, which must be one JSON object, into a tree,
// refusing what two JSON parsers could read differently or what Postgres's
// jsonb cannot store: invalid UTF-8, a key repeated in any object at any
// depth, anything after the object, \u0000 and unpaired surrogate escapes,
// numbers with huge exponents, and values nested more than maxJSONDepth
// levels under the body's object. Its errors are 400 (malformed) or 422
// (unstorable, too deep) problems; a repeated key's problem names its path,
// such as "data.object.amount".
//
// Keys that differ only in case are allowed here; member refuses them for
// the keys an adapter reads.
func decodeStrict(body []byte) (*jsonNode, error) {
	if !utf8.Valid(body) {
		return nil, payload.Malformed("", "body is not valid UTF-8")
	}
	if !json.Valid(body) {
		// json.Valid is the reference grammar; the token walk below then
		// only meets well-formed input. Decode again for the offset.
		var v any
		return nil, malformed(json.Unmarshal(body, &v))
	}
	if msg := jsonbUnsafe(body); msg != "" {
		return nil, payload.Invalid("", msg)
	}
	if hugeExponent(body) {
		return nil, payload.Invalid("", fmt.Sprintf("numbers with an exponent beyond ±%d are not accepted", maxExponent))
	}
	w := strictWalker{body: body, dec: json.NewDecoder(bytes.NewReader(body))}
	w.dec.UseNumber()
	root, err := w.value(nil)
	if err != nil {
		return nil, err
	}
	if root.kind != jsonObject {
		return nil, payload.Malformed("", "body must be a JSON object")
	}
	if _, err := w.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, payload.Malformed("", "unexpected data after the JSON object")
	}
	return root, nil
}

type strictWalker struct {
	body []byte
	dec  *json.Decoder
}

// value reads the next value; path is where it sits, for error messages.
func (w *strictWalker) value(path []string) (*jsonNode, error) {
	if len(path) > maxJSONDepth {
		return nil, payload.Invalid(jsonPath(path[:maxJSONDepth]), fmt.Sprintf("JSON nested deeper than %d levels is not accepted", maxJSONDepth))
	}
	start := w.offset()
	tok, err := w.dec.Token()
	if err != nil {
		return nil, malformed(err)
	}
	n := &jsonNode{}
	switch t := tok.(type) {
	case nil:
		n.kind = jsonNull
	case bool:
		n.kind = jsonBool
	case json.Number:
		n.kind, n.str = jsonNumber, string(t)
	case string:
		n.kind, n.str = jsonString, t
	case json.Delim:
		switch t {
		case '{':
			n.kind, n.members = jsonObject, map[string]*jsonNode{}
			for w.dec.More() {
				tok, err := w.dec.Token()
				if err != nil {
					return nil, malformed(err)
				}
				key, _ := tok.(string)
				if _, dup := n.members[key]; dup {
					return nil, payload.Malformed(jsonPath(append(path, key)), fmt.Sprintf("key %q appears more than once", key))
				}
				child, err := w.value(append(path, key))
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, key)
				n.members[key] = child
			}
		case '[':
			n.kind = jsonArray
			for i := 0; w.dec.More(); i++ {
				child, err := w.value(append(path, "["+strconv.Itoa(i)+"]"))
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, child)
			}
		default:
			return nil, payload.Malformed(jsonPath(path), "malformed JSON")
		}
		if _, err := w.dec.Token(); err != nil { // the closing delimiter
			return nil, malformed(err)
		}
	}
	n.raw = w.body[start:w.dec.InputOffset()]
	return n, nil
}

// offset is where the next value starts: the decoder's position past the
// separators it has not consumed yet.
func (w *strictWalker) offset() int {
	off := int(w.dec.InputOffset())
	for off < len(w.body) && strings.IndexByte(" \t\r\n:,", w.body[off]) >= 0 {
		off++
	}
	return off
}

// jsonPath formats a path as a dotted name with array indexes:
// notificationItems[0].NotificationRequestItem.
func jsonPath(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// member returns the object member named key exactly, or nil when absent.
// A member whose key differs from key only in case is refused: Go's
// encoding/json, and so any consumer of the stored payload that uses it,
// would read that one instead. name is the member's full name for errors.
func (n *jsonNode) member(key, name string) (*jsonNode, error) {
	for _, k := range n.keys {
		if k != key && strings.EqualFold(k, key) {
			return nil, payload.Malformed(name, fmt.Sprintf("key %q must be spelled %q", k, key))
		}
	}
	return n.members[key], nil
}

// child follows keys from the object n, naming the result prefix.keys...
// for errors. It returns nil when a member is absent and a 400 problem when
// a step on the way is not an object.
func (n *jsonNode) child(prefix string, keys ...string) (*jsonNode, string, error) {
	name := prefix
	for _, k := range keys {
		if n.kind != jsonObject {
			return nil, name, payload.Malformed(name, name+" must be a JSON object")
		}
		if name != "" {
			name += "."
		}
		name += k
		var err error
		if n, err = n.member(k, name); err != nil || n == nil {
			return nil, name, err
		}
	}
	return n, name, nil
}

// requiredObject is the object at keys: 422 when absent, 400 when another
// type.
func (n *jsonNode) requiredObject(prefix string, keys ...string) (*jsonNode, string, error) {
	c, name, err := n.child(prefix, keys...)
	switch {
	case err != nil:
		return nil, name, err
	case c == nil:
		return nil, name, payload.Invalid(name, name+" is required")
	case c.kind != jsonObject:
		return nil, name, payload.Malformed(name, name+" must be a JSON object")
	}
	return c, name, nil
}

// requiredString is the string at keys: 422 when absent, 400 when another
// type (null included).
func (n *jsonNode) requiredString(prefix string, keys ...string) (string, string, error) {
	c, name, err := n.child(prefix, keys...)
	switch {
	case err != nil:
		return "", name, err
	case c == nil:
		return "", name, payload.Invalid(name, name+" is required")
	case c.kind != jsonString:
		return "", name, payload.Malformed(name, name+" must be a JSON string")
	}
	return c.str, name, nil
}

// requiredAmount is the integer in minor units at keys, under
// decodeAmount's rules: 422 when absent, with a fraction or an exponent, or
// outside int64; 400 when not a number.
func (n *jsonNode) requiredAmount(prefix string, keys ...string) (int64, string, error) {
	c, name, err := n.child(prefix, keys...)
	switch {
	case err != nil:
		return 0, name, err
	case c == nil:
		return 0, name, payload.Invalid(name, name+" is required")
	}
	var v int64
	var set bool
	if err := decodeAmount(name, &v, &set)(c.raw); err != nil {
		return 0, name, err
	}
	return v, name, nil
}
