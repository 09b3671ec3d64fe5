// Package checkout is the Checkout.com provider, registered as "checkout":
// Checkout.com's webhook events (payment_approved, payment_captured,
// payment_refunded, disputes, ...; https://www.checkout.com/docs/developer-resources/webhooks)
// signed with Checkout.com's own scheme, which this package registers with
// package signature (Scheme: Cko-Signature, the hex HMAC-SHA256 of the raw
// body, and optionally a static Authorization value). Nothing outside this
// package names either: paylock reaches them through the provider and
// signature registries, and provider/all imports the package.
package checkout

import (
	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

func init() { provider.Register("checkout", Provider{}) }

// Provider is Checkout.com.
type Provider struct{}

// record says what a Checkout.com event type records: its lifecycle kind,
// whether its data is a dispute (which names its payment in
// data.payment_id, not data.id), and a dispute outcome's stage.
type record struct {
	kind    lifecycle.Kind
	dispute bool
	stage   int
}

// records are the event types paylock records, per Checkout.com's webhook
// event types. A payment is approved (authorised: money held) and then
// captured, in one or several captures, each its own action (data.action_id);
// with automatic capture both events still come, in any order. A void
// cancels an authorisation never captured; a declined payment failed. A
// declined capture or refund is that action failing, named by its own
// action id. A dispute is received, then won or lost (accepted and
// expired are lost); arbitration is a later stage that decides over the
// first outcome.
var records = []struct {
	typ string
	record
}{
	{"payment_approved", record{kind: lifecycle.Authorized}},
	{"payment_captured", record{kind: lifecycle.Captured}},
	{"payment_capture_declined", record{kind: lifecycle.CaptureFailed}},
	{"payment_declined", record{kind: lifecycle.Failed}},
	{"payment_voided", record{kind: lifecycle.Canceled}},
	{"payment_refunded", record{kind: lifecycle.Refund}},
	{"payment_refund_declined", record{kind: lifecycle.RefundFailed}},
	{"dispute_received", record{kind: lifecycle.DisputeOpened, dispute: true}},
	{"dispute_evidence_required", record{kind: lifecycle.DisputeOpened, dispute: true}},
	{"dispute_won", record{kind: lifecycle.DisputeWon, dispute: true, stage: 1}},
	{"dispute_lost", record{kind: lifecycle.DisputeLost, dispute: true, stage: 1}},
	{"dispute_accepted", record{kind: lifecycle.DisputeLost, dispute: true, stage: 1}},
	{"dispute_expired", record{kind: lifecycle.DisputeLost, dispute: true, stage: 1}},
	{"dispute_arbitration_won", record{kind: lifecycle.DisputeWon, dispute: true, stage: 2}},
	{"dispute_arbitration_lost", record{kind: lifecycle.DisputeLost, dispute: true, stage: 2}},
}

// Schemes is Checkout.com's own (Scheme).
func (Provider) Schemes() []signature.Scheme { return []signature.Scheme{Scheme} }

// Keys: none. A source records every type of records; the Authorization
// value is part of the source's secrets (Scheme), since it is one.
func (Provider) Keys() []string { return nil }

// New returns the adapter, or a *provider.SettingError for any setting.
func (Provider) New(cfg provider.Config) (provider.Adapter, error) {
	if err := cfg.Settings.Only(); err != nil {
		return nil, err
	}
	return adapter{rules: cfg.Rules}, nil
}

// OrderPointer is where a Checkout.com payment names the merchant's order:
// data.reference, the reference the payment was requested with
// (provider.OrderNamer).
func (Provider) OrderPointer() string { return "/data/reference" }
