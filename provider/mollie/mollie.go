// Package mollie is the Mollie provider, registered as "mollie": Mollie's
// classic payment webhooks (https://docs.mollie.com/overview/webhooks),
// which are unsigned and carry nothing but a payment's id, posted as
// application/x-www-form-urlencoded ("id=tr_d0b0E3EA3v") whenever the
// payment's status changes, a refund is made on it or a chargeback
// received.
//
// paylock records nothing such a webhook says. Its adapter is a
// provider.Notifier: Notices reads the payment id from the webhook body,
// and the pipeline fetches that payment from Mollie's API with the
// source's own key (Fetcher: GET /v2/payments/{id}?embed=refunds,chargebacks)
// and records what the answer says, read by Adapt. So a forged webhook
// can at most make paylock ask Mollie about a payment; it can never make
// it record one. The package registers no signature scheme (Schemes is
// empty, provider.SignsNothing).
//
// One payment is one Mollie payment (tr_...). Adapt turns the payment's
// current state into the lifecycle events that state implies, each with an
// event id derived from that state alone ("tr_...:paid", "re_...:refunded"),
// so that fetching the same state twice records nothing new and a changed
// state records only what changed. Amounts are Mollie's decimal strings
// converted exactly to minor units by the currency's ISO 4217 exponent.
//
// Nothing outside this package names it: paylock reaches it through the
// provider registry, and provider/all imports the package.
package mollie

import (
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

func init() { provider.Register("mollie", Provider{}) }

// Provider is Mollie.
type Provider struct{}

// Schemes: none. Mollie signs nothing; what a source records comes from
// Mollie's API, fetched with the source's key (provider.SignsNothing).
func (Provider) Schemes() []signature.Scheme { return nil }

// SignsNothing says Mollie's webhooks carry no signature
// (provider.SignsNothing): a mollie source needs no secrets.
func (Provider) SignsNothing() {}

// Keys are the status API's settings: api_key_env, the environment
// variable holding the source's Mollie API key (live_... or test_...),
// and api_url, the API's base URL ("" or absent: DefaultURL).
func (Provider) Keys() []string { return []string{provider.KeyAPIKeyEnv, provider.KeyAPIURL} }

// KeyDocs says what Keys mean (provider.Documented).
func (Provider) KeyDocs() []provider.KeyDoc {
	return provider.APIKeyDocs("the Mollie API key (`live_…` or `test_…`)", "required: Mollie's webhooks name payments that only the API describes", DefaultURL)
}

// New returns the adapter, or a *provider.SettingError for a setting
// other than Keys or a bad value of one.
func (Provider) New(cfg provider.Config) (provider.Adapter, error) {
	if err := checkSettings(cfg.Settings); err != nil {
		return nil, err
	}
	return adapter{rules: cfg.Rules}, nil
}

// OrderPointer is where a Mollie payment names the merchant's order in
// the body Adapt reads (the API's payment object): metadata.order_id, the
// key Mollie's own examples and plugins set when they create the payment
// (provider.OrderNamer). A payment whose metadata is not an object names
// no order there.
func (Provider) OrderPointer() string { return "/metadata/order_id" }

// checkSettings refuses keys other than Keys, an api_key_env that is not
// a variable's name and an api_url that is not an API base URL.
func checkSettings(s provider.Settings) error {
	if err := s.Only(provider.KeyAPIKeyEnv, provider.KeyAPIURL); err != nil {
		return err
	}
	return provider.CheckAPISettings(s, "the Mollie API key (live_... or test_...)", DefaultURL)
}
