// Package adyen is the Adyen provider, registered as "adyen": Adyen's
// standard notification batches (Webhooks API NotificationRequestItem),
// signed item by item with Adyen's HMAC inside the body (hex keys, as
// Adyen's Customer Area shows them), one payment per successful
// AUTHORISATION, and the payment's lifecycle (a refused AUTHORISATION, a
// CANCELLATION, REFUND, REFUND_FAILED and the dispute codes: see codes),
// answered with Adyen's literal "[accepted]". A source may name the
// merchant accounts it takes (merchant_accounts) and whether its
// notifications are live or test (live).
package adyen

import (
	"encoding/json"
	"errors"

	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

func init() { provider.Register("adyen", Provider{}) }

// Provider is Adyen.
type Provider struct{}

// Schemes: Adyen's HMAC signature of each notification item, alone.
func (Provider) Schemes() []signature.Scheme { return []signature.Scheme{signature.SchemeAdyen} }

// Keys: merchant_accounts, a list of the merchant account codes whose
// notifications the source records (others are refused, 422; the
// merchant account is covered by the item's HMAC), and live, true or
// false, which the notification's "live" must say (422 otherwise).
func (Provider) Keys() []string { return []string{keyAccounts, keyLive} }

const (
	keyAccounts = "merchant_accounts"
	keyLive     = "live"
)

// New returns the adapter of notification batches for cfg's settings.
func (Provider) New(cfg provider.Config) (provider.Adapter, error) {
	if err := cfg.Settings.Only(keyAccounts, keyLive); err != nil {
		return nil, err
	}
	a := adapter{rules: cfg.Rules}
	if raw, ok := cfg.Settings[keyAccounts]; ok {
		if err := json.Unmarshal(raw, &a.accounts); err != nil || len(a.accounts) == 0 {
			return nil, &provider.SettingError{Key: keyAccounts, Err: errors.New("want a non-empty list of merchant account codes")}
		}
		for _, acc := range a.accounts {
			if acc == "" {
				return nil, &provider.SettingError{Key: keyAccounts, Err: errors.New("an empty merchant account code")}
			}
		}
	}
	if raw, ok := cfg.Settings[keyLive]; ok {
		var live bool
		if err := json.Unmarshal(raw, &live); err != nil {
			return nil, &provider.SettingError{Key: keyLive, Err: errors.New("want true or false")}
		}
		a.live = &live
	}
	return a, nil
}
