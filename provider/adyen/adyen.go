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
	"regexp"

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
//
// basic_auth_env names the environment variable holding the user:password
// of the basic authentication Adyen sends with each notification (set in
// the webhook's settings in the Customer Area, as Adyen recommends beside
// HMAC); paylock then refuses, 401 before reading the body, a delivery
// without it. The credentials themselves never appear in the file.
//
// capture, auto (the default) or manual, says how the merchant account
// captures: auto, a successful AUTHORISATION is money taken (the payment
// recorded) unless a void (CANCELLATION, CANCEL_OR_REFUND) follows before
// any CAPTURE; manual, it is money held (authorized), taken by CAPTUREs
// only.
// OrderPointer: an Adyen NotificationRequestItem names its order in
// merchantReference (provider.OrderNamer).
func (Provider) OrderPointer() string { return "/merchantReference" }

func (Provider) Keys() []string {
	return []string{keyAccounts, keyLive, keyCapture, provider.KeyBasicAuthEnv}
}

// KeyDocs says what Keys mean (provider.Documented).
func (Provider) KeyDocs() []provider.KeyDoc {
	return []provider.KeyDoc{
		{Key: keyAccounts, Doc: "the merchant account codes whose notifications the source records (default: any); another's is refused `422`"},
		{Key: keyLive, Doc: "`true` or `false`: what each notification's `live` must say (default: either)"},
		{Key: keyCapture, Doc: "`auto` (default): a successful `AUTHORISATION` is money taken unless a void follows before any `CAPTURE`; `manual`: money held, taken by `CAPTURE`s only"},
		{Key: provider.KeyBasicAuthEnv, Doc: "the environment variable holding the `user:password` Adyen sends with each notification; a delivery without it is refused `401` before its body is read"},
	}
}

const (
	keyAccounts = "merchant_accounts"
	keyLive     = "live"
	keyCapture  = "capture"
)

// envName is what an environment variable's name may look like.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// New returns the adapter of notification batches for cfg's settings.
func (Provider) New(cfg provider.Config) (provider.Adapter, error) {
	if err := cfg.Settings.Only(keyAccounts, keyLive, keyCapture, provider.KeyBasicAuthEnv); err != nil {
		return nil, err
	}
	if raw, ok := cfg.Settings[provider.KeyBasicAuthEnv]; ok {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil || !envName.MatchString(name) {
			return nil, &provider.SettingError{Key: provider.KeyBasicAuthEnv, Err: errors.New("want the name of an environment variable holding user:password")}
		}
	}
	a := adapter{rules: cfg.Rules}
	_, a.basicAuth = cfg.Settings[provider.KeyBasicAuthEnv]
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
	if raw, ok := cfg.Settings[keyCapture]; ok {
		var mode string
		if err := json.Unmarshal(raw, &mode); err != nil || mode != "auto" && mode != "manual" {
			return nil, &provider.SettingError{Key: keyCapture, Err: errors.New(`want "auto" or "manual"`)}
		}
		a.manualCapture = mode == "manual"
	}
	return a, nil
}
