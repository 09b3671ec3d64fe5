package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/paylock/paylock/payload"
)

// field is one known member of a webhook body and what to do with its raw
// JSON value.
type field struct {
	name     string
	required bool
	// lenient fields are optional extras read only under their exact name:
	// a wrong type, null, another spelling or a repeat is ignored, never
	// refused.
	lenient bool
	// decode, when set, is handed the raw JSON value. Without it, str or
	// num receive the value under decodeString's or decodeAmount's rules,
	// with no closure to build per body.
	decode func(raw json.RawMessage) error
	str    *string
	num    *int64
	// seen, when set, records that the key appeared (see present).
	seen *bool
}

// apply hands raw, the value of f's key, to f's decoder.
func (f *field) apply(raw []byte) error {
	if f.seen != nil {
		*f.seen = true
	}
	switch {
	case f.decode != nil:
		return f.decode(raw)
	case f.str != nil:
		return stringInto(f.name, raw, f.str)
	case f.num != nil:
		return amountInto(f.name, raw, f.num)
	}
	return nil
}

// deliveryEventID is a delivery's event id: the body's event_id, trimmed,
// or failing that the id from its signature headers (webhook-id).
func deliveryEventID(fromBody, fromHeader string) (string, error) {
	if id := strings.TrimSpace(fromBody); id != "" {
		return id, nil
	}
	if fromHeader != "" {
		return fromHeader, nil
	}
	return "", payload.Invalid("event_id", "event_id is required (or a webhook-id header)")
}

// present wraps decode to record that the key appeared.
func present(seen *bool, decode func(json.RawMessage) error) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		*seen = true
		return decode(raw)
	}
}

// decodeObject reads body as exactly one JSON object, strictly: a repeated
// known key, a known key spelled in another case, null for a known key, or
// anything after the object is refused. Unknown keys are allowed (the body
// is kept as received). Values of known keys are handed to their decoders.
//
// Go's encoding/json, used naively, would match keys case-insensitively, let
// the last duplicate win, turn null into a zero value and ignore trailing
// data: each of those lets two bodies that look different to two parsers
// mean the same payment, or one body mean two.
func decodeObject(body []byte, fields []field) error {
	if !utf8.Valid(body) {
		return payload.Malformed("", "body is not valid UTF-8")
	}
	if msg := jsonbUnsafe(body); msg != "" {
		return payload.Invalid("", msg)
	}
	if hugeExponent(body) {
		return payload.Invalid("", fmt.Sprintf("numbers with an exponent beyond ±%d are not accepted", maxExponent))
	}
	if len(fields) <= 64 && json.Valid(body) {
		return walkObject(body, fields)
	}
	// Not JSON: the token walk names the first thing wrong, as it always
	// has (a refused key before a syntax error further on, say).
	return tokenWalk(body, fields)
}

