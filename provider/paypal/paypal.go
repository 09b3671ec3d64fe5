// Package paypal is the PayPal provider, registered as "paypal": PayPal's
// webhook events (PAYMENT.CAPTURE.*, PAYMENT.AUTHORIZATION.*,
// CUSTOMER.DISPUTE.*;
// https://developer.paypal.com/api/rest/webhooks/event-names/) signed
// with PayPal's own scheme, which this package registers with package
// signature (Scheme: an RSA signature checked against the certificate at
// PAYPAL-CERT-URL, fetched only from the source's cert_hosts, PayPal's
// by default). Nothing outside
// this package names either: paylock reaches them through the provider
// and signature registries.
//
// One payment is one PayPal capture (the money moved): a capture's events
// name it by its id, a refund by the capture it refunds (its link rel
// "up"). An authorization (intent AUTHORIZE) is a payment of its own,
// named by the authorization id: its CREATED and VOIDED events record
// there; its capture is then the capture's payment. A dispute records on
// the capture it disputes (its seller_transaction_id).
package paypal

import (
	"strings"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

func init() { provider.Register("paypal", Provider{}) }

// Provider is PayPal.
type Provider struct{}

// payment says where an event's resource names its payment.
type payment int

const (
	self     payment = iota // resource.id
	upLink                  // resource.links[rel=up]: the refunded capture
	disputed                // resource.disputed_transactions[].seller_transaction_id
)

// record says what a PayPal event type records: its lifecycle kind, where
// its resource names its payment, and whether its kind is the dispute's
// outcome (resource.dispute_outcome.outcome_code; kind is then the kind
// of a buyer-favour outcome).
type record struct {
	kind    lifecycle.Kind
	payment payment
	outcome bool
}

// records are the event types paylock records. A completed capture is a
// payment that succeeded (PayPal captures at once with intent CAPTURE);
// a denied or declined one failed. A refund records on the capture it
// refunds. A reversal is the capture's money taken back (a chargeback or
// a PayPal-side reversal): a lost dispute, as lifecycle has no other
// kind for it. An authorization created holds money; voided, it is
// canceled. A dispute (resource_type "dispute") created or updated is an
// open dispute of the capture it names; resolved, it is won or lost by its
// outcome_code (outcomes), its stage ordered by its
// dispute_life_cycle_stage (stages): an appeal's outcome decides over the
// claim's.
var records = []struct {
	typ string
	record
}{
	{"PAYMENT.CAPTURE.COMPLETED", record{kind: lifecycle.Succeeded}},
	{"PAYMENT.CAPTURE.DENIED", record{kind: lifecycle.Failed}},
	{"PAYMENT.CAPTURE.DECLINED", record{kind: lifecycle.Failed}},
	{"PAYMENT.CAPTURE.REFUNDED", record{kind: lifecycle.Refund, payment: upLink}},
	{"PAYMENT.CAPTURE.REVERSED", record{kind: lifecycle.DisputeLost, payment: upLink}},
	{"PAYMENT.AUTHORIZATION.CREATED", record{kind: lifecycle.Authorized}},
	{"PAYMENT.AUTHORIZATION.VOIDED", record{kind: lifecycle.Canceled}},
	{"CUSTOMER.DISPUTE.CREATED", record{kind: lifecycle.DisputeOpened, payment: disputed}},
	{"CUSTOMER.DISPUTE.UPDATED", record{kind: lifecycle.DisputeOpened, payment: disputed}},
	{"CUSTOMER.DISPUTE.RESOLVED", record{kind: lifecycle.DisputeLost, payment: disputed, outcome: true}},
}

// outcomes are what a resolved dispute's outcome_code records
// (https://developer.paypal.com/api/customer-disputes/v1/, dispute_outcome).
// The buyer's favour is lost: RESOLVED_BUYER_FAVOUR (PayPal decided for
// the buyer) and ACCEPTED (the merchant accepted the claim and refunded).
// The seller's favour is won: RESOLVED_SELLER_FAVOUR, CANCELED_BY_BUYER
// (the buyer withdrew), DENIED (the claim was denied) and
// RESOLVED_WITH_PAYOUT (PayPal paid the buyer itself: the merchant keeps
// the money). NONE, or a code not listed, is refused: it says nothing of
// who keeps the money.
var outcomes = map[string]lifecycle.Kind{
	"RESOLVED_BUYER_FAVOUR":  lifecycle.DisputeLost,
	"ACCEPTED":               lifecycle.DisputeLost,
	"RESOLVED_SELLER_FAVOUR": lifecycle.DisputeWon,
	"CANCELED_BY_BUYER":      lifecycle.DisputeWon,
	"DENIED":                 lifecycle.DisputeWon,
	"RESOLVED_WITH_PAYOUT":   lifecycle.DisputeWon,
}

// stages order a resolved dispute's outcomes by its
// dispute_life_cycle_stage (lifecycle.Event.Stage): the inquiry and the
// claim (PayPal's CHARGEBACK stage, not a card chargeback) first, then the
// merchant's first appeal, then the second.
var stages = map[string]int{
	"INQUIRY":         1,
	"CHARGEBACK":      1,
	"PRE_ARBITRATION": 2,
	"ARBITRATION":     3,
}

// Schemes is PayPal's own (Scheme).
func (Provider) Schemes() []signature.Scheme { return []signature.Scheme{Scheme} }

// KeyCertHosts is the sources-file key of the hosts PAYPAL-CERT-URL may
// name (Scheme's allowlist; DefaultCertHosts when absent).
const KeyCertHosts = "cert_hosts"

// Keys: cert_hosts (KeyCertHosts).
func (Provider) Keys() []string { return []string{KeyCertHosts} }

// KeyDocs says what Keys mean (provider.Documented).
func (Provider) KeyDocs() []provider.KeyDoc {
	return []provider.KeyDoc{{Key: KeyCertHosts, Doc: "the hosts (`host` or `host:port`, https only) `PAYPAL-CERT-URL` may name: " +
		"the certificate is fetched from no other, and a URL elsewhere is refused (401) before any request; " +
		"default PayPal's (`" + strings.Join(DefaultCertHosts, "`, `") + "`)"}}
}

// New returns the adapter, or a *provider.SettingError for a key other
// than cert_hosts or a cert_hosts that is not a non-empty list of hosts
// (parseCertHosts). The scheme reads cert_hosts itself (Scheme's
// Configure); the adapter does not use it.
func (Provider) New(cfg provider.Config) (provider.Adapter, error) {
	if err := cfg.Settings.Only(KeyCertHosts); err != nil {
		return nil, err
	}
	if raw, ok := cfg.Settings[KeyCertHosts]; ok {
		if _, err := parseCertHosts(raw); err != nil {
			return nil, &provider.SettingError{Key: KeyCertHosts, Err: err}
		}
	}
	return adapter{rules: cfg.Rules}, nil
}

// OrderPointer is where a PayPal payment names the merchant's order:
// resource.custom_id, the merchant's own id set on the purchase unit and
// carried onto its captures and authorizations (invoice_id is an invoice
// number, unique per PayPal account and often absent) (provider.OrderNamer).
func (Provider) OrderPointer() string { return "/resource/custom_id" }
