package provider

import (
	"encoding/json"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/signature"
)

// Event is one record a delivery carries: today, a payment that succeeded.
type Event struct {
	// TransactionID is the payment's id at the provider (pi_..., an Adyen
	// pspReference); with the source's name it identifies the payment.
	TransactionID string
	// Amount is in minor units, greater than 0.
	Amount int64
	// Currency is an upper-case ISO 4217 code.
	Currency string
	// EventID identifies the provider's event (evt_..., a webhook-id),
	// kept for audit; "" when there is none.
	EventID string
	// Payload is what is stored with the payment: the whole body, or the
	// part of it that is this event (an Adyen notification item).
	Payload []byte
}

// Payment is what the payment rules check of e (payload.Rules.CheckPayment).
func (e Event) Payment() payload.Payment {
	return payload.Payment{TransactionID: e.TransactionID, Amount: e.Amount, Currency: e.Currency, EventID: e.EventID}
}

// An Adapter turns a source's verified delivery bodies into events. It is
// safe for concurrent use.
type Adapter interface {
	// Adapt returns the events body carries, each checked with the
	// source's payload.Rules; zero events: nothing in the delivery is to
	// be recorded, and it is acknowledged "ignored". headerID is the
	// delivery's id from its signature headers (Standard Webhooks'
	// webhook-id), "" when the scheme carries none (or the body came from
	// the provider's API). Its errors are *payload.Error values (400 or
	// 422); it returns no events with an error.
	Adapt(body []byte, headerID string) ([]Event, error)
}

// An Acknowledger is an Adapter whose provider expects a 2xx answer of its
// own (Adyen's literal "[accepted]"), written once every event of the
// delivery is confirmed recorded, duplicate or ignored.
type Acknowledger interface {
	Acknowledge() (contentType string, body []byte)
}

// Settings are a source's provider-specific keys from
// PAYLOCK_SOURCES_FILE (those the provider lists in Keys), each value as
// raw JSON: {"events": ["charge.succeeded"]}. Secrets never appear here:
// they come from the environment, through the signature package.
type Settings map[string]json.RawMessage

// Config is what Provider.New builds a source's adapter from.
type Config struct {
	// Source is the source's name, for messages.
	Source string
	// Settings are the source's provider keys; nil when it sets none.
	Settings Settings
	// Rules are the payment rules every event is checked with.
	Rules *payload.Rules
}

// Provider is one kind of sender of payment webhooks: everything paylock
// knows about it. Implementations register themselves (Register) from an
// init function, one package each under provider/.
type Provider interface {
	// Schemes are the signature schemes its sources may use; [0] is the
	// one its own deliveries are signed with (the samples' scheme).
	Schemes() []signature.Scheme
	// Keys are the sources-file keys it reads from Settings, besides the
	// keys every source has (adapter, signature, secrets_env,
	// forward_url).
	Keys() []string
	// New checks cfg and returns the source's adapter. A bad setting is
	// a *SettingError naming the key ("events", "fields.amount").
	New(cfg Config) (Adapter, error)
	// Samples are example deliveries with the events they must become,
	// and bodies that must be refused: the conformance suite
	// (provider/providertest) runs on them.
	Samples() Samples
}
