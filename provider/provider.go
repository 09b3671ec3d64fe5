package provider

import (
	"encoding/json"
	"time"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/signature"
)

// Event is one record a delivery carries: a payment that succeeded, or
// another event of a payment's lifecycle (a failure, a cancellation, a
// refund, a dispute), which paylock records once per source and EventID
// and folds into the payment's state (package lifecycle).
type Event struct {
	// Kind is what happened; "" (or lifecycle.Succeeded) is a payment that
	// succeeded, recorded as a payment row, as before lifecycles.
	Kind lifecycle.Kind
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
	// RefundID names the refund of a refund or refund_failed event ("":
	// the event's own id).
	RefundID string
	// CaptureID names the capture of a captured or capture_failed event
	// ("": the event's own id).
	CaptureID string
	// Cumulative says a refund or capture event's Amount is the total so
	// far (Stripe's charge.amount_refunded, charge.amount_captured), not
	// one refund's or capture's.
	Cumulative bool
	// Stage orders a dispute's events by the provider's signed event type
	// (lifecycle.Event.Stage); 0 for the rest.
	Stage int
	// Account is the merchant account the event is of (Adyen's
	// merchantAccountCode); "" when the provider has none. A lifecycle
	// event of another account than its payment's is not applied.
	Account string
	// At is when the provider says the event happened (it orders dispute
	// outcomes); zero when the body says nothing.
	At time.Time
}

// Succeeded reports whether e is a payment that succeeded (a payment row)
// rather than a later lifecycle event. A lifecycle event always has an
// EventID and a TransactionID naming the payment it belongs to; its Amount
// is 0 when the provider sends none (a dispute's outcome, say).
func (e Event) Succeeded() bool { return e.Kind == "" || e.Kind == lifecycle.Succeeded }

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

// A PartlySigned adapter's signature covers only part of each event's
// payload (Adyen's HMAC covers eight fields of an item). Unsigned lists
// the payload's members it does not cover, as JSON member names
// ("additionalData", "amount.extra"), sorted; nil when the source
// authenticates its deliveries whole (Adyen with basic_auth_env). The
// forward marks them unauthenticated.
type PartlySigned interface {
	Unsigned(payload []byte) []string
}

// A SignatureBearer adapter's event payloads carry the provider's
// signature inside them (Adyen's additionalData.hmacSignature).
// WithoutSignature returns payload without it: what paylock forwards is
// the verified content only, never material a reader could replay. It
// returns payload unchanged when it carries no signature or is not JSON.
type SignatureBearer interface {
	WithoutSignature(payload []byte) []byte
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
