// Package gocardless is the GoCardless provider, registered as
// "gocardless": GoCardless's webhooks
// (https://developer.gocardless.com/api-reference/#appendix-webhooks),
// signed with GoCardless's own scheme, which this package registers with
// package signature (Scheme: Webhook-Signature, the hex HMAC-SHA256 of the
// raw body keyed with the webhook endpoint's secret).
//
// A GoCardless webhook is a batch of up to 250 events, and an event says
// what happened to a resource (a payment confirmed, a refund paid) but
// carries no amount and no currency. So a source's adapter is a
// provider.Notifier: Notices reads a webhook body and names the payments
// its events are about, and paylock records only what GoCardless's API
// answers for each of them, fetched with the source's access token
// (Provider.NewFetcher: GET /payments/{id} and GET /refunds?payment={id})
// and read by Adapt. Which lifecycle events a payment's state records is
// the table of lifecycle.go.
//
// The sources-file keys are the status API's: api_key_env names the
// environment variable holding the access token, api_url the API's base
// URL (default https://api.gocardless.com; https://api-sandbox.gocardless.com
// for the sandbox). Nothing outside this package names the provider or the
// scheme: paylock reaches them through the provider and signature
// registries, and provider/all imports the package.
package gocardless

import (
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

func init() { provider.Register("gocardless", Provider{}) }

// Provider is GoCardless.
type Provider struct{}

// Schemes is GoCardless's own (Scheme).
func (Provider) Schemes() []signature.Scheme { return []signature.Scheme{Scheme} }

// Keys are the status API's: the variable holding the access token, and
// the API's base URL. A source records every payment and refund state of
// lifecycle.go; there is nothing else to set.
func (Provider) Keys() []string { return []string{provider.KeyAPIKeyEnv, provider.KeyAPIURL} }

// KeyDocs says what Keys mean (provider.Documented).
func (Provider) KeyDocs() []provider.KeyDoc {
	return provider.APIKeyDocs("the GoCardless access token", "required: GoCardless's events carry no amount", DefaultURL)
}

// New returns the adapter, or a *provider.SettingError for a key it does
// not read, an api_key_env that is not a variable's name, or an api_url
// that is not an http(s) URL without credentials.
func (Provider) New(cfg provider.Config) (provider.Adapter, error) {
	if err := checkSettings(cfg.Settings); err != nil {
		return nil, err
	}
	return adapter{rules: cfg.Rules}, nil
}

// OrderPointer is where a GoCardless payment names the merchant's order
// in the body Adapt reads (the fetched payment, payments.metadata, which
// holds up to three keys the merchant set when creating the payment):
// order_id (provider.OrderNamer).
func (Provider) OrderPointer() string { return "/payments/metadata/order_id" }

// checkSettings refuses the keys New does not read and checks the two it
// does: api_key_env must be an environment variable's name, api_url an
// API base URL (provider.CheckAPISettings).
func checkSettings(s provider.Settings) error {
	if err := s.Only(provider.KeyAPIKeyEnv, provider.KeyAPIURL); err != nil {
		return err
	}
	return provider.CheckAPISettings(s, "the GoCardless access token", DefaultURL)
}
