// Package adyen is the Adyen provider, registered as "adyen": Adyen's
// standard notification batches (Webhooks API NotificationRequestItem),
// signed item by item with Adyen's HMAC inside the body (hex keys, as
// Adyen's Customer Area shows them), one payment per successful
// AUTHORISATION, and the payment's lifecycle (a refused AUTHORISATION, a
// CANCELLATION, REFUND, REFUND_FAILED and the dispute codes: see codes),
// answered with Adyen's literal "[accepted]". Its sources take no setting
// of their own.
package adyen

import (
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

func init() { provider.Register("adyen", Provider{}) }

// Provider is Adyen.
type Provider struct{}

// Schemes: Adyen's HMAC signature of each notification item, alone.
func (Provider) Schemes() []signature.Scheme { return []signature.Scheme{signature.SchemeAdyen} }

// Keys: the provider reads no setting of its own.
func (Provider) Keys() []string { return nil }

// New returns the adapter of notification batches; it refuses any setting.
func (Provider) New(cfg provider.Config) (provider.Adapter, error) {
	if err := cfg.Settings.Only(); err != nil {
		return nil, err
	}
	return adapter{rules: cfg.Rules}, nil
}
