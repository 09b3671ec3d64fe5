package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// What the delivery log keeps of a verified delivery that recorded
// nothing (handler's delivery log, store.Deliveries.Keep).

// Kept is one row the delivery log keeps of a delivery.
type Kept struct {
	// Body is what is kept: the delivery's body, or the part of it its
	// signature covers, re-serialised.
	Body []byte
	// Key identifies the row in its source's log: a later delivery with
	// the same key is counted on it. Nil is the SHA-256 of Body.
	Key []byte
	// EventID is the provider's id of the event ("": the body's or the
	// signature headers').
	EventID string
	// EventType is what the delivery is (Stripe's type, Adyen's
	// eventCode); "" when it names none.
	EventType string
}

// A Keeper adapter says what the delivery log keeps of a verified body:
// one Kept per signed unit (Adyen keeps each notification item alone,
// re-serialised from its signed fields and keyed by their hash, so that a
// signed item wrapped in new bodies is one row), none when the body holds
// nothing it can keep. An adapter that is not a Keeper has its body kept
// whole, keyed by its hash.
type Keeper interface {
	Kept(body []byte) []Kept
}

// A Redactor provider names the members its bodies carry that the
// delivery log never keeps as received (card data, e-mail addresses,
// names, signatures): JSON pointers in Redact's syntax, applied before any
// the operator adds.
type Redactor interface {
	Redacted() []string
}

// Redacted is what a redacted member's value becomes.
const Redacted = "[redacted]"

// CheckPointer reports whether p is a pointer Redact takes: an RFC 6901
// JSON pointer ("/data/object/billing_details"), whose segment "*" stands
// for every member of an object or element of an array.
func CheckPointer(p string) error {
	switch {
	case p == "":
		return errors.New("the whole body cannot be redacted (an empty pointer)")
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is not a JSON pointer: it must start with /", p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(seg, "~0", ""), "~1", ""), "~") {
			return fmt.Errorf("%q: ~ must be followed by 0 or 1", p)
		}
	}
	return nil
}

// Redact returns body with the value of every member the pointers reach
// replaced by the string Redacted; body as it is when none is reached, or
// when it is not a JSON value. A body that is changed is re-serialised
// (members sorted, numbers as written, repeated members collapsed to the
// last one, as encoding/json reads them).
func Redact(body []byte, pointers []string) []byte {
	if len(pointers) == 0 {
		return body
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return body
	}
	changed := false
	for _, p := range pointers {
		if CheckPointer(p) != nil {
			continue
		}
		segs := strings.Split(p[1:], "/")
		for i, s := range segs {
			segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
		}
		if redact(v, segs) {
			changed = true
		}
	}
	if !changed {
		return body
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return body
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

// redact replaces what segs reaches under v, and reports whether it
// reached anything.
func redact(v any, segs []string) bool {
	seg, last := segs[0], len(segs) == 1
	reached := false
	visit := func(child any, set func(any)) {
		if last {
			set(Redacted)
			reached = true
		} else if redact(child, segs[1:]) {
			reached = true
		}
	}
	switch n := v.(type) {
	case map[string]any:
		for k, child := range n {
			if seg == "*" || seg == k {
				visit(child, func(x any) { n[k] = x })
			}
		}
	case []any:
		for i, child := range n {
			if seg == "*" || seg == fmt.Sprint(i) {
				visit(child, func(x any) { n[i] = x })
			}
		}
	}
	return reached
}
