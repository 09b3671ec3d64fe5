// Package mapped is the provider of senders paylock has no package for,
// registered as "mapped": any JSON object body, read through an RFC 6901
// JSON pointer per payment field, configured in the sources file:
//
//	acme:
//	  adapter: mapped
//	  signature: standard
//	  secrets_env: ACME_WEBHOOK_SECRETS
//	  fields: {transaction_id: /data/id, amount: /data/amount/minor, currency: /data/amount/currency, event_id: /id}
//
// Two optional fields read a payment's lifecycle: type, the pointer of what
// the body is, and refund_id, the pointer of a refund's id. The value at
// type is one of paylock's kinds (payment, refund, failed, canceled), or
// one the types setting maps to them:
//
//	fields: {..., type: /type, refund_id: /data/refund/id}
//	types: {payment.completed: payment, payment.refunded: refund}
//
// With types, a body of any other type is acknowledged and written
// nowhere; without it, another value is refused (422). A body where the
// type pointer resolves to nothing, and every body without the type field,
// is a payment, as before.
//
// Its sources are signed in headers: Standard Webhooks (the default) or
// Stripe's scheme.
package mapped

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

func init() { provider.Register("mapped", Provider{}) }

// Provider reads bodies through configured pointers.
type Provider struct{}

// fieldNames are the payment fields a mapping may name, in the order
// messages list them; the first three are required.
var fieldNames = []string{"transaction_id", "amount", "currency", "event_id", "type", "refund_id"}

const required = 3

// Schemes are Standard Webhooks, then Stripe's.
func (Provider) Schemes() []signature.Scheme {
	return []signature.Scheme{signature.SchemeStandard, signature.SchemeStripe}
}

// Keys: fields, the JSON pointer of each payment field (transaction_id,
// amount and currency required; event_id, type and refund_id optional),
// and types, the sender's type values mapped to paylock's kinds.
func (Provider) Keys() []string { return []string{"fields", "types"} }

// KeyDocs says what Keys mean (provider.Documented).
func (Provider) KeyDocs() []provider.KeyDoc {
	return []provider.KeyDoc{
		{Key: "fields", Doc: "the RFC 6901 pointer of each payment field in the body: `transaction_id`, `amount` (minor units) and `currency` required; `event_id`, `type` and `refund_id` optional"},
		{Key: "types", Doc: "the sender's type values (read at `fields.type`) mapped to `payment`, `refund`, `failed` or `canceled`; a body of another type is acknowledged `ignored` (without it, a value that is not one of those kinds is refused `422`)"},
	}
}

// New returns the adapter of cfg's pointers, or a *provider.SettingError
// naming the field ("fields.amount") of an unknown field, a pointer that is
// not one, or a missing required field.
func (Provider) New(cfg provider.Config) (provider.Adapter, error) {
	ptrs, err := pointers(cfg.Settings)
	if err != nil {
		return nil, err
	}
	a := adapter{rules: cfg.Rules, txID: ptrs["transaction_id"], amount: ptrs["amount"],
		currency: ptrs["currency"], names: payload.Names{}}
	for f, p := range ptrs {
		a.names[f] = p.String()
	}
	if p, ok := ptrs["event_id"]; ok {
		a.eventID = &p
	}
	if p, ok := ptrs["type"]; ok {
		a.typ = &p
	}
	if p, ok := ptrs["refund_id"]; ok {
		a.refundID = &p
	}
	if a.types, err = typeMap(cfg.Settings, a.typ != nil); err != nil {
		return nil, err
	}
	return a, nil
}

// typeMap reads the types setting: the sender's type values, each mapped
// to one of paylock's kinds; nil when the setting is absent.
func typeMap(s provider.Settings, typed bool) (map[string]string, error) {
	raw, ok := s["types"]
	if !ok {
		return nil, nil
	}
	fail := func(err error) error { return &provider.SettingError{Key: "types", Err: err} }
	if !typed {
		return nil, fail(errors.New("needs fields.type, the pointer of the value it maps"))
	}
	var types map[string]string
	if err := json.Unmarshal(raw, &types); err != nil || len(types) == 0 {
		return nil, fail(errors.New("want a map of the sender's type to payment, refund, failed or canceled"))
	}
	for _, v := range slices.Sorted(maps.Keys(types)) {
		if _, ok := kinds[types[v]]; !ok {
			return nil, fail(fmt.Errorf("%q maps to %q (want payment, refund, failed or canceled)", v, types[v]))
		}
	}
	return types, nil
}

// pointers are the parsed pointers of the fields setting, by field.
func pointers(s provider.Settings) (map[string]payload.Pointer, error) {
	if err := s.Only("fields", "types"); err != nil {
		return nil, err
	}
	raw, ok := s["fields"]
	if !ok {
		return nil, &provider.SettingError{Key: "fields", Err: fmt.Errorf(
			"missing: adapter mapped needs JSON pointers for %s", strings.Join(fieldNames[:required], ", "))}
	}
	var fields map[string]string
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, &provider.SettingError{Key: "fields", Err: errors.New("want a map of payment field to JSON pointer")}
	}
	out := make(map[string]payload.Pointer, len(fields))
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		fail := func(err error) error { return &provider.SettingError{Key: "fields." + f, Err: err} }
		if !slices.Contains(fieldNames, f) {
			return nil, fail(fmt.Errorf("unknown field (want %s), or a lifecycle field (%s)",
				strings.Join(fieldNames[:4], ", "), strings.Join(fieldNames[4:], ", ")))
		}
		p, err := payload.ParsePointer(fields[f])
		if err != nil {
			return nil, fail(err)
		}
		out[f] = p
	}
	for _, f := range fieldNames[:required] {
		if _, ok := out[f]; !ok {
			return nil, &provider.SettingError{Key: "fields." + f, Err: errors.New("missing: a JSON pointer such as /data/id")}
		}
	}
	return out, nil
}
