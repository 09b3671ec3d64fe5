package provider

import (
	"context"
	"errors"
)

// KeyAPIKeyEnv and KeyAPIURL are the sources-file keys, for providers
// that list them in Keys (stripe), of the provider's status API: the
// environment variable holding the API's secret key, and the API's base
// URL ("": the provider's own). The provider checks them; the command
// reads the variable.
const (
	KeyAPIKeyEnv = "api_key_env"
	KeyAPIURL    = "api_url"
)

// ErrNoSuchPayment is wrapped by a Fetcher's error when the provider's
// API knows no payment of that id.
var ErrNoSuchPayment = errors.New("provider: the provider's API knows no such payment")

// A Syncer is a Provider whose API answers one payment's current state,
// so that paylock can record it without waiting for its webhook (a
// checkout's confirm, a payment stuck pending). Implementing it is
// optional.
type Syncer interface {
	// NewFetcher returns the fetcher of one source, or a *SettingError for
	// settings New would refuse too. cfg is a Lister's: the source, its
	// settings, the API's URL and key.
	NewFetcher(cfg ListerConfig) (Fetcher, error)
}

// A GlobalKeyed Syncer's sources fall back on paylock's command-wide API
// settings when they set no api_key_env or api_url (Stripe's, from
// paylock's first releases: STRIPE_API_KEY, PAYLOCK_STRIPE_API_URL).
// Another Syncer's source names its own api_key_env, and its Fetcher
// takes an empty URL for the provider's own API. Implementing it is
// optional.
type GlobalKeyed interface {
	GlobalKeyed()
}

// A Fetcher asks the provider's API for one payment of a source.
type Fetcher interface {
	// Fetch returns the payment ref as the source's adapter reads it: a
	// body shaped as the webhook event of the payment's current state,
	// whose event id says it came from the API (so that it is told apart
	// from the webhook's in the payment's events), and the state the
	// provider gave (Stripe's status). A nil body: the payment is in no
	// state the adapter records (still processing, say). A refused
	// request wraps ErrRefused, an unknown payment ErrNoSuchPayment.
	Fetch(ctx context.Context, ref string) (body []byte, status string, err error)
}

// ErrUnsupportedPointer is returned by an OrderFinder asked to search by a
// member its provider's API cannot search by.
var ErrUnsupportedPointer = errors.New("provider: the provider's API cannot search payments by that member")

// An OrderFinder is a Fetcher that can also find the payments naming an
// order, so that an order still awaiting payment whose payment's webhook
// was lost, and whose checkout never synced it, is found although nobody
// knows the payment's id. Implementing it is optional.
type OrderFinder interface {
	// FindByOrder returns the refs (the ids Fetch takes) of the payments
	// whose webhook body names orderID at pointer (RFC 6901 tokens, the
	// source's orders pointer); ErrUnsupportedPointer when the provider's
	// API cannot search by that member. A refused request wraps
	// ErrRefused.
	FindByOrder(ctx context.Context, pointer []string, orderID string) ([]string, error)
}

// A Confirmer is a Provider without a status API whose payments are
// confirmed by the shop's backend posting the provider's synchronous
// answer (Adyen's /payments response). Implementing it is optional.
type Confirmer interface {
	// ConfirmBody checks answer strictly and returns it as the source's
	// adapter reads it (a webhook body marked as a confirm), the
	// payment's reference and the answer's result; a nil body when the
	// result is not final (nothing to record yet). A bad answer is a
	// *payload.Error naming the field (400).
	ConfirmBody(settings Settings, answer []byte) (body []byte, ref, result string, err error)
}
