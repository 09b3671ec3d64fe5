// Package native is paylock's own provider, registered as "paylock": the
// flat body {"transaction_id","amount","currency"} that the built-in
// payments source (POST /webhooks/payments) reads, and any source of the
// sources file with adapter paylock. Its sources are signed in headers,
// Standard Webhooks (the default) or Stripe's scheme, and take no setting
// of their own.
package native

import (
	"strings"

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
// top-level "id" when it is a string (kept for audit, never refused).
type adapter struct{ rules *payload.Rules }

func (a adapter) Adapt(body []byte, headerID string) ([]provider.Event, error) {
	in, err := decodePayment(a.rules, body)
	if err != nil {
		return nil, err
	}
	eventID := headerID
	if eventID == "" {
		eventID = in.EventID
	}
	return []provider.Event{{
		TransactionID: in.TransactionID, Amount: in.Amount, Currency: in.Currency,
		Payload: body, EventID: eventID,
	}}, nil
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
