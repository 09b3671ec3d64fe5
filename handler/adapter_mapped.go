package handler

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/store"
)

// mappedFields are the payment fields a mapping may name, and whether each
// is required.
var mappedFields = map[string]bool{
	"transaction_id": true,
	"amount":         true,
	"currency":       true,
	"event_id":       false,
}

// jsonPointer is a parsed RFC 6901 JSON pointer.
type jsonPointer struct {
	text   string   // as configured, for error messages
	tokens []string // unescaped reference tokens
}

// parseJSONPointer parses an RFC 6901 pointer into its reference tokens,
// unescaping ~1 to "/" and ~0 to "~". The empty pointer (the whole
// document) is refused: no payment field is the whole body.
func parseJSONPointer(s string) (jsonPointer, error) {
	if !strings.HasPrefix(s, "/") {
		return jsonPointer{}, fmt.Errorf("pointer %q must start with \"/\"", s)
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		var b strings.Builder
		for j := 0; j < len(p); j++ {
			if p[j] != '~' {
				b.WriteByte(p[j])
				continue
			}
			if j+1 == len(p) || (p[j+1] != '0' && p[j+1] != '1') {
				return jsonPointer{}, fmt.Errorf("pointer %q: \"~\" must be followed by 0 or 1", s)
			}
			b.WriteByte("~/"[p[j+1]-'0'])
			j++
		}
		parts[i] = b.String()
	}
	return jsonPointer{text: s, tokens: parts}, nil
}

// resolve returns the value the pointer refers to in root, or nil when it
// refers to nothing. An array index is decimal without leading zeros; "-"
// (past the end) refers to nothing. A member whose key differs from the
// token only in case is refused (400), as member does.
func (p jsonPointer) resolve(root *jsonNode) (*jsonNode, error) {
	n := root
	for _, tok := range p.tokens {
		switch n.kind {
		case jsonObject:
			var err error
			if n, err = n.member(tok, p.text); err != nil {
				return nil, err
			}
		case jsonArray:
			if tok != "0" && (tok == "" || tok[0] < '1' || tok[0] > '9') {
				return nil, nil
			}
			i, err := strconv.Atoi(tok)
			if err != nil || i >= len(n.items) {
				return nil, nil
			}
			n = n.items[i]
		default:
			return nil, nil
		}
		if n == nil {
			return nil, nil
		}
	}
	return n, nil
}

// mappedAdapter reads any JSON object body through configured pointers.
type mappedAdapter struct {
	rules                  *inputRules
	txID, amount, currency jsonPointer
	eventID                *jsonPointer
	fields                 paymentFields
}

// newMappedAdapter returns an adapter for a provider paylock has no adapter
// for, configured with an RFC 6901 JSON pointer per payment field:
// transaction_id, amount and currency are required, event_id optional. For
// example {"transaction_id": "/data/id", "amount": "/data/amount/value",
// "currency": "/data/amount/currency"}.
//
// At request time transaction_id and currency must resolve to JSON strings
// and amount to a JSON integer in minor units; a pointer that resolves to
// nothing or to another type is a 422 problem whose field is the pointer.
// Values are taken as they are: a lower-case currency or a transaction id
// with spaces is refused, never changed. The event id is the string at the
// event_id pointer when one is configured (it must then resolve), else the
// delivery's header id (webhook-id), else none. The stored payload is the
// whole body. The body is one payment: zero payments are never returned.
//
// A missing required field, an unknown field name or a malformed pointer
// (not starting with "/", or "~" not followed by 0 or 1) is an error
// wrapping errAdapterConfig that names the field.
func newMappedAdapter(rules *inputRules, fields map[string]string) (adapter, error) {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if _, ok := mappedFields[name]; !ok {
			return nil, fmt.Errorf("%w: mapped field %q is unknown (want transaction_id, amount, currency, event_id)",
				errAdapterConfig, name)
		}
	}
	a := mappedAdapter{rules: rules, fields: paymentFields{}}
	for _, name := range []string{"transaction_id", "amount", "currency", "event_id"} {
		text, ok := fields[name]
		if !ok {
			if mappedFields[name] {
				return nil, fmt.Errorf("%w: mapped field %q is required", errAdapterConfig, name)
			}
			continue
		}
		p, err := parseJSONPointer(text)
		if err != nil {
			return nil, fmt.Errorf("%w: mapped field %q: %v", errAdapterConfig, name, err)
		}
		a.fields[name] = text
		switch name {
		case "transaction_id":
			a.txID = p
		case "amount":
			a.amount = p
		case "currency":
			a.currency = p
		case "event_id":
			a.eventID = &p
		}
	}
	return a, nil
}

func (a mappedAdapter) adapt(body []byte, headerID string) ([]store.Payment, error) {
	root, err := decodeStrict(body)
	if err != nil {
		return nil, err
	}
	p := store.Payment{Payload: body, EventID: headerID}
	if p.TransactionID, err = a.str(root, a.txID); err != nil {
		return nil, err
	}
	if p.Amount, err = a.integer(root, a.amount); err != nil {
		return nil, err
	}
	if p.Currency, err = a.str(root, a.currency); err != nil {
		return nil, err
	}
	if a.eventID != nil {
		if p.EventID, err = a.str(root, *a.eventID); err != nil {
			return nil, err
		}
	}
	if err := a.rules.checkPayment(p, a.fields); err != nil {
		return nil, err
	}
	return []store.Payment{p}, nil
}

// value resolves ptr, refusing a pointer that resolves to nothing or to a
// value of another kind than want.
func (a mappedAdapter) value(root *jsonNode, ptr jsonPointer, want jsonKind) (*jsonNode, error) {
	n, err := ptr.resolve(root)
	switch {
	case err != nil:
		return nil, err
	case n == nil:
		return nil, payload.Invalid(ptr.text, "the pointer "+ptr.text+" resolves to nothing in this body")
	case n.kind != want:
		return nil, payload.Invalid(ptr.text, fmt.Sprintf("%s must be %s, not %s", ptr.text, want, n.kind))
	}
	return n, nil
}

func (a mappedAdapter) str(root *jsonNode, ptr jsonPointer) (string, error) {
	n, err := a.value(root, ptr, jsonString)
	if err != nil {
		return "", err
	}
	return n.str, nil
}

// integer reads an amount under decodeAmount's rules.
func (a mappedAdapter) integer(root *jsonNode, ptr jsonPointer) (int64, error) {
	n, err := a.value(root, ptr, jsonNumber)
	if err != nil {
		return 0, err
	}
	var v int64
	var set bool
	if err := decodeAmount(ptr.text, &v, &set)(n.raw); err != nil {
		return 0, err
	}
	return v, nil
}
