// Package native is paylock's own provider, registered as "paylock": the
// flat body {"transaction_id","amount","currency"} that the built-in
// payments source (POST /webhooks/payments) reads, and any source of the
// sources file with adapter paylock. An optional "type" says what the body
// is: "payment" (the default, the body of paylock's first releases), or a
// later event of the payment's lifecycle: "refund" (of amount, with its
// "refund_id"), "failed" or "canceled". Its sources are signed in headers,
// Standard Webhooks (the default) or Stripe's scheme, and take no setting
// of their own.
package native

import (
	"strings"

	"github.com/paylock/paylock/lifecycle"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

// name is the provider's registered name: the adapter the sources file
// names, and the built-in payments source's.
const name = "paylock"

func init() { provider.Register(name, Provider{}) }

// Provider is paylock's own flat body.
type Provider struct{}

// Schemes are Standard Webhooks, then Stripe's.
func (Provider) Schemes() []signature.Scheme {
	return []signature.Scheme{signature.SchemeStandard, signature.SchemeStripe}
}

// Keys: the provider reads no setting of its own.
// OrderPointer: paylock's flat body names its order in order_id
// (provider.OrderNamer).
func (Provider) OrderPointer() string { return "/order_id" }

func (Provider) Keys() []string { return nil }

// New returns the adapter of the flat body; it refuses any setting.
func (Provider) New(cfg provider.Config) (provider.Adapter, error) {
	if err := cfg.Settings.Only(); err != nil {
		return nil, err
	}
	return adapter{rules: cfg.Rules}, nil
}

// adapter reads paylock's own flat body
// {"transaction_id","amount","currency"}: one event, its payload the whole
// body, its event id the delivery's header id or, failing that, the body's
// top-level "id" when it is a string (kept for audit, never refused). A
// lifecycle event without either is identified by what it is about:
// "refund:<refund_id>", "failed:<transaction_id>", "canceled:<transaction_id>".
type adapter struct{ rules *payload.Rules }

// kinds are the values of "type" and the events they are.
var kinds = map[string]lifecycle.Kind{
	"payment": lifecycle.Succeeded, "refund": lifecycle.Refund,
	"failed": lifecycle.Failed, "canceled": lifecycle.Canceled,
}

func (a adapter) Adapt(body []byte, headerID string) ([]provider.Event, error) {
	in, typ, refundID, err := decodeEvent(a.rules, body)
	if err != nil {
		return nil, err
	}
	eventID := headerID
	if eventID == "" {
		eventID = in.EventID
	}
	e := provider.Event{
		TransactionID: in.TransactionID, Amount: in.Amount, Currency: in.Currency,
		Payload: body, EventID: eventID,
	}
	if typ == "" || typ == "payment" {
		return []provider.Event{e}, nil
	}
	e.Kind, e.RefundID = kinds[typ], refundID
	if e.EventID == "" {
		e.EventID = typ + ":" + in.TransactionID
		if refundID != "" {
			e.EventID = "refund:" + refundID
		}
	}
	return []provider.Event{e}, nil
}

// decodeEvent decodes a flat body as decodePayment does, with its optional
// "type" and, for a refund, its required "refund_id".
func decodeEvent(r *payload.Rules, body []byte) (payload.Payment, string, string, error) {
	var typ, refundID string
	err := payload.DecodeObject(body, []payload.Field{
		{Name: "type", Str: &typ},
		{Name: "refund_id", Str: &refundID},
	})
	if err != nil {
		return payload.Payment{}, "", "", err
	}
	if _, ok := kinds[typ]; typ != "" && !ok {
		return payload.Payment{}, "", "", payload.Invalid("type", `type must be "payment", "refund", "failed" or "canceled"`)
	}
	refundID = strings.TrimSpace(refundID)
	switch {
	case typ == "refund" && refundID == "":
		return payload.Payment{}, "", "", payload.Invalid("refund_id", "refund_id is required for a refund")
	case len(refundID) > 255:
		return payload.Payment{}, "", "", payload.Invalid("refund_id", "refund_id must be at most 255 characters")
	case typ != "refund" && refundID != "":
		return payload.Payment{}, "", "", payload.Invalid("refund_id", "refund_id is for a refund only")
	}
	in, err := decodePayment(r, body)
	return in, typ, refundID, err
}

// decodePayment decodes and checks a flat payment body: transaction_id
// (trimmed) and amount are required; currency, when absent (never when
// ""), is the rules' default currency; a top-level "id" string of at most
// 255 bytes is the event id. Its errors are *payload.Error values (400 for
// malformed JSON or wrong types, 422 for invalid values).
func decodePayment(r *payload.Rules, body []byte) (payload.Payment, error) {
	var in payload.Payment
	var currencySet bool
	err := payload.DecodeObject(body, []payload.Field{
		{Name: "transaction_id", Required: true, Str: &in.TransactionID},
		{Name: "amount", Required: true, Num: &in.Amount},
		{Name: "currency", Str: &in.Currency, Seen: &currencySet},
		// A Stripe-style event id, kept for audit; never a reason to refuse.
		{Name: "id", Lenient: true, Str: &in.EventID},
	})
	if err != nil {
		return in, err
	}
	in.TransactionID = strings.TrimSpace(in.TransactionID)
	if len(in.EventID) > 255 {
		in.EventID = ""
	}
	if !currencySet {
		// Only an absent currency takes the default: "" is invalid, never
		// silently defaulted.
		if r.DefaultCurrency() == "" {
			return in, payload.Invalid("currency", "currency is required (no PAYLOCK_DEFAULT_CURRENCY is configured)")
		}
		in.Currency = r.DefaultCurrency()
	}
	if err := r.CheckPayment(in, nil); err != nil {
		return in, err
	}
	return in, nil
}
