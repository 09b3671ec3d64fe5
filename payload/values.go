package payload

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
)

// syntaxError is the ErrMalformed error of a body encoding/json could not
// read.
func syntaxError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return Malformed("", fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, se.Error()))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return Malformed("", "malformed JSON: unexpected end of body")
	}
	return Malformed("", "malformed JSON: "+err.Error())
}

// Storable returns nil when Postgres's jsonb can store body, valid UTF-8
// JSON, as it is, and an ErrInvalid error otherwise: an escape jsonb
// refuses (\u0000, an unpaired UTF-16 surrogate) or a number with an
// exponent beyond ±1000 (jsonb would print it with as many digits).
// Decode and DecodeObject apply it to the whole body.
func Storable(body []byte) error {
	if msg := jsonbUnsafe(body); msg != "" {
		return Invalid("", msg)
	}
	if hugeExponent(body) {
		return Invalid("", fmt.Sprintf("numbers with an exponent beyond ±%d are not accepted", maxExponent))
	}
	return nil
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

// DecodeString returns a Field decoder that decodes a JSON string value
// into *dst, refusing other types (ErrMalformed naming name).
func DecodeString(name string, dst *string) func(json.RawMessage) error {
	return func(raw json.RawMessage) error { return stringInto(name, raw, dst) }
}

// stringInto is DecodeString's rule: raw, a JSON value, must be a string.
// One without escapes (the usual case) is sliced out without the JSON
// decoder; its bytes are valid UTF-8 (DecodeObject checked the body).
func stringInto(name string, raw []byte, dst *string) error {
	if len(raw) < 2 || raw[0] != '"' {
		return Malformed(name, name+" must be a JSON string")
	}
	if inner := raw[1 : len(raw)-1]; raw[len(raw)-1] == '"' && plainString(inner) {
		*dst = string(inner)
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return Malformed(name, name+" must be a JSON string")
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

// DecodeAmount returns a Field decoder that decodes a JSON integer in minor
// units into *dst and sets *set: a number written with a fraction or an
// exponent, or one outside int64, is refused (ErrInvalid) rather than
// rounded, and a string is a type error (ErrMalformed).
func DecodeAmount(name string, dst *int64, set *bool) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		if err := amountInto(name, raw, dst); err != nil {
			return err
		}
		*set = true
		return nil
	}
}

// amountInto is DecodeAmount's rule.
func amountInto(name string, raw []byte, dst *int64) error {
	if len(raw) == 0 || !(raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		return Malformed(name, name+" must be a JSON number (an integer in minor units)")
	}
	if !IsIntegerLiteral(raw) {
		return Invalid(name, name+" must be an integer in minor units, without a fraction or exponent")
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return Invalid(name, name+" is out of range")
	}
	*dst = v
	return nil
}

// integerLiteral is what an amount in minor units looks like.
var integerLiteral = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// IsIntegerLiteral reports whether b is how an amount in minor units is
// written: an optional minus and decimal digits without a leading zero (no
// fraction, no exponent). It matches integerLiteral without the regexp
// engine.
func IsIntegerLiteral(b []byte) bool {
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
