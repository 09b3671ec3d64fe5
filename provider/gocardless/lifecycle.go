package gocardless

import (
	"regexp"

	"github.com/paylock/paylock/lifecycle"
)

// GoCardless's ids are a two-letter prefix naming the resource and
// upper-case letters and digits (PM00008Q30R2BR, RF000099999999,
// EV0000ED6V59V1). Anything else in a webhook is refused, and the fetcher
// asks the API about nothing else.
var (
	paymentID = regexp.MustCompile(`^PM[0-9A-Z]{1,62}$`)
	refundID  = regexp.MustCompile(`^RF[0-9A-Z]{1,62}$`)
	eventID   = regexp.MustCompile(`^EV[0-9A-Z]{1,62}$`)
	// token is what a resource_type or an action may be (payments,
	// customer_approval_denied): a bounded lower-case token, since they
	// name the notice's type in the log and the answer.
	token = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

// paymentStatuses say what a payment's status records, per GoCardless's
// payment statuses
// (https://developer.gocardless.com/api-reference/#core-endpoints-payments):
//
//   - confirmed ("confirmed as collected") and paid_out ("included in a
//     payout"): a payment that succeeded, of the payment's amount;
//   - charged_back: it succeeded, then the customer's bank took the money
//     back under the Direct Debit guarantee: the success and a lost
//     dispute (a chargeback is only ever of a collected payment);
//   - failed ("failed to be processed") and customer_approval_denied: a
//     failure;
//   - cancelled: a cancellation (GoCardless cancels only payments not yet
//     submitted to the banks);
//   - pending_customer_approval, pending_submission and submitted: not
//     final, nothing is recorded yet.
//
// A status not here (one GoCardless adds later) records nothing either.
//
// Each event's id is derived from the state, <payment id>:<status>, so
// that fetching the same state twice records nothing more, and a new
// state records its new events. The success's id is <payment id>:confirmed
// whichever status follows (paid_out, charged_back): each of them was
// confirmed first, so the payment's success is one event.
//
// What the payment's status cannot say: a payment that fails after it was
// confirmed (GoCardless's late failure, "payments can fail after being
// confirmed if the failure message is sent late by the banks") records a
// failure, which package lifecycle does not apply over a success; and a
// chargeback GoCardless later cancels (chargeback_cancelled) leaves the
// lost dispute recorded. Both are the webhook's notices' types in the
// log.
var paymentStatuses = map[string][]lifecycle.Kind{
	"pending_customer_approval": nil,
	"pending_submission":        nil,
	"submitted":                 nil,
	"confirmed":                 {lifecycle.Succeeded},
	"paid_out":                  {lifecycle.Succeeded},
	"charged_back":              {lifecycle.Succeeded, lifecycle.DisputeLost},
	"failed":                    {lifecycle.Failed},
	"customer_approval_denied":  {lifecycle.Failed},
	"cancelled":                 {lifecycle.Canceled},
}

// successStatus names the event id of a payment's success.
const successStatus = "confirmed"

// chargebackStage is a chargeback's stage among a dispute's events
// (provider.Event.Stage): the one outcome GoCardless's statuses show.
const chargebackStage = 1

// refundStatuses say what a refund's status records, per GoCardless's
// refund statuses
// (https://developer.gocardless.com/api-reference/#core-endpoints-refunds):
//
//   - created, pending_submission and submitted: a refund requested, not
//     yet taken from the merchant (lifecycle.RefundPending);
//   - paid ("included in a payout": GoCardless has taken it from the
//     merchant's payout): a refund that succeeded, of the refund's own
//     amount;
//   - cancelled, bounced ("failed to be paid") and funds_returned ("had
//     its funds returned"): a refund that failed, whatever it reached
//     before (package lifecycle moves a refund only forward, so a failure
//     after paid wins).
//
// A status not here records nothing. Each event's id is
// <refund id>:<status>, and its refund id the refund's.
var refundStatuses = map[string]lifecycle.Kind{
	"created":            lifecycle.RefundPending,
	"pending_submission": lifecycle.RefundPending,
	"submitted":          lifecycle.RefundPending,
	"paid":               lifecycle.Refund,
	"cancelled":          lifecycle.RefundFailed,
	"bounced":            lifecycle.RefundFailed,
	"funds_returned":     lifecycle.RefundFailed,
}

// recordsSomething reports whether a payment in status, whose refunds are
// in refunds' statuses, records any event: the fetcher returns no body
// otherwise.
func recordsSomething(status string, refunds []string) bool {
	if len(paymentStatuses[status]) > 0 {
		return true
	}
	for _, r := range refunds {
		if _, ok := refundStatuses[r]; ok {
			return true
		}
	}
	return false
}
