package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDepth bounds the nesting of a provider's body. Stripe's deepest
// objects (payment_method_details.card.three_d_secure...) are about ten
// levels down.
const maxDepth = 64

// Kind is the JSON type of a Node.
type Kind uint8

// The kinds of a Node.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// String names the kind as an error message says it: "a string", "an
// object".
func (k Kind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// Node is one value of a strictly decoded JSON document (see Decode). Its
// accessors never change it; a tree is safe for concurrent reads.
type Node struct {
	kind Kind
	// str is a string's decoded value, or a number's literal.
	str string
	// keys lists an object's members in the order received; members maps
	// them to their values. Keys are unique.
	keys    []string
	members map[string]*Node
	items   []*Node
	// raw is the value's bytes as received, a subslice of the body.
	raw []byte
}

// Kind is the node's JSON type.
func (n *Node) Kind() Kind { return n.kind }

// Raw is the value's bytes exactly as received (a subslice of the body
// given to Decode; callers must not modify it).
func (n *Node) Raw() []byte { return n.raw }

// Text is a string's decoded value or a number's literal as written; ""
// for the other kinds.
func (n *Node) Text() string { return n.str }

// Keys are an object's member names in the order received.
func (n *Node) Keys() []string { return n.keys }

// Items are an array's values in order.
func (n *Node) Items() []*Node { return n.items }

// Decode decodes body, which must be one JSON object, into a tree,
// refusing what two JSON parsers could read differently or what Postgres's
// jsonb cannot store: invalid UTF-8, a key repeated in any object at any
// depth, anything after the object, \u0000 and unpaired surrogate escapes,
// numbers with huge exponents, and values nested more than 64 levels under
// the body's object. Its errors are *Error values: ErrMalformed (400) or
// ErrInvalid (422: unstorable, too deep); a repeated key's error names its
// path, such as "data.object.amount".
//
// Keys that differ only in case are allowed here; Member refuses them for
// the keys a provider reads.
func Decode(body []byte) (*Node, error) {
	if !utf8.Valid(body) {
		return nil, Malformed("", "body is not valid UTF-8")
	}
	if !json.Valid(body) {
		// json.Valid is the reference grammar; the token walk below then
		// only meets well-formed input. Decode again for the offset.
		var v any
		return nil, syntaxError(json.Unmarshal(body, &v))
	}
	if err := Storable(body); err != nil {
		return nil, err
	}
	w := strictWalker{body: body, dec: json.NewDecoder(bytes.NewReader(body))}
	w.dec.UseNumber()
	root, err := w.value(nil)
	if err != nil {
		return nil, err
	}
	if root.kind != Object {
		return nil, Malformed("", "body must be a JSON object")
	}
	if _, err := w.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, Malformed("", "unexpected data after the JSON object")
	}
	return root, nil
}

type strictWalker struct {
	body []byte
	dec  *json.Decoder
}

// value reads the next value; path is where it sits, for error messages.
func (w *strictWalker) value(path []string) (*Node, error) {
	if len(path) > maxDepth {
		return nil, Invalid(jsonPath(path[:maxDepth]), fmt.Sprintf("JSON nested deeper than %d levels is not accepted", maxDepth))
	}
	start := w.offset()
	tok, err := w.dec.Token()
	if err != nil {
		return nil, syntaxError(err)
	}
	n := &Node{}
	switch t := tok.(type) {
	case nil:
		n.kind = Null
	case bool:
		n.kind = Bool
	case json.Number:
		n.kind, n.str = Number, string(t)
	case string:
		n.kind, n.str = String, t
	case json.Delim:
		if err := w.container(n, t, path); err != nil {
			return nil, err
		}
	}
	n.raw = w.body[start:w.dec.InputOffset()]
	return n, nil
}

// container reads the members or items of the object or array that delim
// opened, and its closing delimiter.
func (w *strictWalker) container(n *Node, delim json.Delim, path []string) error {
	switch delim {
	case '{':
		n.kind, n.members = Object, map[string]*Node{}
		for w.dec.More() {
			tok, err := w.dec.Token()
			if err != nil {
				return syntaxError(err)
			}
			key, _ := tok.(string)
			if _, dup := n.members[key]; dup {
				return Malformed(jsonPath(append(path, key)), fmt.Sprintf("key %q appears more than once", key))
			}
			child, err := w.value(append(path, key))
			if err != nil {
				return err
			}
			n.keys = append(n.keys, key)
			n.members[key] = child
		}
	case '[':
		n.kind = Array
		for i := 0; w.dec.More(); i++ {
			child, err := w.value(append(path, "["+strconv.Itoa(i)+"]"))
			if err != nil {
				return err
			}
			n.items = append(n.items, child)
		}
	default:
		return Malformed(jsonPath(path), "malformed JSON")
	}
	if _, err := w.dec.Token(); err != nil { // the closing delimiter
		return syntaxError(err)
	}
	return nil
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

// Member returns the object member named key exactly, or nil when absent
// (or when n is not an object). A member whose key differs from key only in
// case is refused (ErrMalformed): Go's encoding/json, and so any consumer of
// the stored payload that uses it, would read that one instead. name is the
// member's full name for errors.
func (n *Node) Member(key, name string) (*Node, error) {
	for _, k := range n.keys {
		if k != key && strings.EqualFold(k, key) {
			return nil, Malformed(name, fmt.Sprintf("key %q must be spelled %q", k, key))
		}
	}
	return n.members[key], nil
}

// Child follows keys from the object n, naming the result prefix.keys...
// for errors. It returns nil when a member is absent and an ErrMalformed
// error when a step on the way is not an object.
func (n *Node) Child(prefix string, keys ...string) (*Node, string, error) {
	name := prefix
	for _, k := range keys {
		if n.kind != Object {
			return nil, name, Malformed(name, name+" must be a JSON object")
		}
		if name != "" {
			name += "."
		}
		name += k
		var err error
		if n, err = n.Member(k, name); err != nil || n == nil {
			return nil, name, err
		}
	}
	return n, name, nil
}

// RequiredObject is the object at keys, and its name: ErrInvalid when
// absent, ErrMalformed when another type.
func (n *Node) RequiredObject(prefix string, keys ...string) (*Node, string, error) {
	c, name, err := n.Child(prefix, keys...)
	switch {
	case err != nil:
		return nil, name, err
	case c == nil:
		return nil, name, Invalid(name, name+" is required")
	case c.kind != Object:
		return nil, name, Malformed(name, name+" must be a JSON object")
	}
	return c, name, nil
}

// RequiredString is the string at keys, and its name: ErrInvalid when
// absent, ErrMalformed when another type (null included).
func (n *Node) RequiredString(prefix string, keys ...string) (string, string, error) {
	c, name, err := n.Child(prefix, keys...)
	switch {
	case err != nil:
		return "", name, err
	case c == nil:
		return "", name, Invalid(name, name+" is required")
	case c.kind != String:
		return "", name, Malformed(name, name+" must be a JSON string")
	}
	return c.str, name, nil
}

// RequiredAmount is the integer in minor units at keys, under
// DecodeAmount's rules, and its name: ErrInvalid when absent, with a
// fraction or an exponent, or outside int64; ErrMalformed when not a
// number.
func (n *Node) RequiredAmount(prefix string, keys ...string) (int64, string, error) {
	c, name, err := n.Child(prefix, keys...)
	switch {
	case err != nil:
		return 0, name, err
	case c == nil:
		return 0, name, Invalid(name, name+" is required")
	}
	var v int64
	if err := amountInto(name, c.raw, &v); err != nil {
		return 0, name, err
	}
	return v, name, nil
}
