package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Field is one known member of a flat webhook body (see DecodeObject) and
// what to do with its raw JSON value. Give it one of Decode, Str or Num.
type Field struct {
	// Name is the member's key, matched exactly.
	Name string
	// Required fields must appear (ErrInvalid otherwise).
	Required bool
	// Lenient fields are optional extras read only under their exact name:
	// a wrong type, null, another spelling or a repeat is ignored, never
	// refused.
	Lenient bool
	// Decode, when set, is handed the raw JSON value. Without it, Str or
	// Num receive the value under DecodeString's or DecodeAmount's rules,
	// with no closure to build per body.
	Decode func(raw json.RawMessage) error
	Str    *string
	Num    *int64
	// Seen, when set, records that the key appeared (see Present).
	Seen *bool
}

// apply hands raw, the value of f's key, to f's decoder.
func (f *Field) apply(raw []byte) error {
	if f.Seen != nil {
		*f.Seen = true
	}
	switch {
	case f.Decode != nil:
		return f.Decode(raw)
	case f.Str != nil:
		return stringInto(f.Name, raw, f.Str)
	case f.Num != nil:
		return amountInto(f.Name, raw, f.Num)
	}
	return nil
}

// EventID is a delivery's event id: the body's event_id, trimmed, or
// failing that the id from its signature headers (webhook-id); ErrInvalid
// naming event_id when neither is set.
func EventID(fromBody, fromHeader string) (string, error) {
	if id := strings.TrimSpace(fromBody); id != "" {
		return id, nil
	}
	if fromHeader != "" {
		return fromHeader, nil
	}
	return "", Invalid("event_id", "event_id is required (or a webhook-id header)")
}

// Present wraps decode to record in *seen that the key appeared.
func Present(seen *bool, decode func(json.RawMessage) error) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		*seen = true
		return decode(raw)
	}
}

// DecodeObject reads body as exactly one JSON object, strictly: a repeated
// known key, a known key spelled in another case, null for a known key, or
// anything after the object is refused (ErrMalformed), as is a body
// Postgres's jsonb cannot store (ErrInvalid, see Storable) and a missing
// required field (ErrInvalid). Unknown keys are allowed (the body is kept as
// received). Values of known keys are handed to their decoders, whose
// errors are returned as they are.
//
// Go's encoding/json, used naively, would match keys case-insensitively, let
// the last duplicate win, turn null into a zero value and ignore trailing
// data: each of those lets two bodies that look different to two parsers
// mean the same payment, or one body mean two.
func DecodeObject(body []byte, fields []Field) error {
	if !utf8.Valid(body) {
		return Malformed("", "body is not valid UTF-8")
	}
	if err := Storable(body); err != nil {
		return err
	}
	if len(fields) <= 64 && json.Valid(body) {
		return walkObject(body, fields)
	}
	// Not JSON: the token walk names the first thing wrong, as it always
	// has (a refused key before a syntax error further on, say).
	return tokenWalk(body, fields)
}

// walkObject is DecodeObject's walk of a body known to be valid JSON (and
// of at most 64 fields): it slices keys and values out of body in place
// instead of decoding a token at a time, and refuses exactly what
// tokenWalk refuses, with the same problems (FuzzObjectWalksAgree).
func walkObject(body []byte, fields []Field) error {
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return Malformed("", "body must be a JSON object")
	}
	var seen uint64 // bit k: fields[k] appeared
	i = skipSpace(body, i+1)
	for body[i] != '}' {
		end, escaped := stringEnd(body, i)
		key := body[i+1 : end-1]
		if escaped {
			var k string
			if err := json.Unmarshal(body[i:end], &k); err != nil {
				return syntaxError(err)
			}
			key = []byte(k)
		}
		i = skipSpace(body, skipSpace(body, end)+1) // past the ':'
		vend := valueEnd(body, i)
		if err := matchKey(key, body[i:vend], fields, &seen); err != nil {
			return err
		}
		i = skipSpace(body, vend)
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	for k := range fields {
		if fields[k].Required && seen&(1<<k) == 0 {
			return Invalid(fields[k].Name, fields[k].Name+" is required")
		}
	}
	return nil
}

// matchKey hands raw to the fields named key, refusing a known key in
// another case, a repeat or null.
func matchKey(key, raw []byte, fields []Field, seen *uint64) error {
	for k := range fields {
		f := &fields[k]
		if f.Lenient {
			if string(key) == f.Name {
				_ = f.apply(raw)
			}
			continue
		}
		if !strings.EqualFold(string(key), f.Name) {
			continue
		}
		if string(key) != f.Name {
			return Malformed(f.Name, fmt.Sprintf("key %q must be spelled %q", string(key), f.Name))
		}
		if *seen&(1<<k) != 0 {
			return Malformed(f.Name, fmt.Sprintf("key %q appears more than once", f.Name))
		}
		*seen |= 1 << k
		if string(raw) == "null" {
			return Malformed(f.Name, fmt.Sprintf("%s must not be null", f.Name))
		}
		if err := f.apply(raw); err != nil {
			return err
		}
	}
	return nil
}

// skipSpace returns the index of the first non-space byte of b at or after
// i (len(b) if none).
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string that starts at
// b[i] (a '"'), and whether it holds an escape. b is valid JSON.
func stringEnd(b []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return len(b), escaped
}

// valueEnd returns the index just past the JSON value that starts at
// b[i]. b is valid JSON.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		end, _ := stringEnd(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := stringEnd(b, j)
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default: // a number, true, false or null
		j := i
		for j < len(b) && !(b[j] == ',' || b[j] == '}' || b[j] == ']' || b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
			j++
		}
		return j
	}
}

// tokenWalk is DecodeObject's walk with encoding/json's tokenizer, for
// bodies that are not valid JSON: it reports the first thing wrong in
// body order.
func tokenWalk(body []byte, fields []Field) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	// A number is a json.Number, not a float64: a body that is a number
	// too large for one (1e11111) is "not an object", as the in-place walk
	// says, not a decoding error.
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return syntaxError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return Malformed("", "body must be a JSON object")
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntaxError(err)
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return syntaxError(err)
		}
		for k := range fields {
			f := &fields[k]
			if f.Lenient {
				if key == f.Name {
					_ = f.apply(raw)
				}
				continue
			}
			if !strings.EqualFold(key, f.Name) {
				continue
			}
			if key != f.Name {
				return Malformed(f.Name, fmt.Sprintf("key %q must be spelled %q", key, f.Name))
			}
			if seen[f.Name] {
				return Malformed(f.Name, fmt.Sprintf("key %q appears more than once", f.Name))
			}
			seen[f.Name] = true
			if string(raw) == "null" {
				return Malformed(f.Name, fmt.Sprintf("%s must not be null", f.Name))
			}
			if err := f.apply(raw); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return syntaxError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Malformed("", "unexpected data after the JSON object")
	}
	for _, f := range fields {
		if f.Required && !seen[f.Name] {
			return Invalid(f.Name, f.Name+" is required")
		}
	}
	return nil
}