// walkObject is decodeObject's walk of a body known to be valid JSON (and
// of at most 64 fields): it slices keys and values out of body in place
// instead of decoding a token at a time, and refuses exactly what
// tokenWalk refuses, with the same problems (FuzzObjectWalksAgree).
func walkObject(body []byte, fields []field) error {
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return payload.Malformed("", "body must be a JSON object")
	}
	var seen uint64 // bit k: fields[k] appeared
	i = skipSpace(body, i+1)
	for body[i] != '}' {
		end, escaped := stringEnd(body, i)
		key := body[i+1 : end-1]
		if escaped {
			var k string
			if err := json.Unmarshal(body[i:end], &k); err != nil {
				return malformed(err)
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
		if fields[k].required && seen&(1<<k) == 0 {
			return payload.Invalid(fields[k].name, fields[k].name+" is required")
		}
	}
	return nil
}

// matchKey hands raw to the fields named key, refusing a known key in
// another case, a repeat or null.
func matchKey(key, raw []byte, fields []field, seen *uint64) error {
	for k := range fields {
		f := &fields[k]
		if f.lenient {
			if string(key) == f.name {
				_ = f.apply(raw)
			}
			continue
		}
		if !strings.EqualFold(string(key), f.name) {
			continue
		}
		if string(key) != f.name {
			return payload.Malformed(f.name, fmt.Sprintf("key %q must be spelled %q", string(key), f.name))
		}
		if *seen&(1<<k) != 0 {
			return payload.Malformed(f.name, fmt.Sprintf("key %q appears more than once", f.name))
		}
		*seen |= 1 << k
		if string(raw) == "null" {
			return payload.Malformed(f.name, fmt.Sprintf("%s must not be null", f.name))
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

// tokenWalk is decodeObject's walk with encoding/json's tokenizer, for
// bodies that are not valid JSON: it reports the first thing wrong in
// body order.
func tokenWalk(body []byte, fields []field) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return malformed(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return payload.Malformed("", "body must be a JSON object")
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return malformed(err)
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return malformed(err)
		}
		for k := range fields {
			f := &fields[k]
			if f.lenient {
				if key == f.name {
					_ = f.apply(raw)
				}
				continue
			}
			if !strings.EqualFold(key, f.name) {
				continue
			}
			if key != f.name {
				return payload.Malformed(f.name, fmt.Sprintf("key %q must be spelled %q", key, f.name))
			}
			if seen[f.name] {
				return payload.Malformed(f.name, fmt.Sprintf("key %q appears more than once", f.name))
			}
			seen[f.name] = true
			if string(raw) == "null" {
				return payload.Malformed(f.name, fmt.Sprintf("%s must not be null", f.name))
			}
			if err := f.apply(raw); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return malformed(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return payload.Malformed("", "unexpected data after the JSON object")
	}
	for _, f := range fields {
		if f.required && !seen[f.name] {
			return payload.Invalid(f.name, f.name+" is required")
		}
	}
	return nil
}

func malformed(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return payload.Malformed("", fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, se.Error()))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return payload.Malformed("", "malformed JSON: unexpected end of body")
	}
	return payload.Malformed("", "malformed JSON: "+err.Error())
}

// jsonbUnsafe reports, for a body that is otherwise valid JSON, the escapes
// that Postgres's jsonb refuses (\u0000 and unpaired UTF-16 surrogates), so
// that they are a 4xx here instead of a database error later.
func jsonbUnsafe(body []byte) string {
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		if i+1 >= len(body) {
			return ""
		}
		if body[i+1] != 'u' {
			i++ // skip the escaped character, which may be a backslash
			continue
		}
		r, ok := hex4(body, i+2)
		if !ok {
			return "" // the JSON decoder reports it
		}
		switch {
		case r == 0:
			return `the escape \u0000 is not allowed`
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := rune(0), false
			if i+11 < len(body) && body[i+6] == '\\' && body[i+7] == 'u' {
				lo, ok = hex4(body, i+8)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return "unpaired UTF-16 surrogate escape"
			}
			i += 11
			continue
		case r >= 0xDC00 && r <= 0xDFFF:
			return "unpaired UTF-16 surrogate escape"
		}
		i += 5
	}
	return ""
}

// maxExponent bounds the exponent of any number in a body. jsonb stores
// 1e131071 in a few bytes but prints it as 131072 digits; past ±16383 it
// refuses it outright.
const maxExponent = 1000

// hugeExponent reports whether a number anywhere in body (outside strings)
// has an exponent beyond ±maxExponent.
func hugeExponent(body []byte) bool {
	inString := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == 'e' || c == 'E') && i > 0 && body[i-1] >= '0' && body[i-1] <= '9':
			j := i + 1
			if j < len(body) && (body[j] == '+' || body[j] == '-') {
				j++
			}
			digits := 0
			for ; j < len(body) && body[j] >= '0' && body[j] <= '9'; j++ {
				if digits > 0 || body[j] != '0' {
					digits++
				}
			}
			if digits > 4 || (digits > 0 && mustAtoi(body[j-digits:j]) > maxExponent) {
				return true
			}
			i = j - 1
		}
	}
	return false
}

func mustAtoi(b []byte) int {
	n, _ := strconv.Atoi(string(b))
	return n
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(v), err == nil
}

// decodeString decodes a JSON string value into *dst, refusing other types.
func decodeString(name string, dst *string) func(json.RawMessage) error {
	return func(raw json.RawMessage) error { return stringInto(name, raw, dst) }
}

// stringInto is decodeString's rule: raw, a JSON value, must be a string.
// One without escapes (the usual case) is sliced out without the JSON
// decoder; its bytes are valid UTF-8 (decodeObject checked the body).
func stringInto(name string, raw []byte, dst *string) error {
	if len(raw) < 2 || raw[0] != '"' {
		return payload.Malformed(name, name+" must be a JSON string")
	}
	if inner := raw[1 : len(raw)-1]; raw[len(raw)-1] == '"' && plainString(inner) {
		*dst = string(inner)
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return payload.Malformed(name, name+" must be a JSON string")
	}
	return nil
}

// plainString reports whether b, between a JSON string's quotes, has no
// escape, quote or control character: its text is its bytes.
func plainString(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c == '"' || c < ' ' {
			return false
		}
	}
	return true
}

// decodeAmount decodes a JSON integer in minor units into *dst: a number
// written with a fraction or an exponent, or one outside int64, is refused
// rather than rounded, and a string is a type error.
func decodeAmount(name string, dst *int64, set *bool) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		if err := amountInto(name, raw, dst); err != nil {
			return err
		}
		*set = true
		return nil
	}
}

// amountInto is decodeAmount's rule.
func amountInto(name string, raw []byte, dst *int64) error {
	if len(raw) == 0 || !(raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		return payload.Malformed(name, name+" must be a JSON number (an integer in minor units)")
	}
	if !isIntegerLiteral(raw) {
		return payload.Invalid(name, name+" must be an integer in minor units, without a fraction or exponent")
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return payload.Invalid(name, name+" is out of range")
	}
	*dst = v
	return nil
}

// integerLiteral is what an amount in minor units looks like.
var integerLiteral = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// isIntegerLiteral reports whether b matches integerLiteral, without the
// regexp engine.
func isIntegerLiteral(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || (b[0] == '0' && len(b) > 1) {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
