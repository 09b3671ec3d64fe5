package adyen

import (
	"slices"
	"time"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// codes are the eventCodes of a payment's lifecycle that paylock records,
// and what each is, per Adyen's documentation of its standard webhooks
// (docs.adyen.com/development-resources/webhooks/webhook-types, and the
// dispute notifications of docs.adyen.com/risk-management/disputes-api):
// a CHARGEBACK debits the merchant (the dispute lost unless defended), a
// CHARGEBACK_REVERSED credits it back (won), a SECOND_CHARGEBACK debits it
// again (lost); pre-arbitration ends it either way. The codes alone are not
// monotonic (lost, won, lost again): package lifecycle orders the outcomes
// by their stage (stages), which the HMAC covers, and by eventDate, which
// it does not, only within a stage. The notices of a dispute under way
// open it.
//
// The modifications of an authorisation: CAPTURE (a capture, keyed by its
// own pspReference), CAPTURE_FAILED (that capture undone), CANCELLATION (a
// void), CANCEL_OR_REFUND (a void before any capture, a refund after),
// AUTHORISATION_ADJUSTMENT (the authorised amount changed); OFFER_CLOSED
// is a payment that never completed (a failure).
var codes = map[string]lifecycle.Kind{
	"CAPTURE":                           lifecycle.Captured,
	"CAPTURE_FAILED":                    lifecycle.CaptureFailed,
	"AUTHORISATION_ADJUSTMENT":          lifecycle.AuthorizationAdjusted,
	"CANCEL_OR_REFUND":                  lifecycle.CancelOrRefund,
	"OFFER_CLOSED":                      lifecycle.Failed,
	"CANCELLATION":                      lifecycle.Canceled,
	"REFUND":                            lifecycle.Refund,
	"REFUND_FAILED":                     lifecycle.RefundFailed,
	"REFUNDED_REVERSED":                 lifecycle.RefundFailed,
	"NOTIFICATION_OF_CHARGEBACK":        lifecycle.DisputeOpened,
	"REQUEST_FOR_INFORMATION":           lifecycle.DisputeOpened,
	"INFORMATION_SUPPLIED":              lifecycle.DisputeOpened,
	"DISPUTE_DEFENSE_PERIOD_ENDED":      lifecycle.DisputeOpened,
	"ISSUER_RESPONSE_TIMEFRAME_EXPIRED": lifecycle.DisputeOpened,
	"CHARGEBACK":                        lifecycle.DisputeLost,
	"SECOND_CHARGEBACK":                 lifecycle.DisputeLost,
	"PREARBITRATION_LOST":               lifecycle.DisputeLost,
	"CHARGEBACK_REVERSED":               lifecycle.DisputeWon,
	"PREARBITRATION_WON":                lifecycle.DisputeWon,
}

// stages order a dispute's events by Adyen's process: the notices, the
// chargeback, its reversal, a second chargeback, pre-arbitration.
var stages = map[string]int{
	"CHARGEBACK":          1,
	"CHARGEBACK_REVERSED": 2,
	"SECOND_CHARGEBACK":   3,
	"PREARBITRATION_WON":  4,
	"PREARBITRATION_LOST": 4,
}

// kindOf is what an item of code with success says: a payment that
// succeeded or was authorised (a successful AUTHORISATION, by the
// source's capture mode), a failure (a refused one), a lifecycle event (a
// successful modification or a dispute notice), or nothing to record (ok
// false): another code, or a modification Adyen could not make (a REFUND
// with success "false" changed nothing).
func kindOf(code string, success, manualCapture bool) (lifecycle.Kind, bool) {
	if code == "AUTHORISATION" {
		switch {
		case success && manualCapture:
			return lifecycle.Authorized, true
		case success:
			return lifecycle.Succeeded, true
		}
		return lifecycle.Failed, true
	}
	k, ok := codes[code]
	if !ok || !success {
		return "", false
	}
	return k, true
}

// refusedWithPayment reports whether a refused AUTHORISATION item names
// its pspReference and amount: what a failure needs to be recorded.
func refusedWithPayment(item *payload.Node) bool {
	psp, _, err := item.Child("", "pspReference")
	if err != nil || psp == nil || psp.Kind() != payload.String {
		return false
	}
	amount, _, err := item.Child("", "amount")
	return err == nil && amount != nil && amount.Kind() == payload.Object
}

// link names the payment lifecycle event p belongs to: the item's
// originalReference (a modification's, a dispute's), else its own
// pspReference (a refused authorisation, a dispute notice naming the
// payment itself). A refund's id is its pspReference. Its date is the
// item's eventDate. It returns the name of the member holding the
// transaction id.
func link(item *payload.Node, prefix string, p *provider.Event) (string, error) {
	name := prefix + ".pspReference"
	switch p.Kind {
	case lifecycle.Refund, lifecycle.RefundFailed, lifecycle.CancelOrRefund:
		p.RefundID = p.TransactionID
	case lifecycle.Captured, lifecycle.CaptureFailed:
		p.CaptureID = p.TransactionID
	}
	modification := p.Kind != lifecycle.Failed && p.Kind != lifecycle.Authorized &&
		p.Kind != lifecycle.DisputeOpened && p.Kind != lifecycle.DisputeWon && p.Kind != lifecycle.DisputeLost
	orig, origName, err := item.Child(prefix, "originalReference")
	switch {
	case err != nil:
		return "", err
	case orig != nil && orig.Kind() != payload.String && orig.Kind() != payload.Null:
		return "", payload.Malformed(origName, origName+" must be a string")
	case orig != nil && orig.Kind() == payload.String && orig.Text() != "" && p.Kind != lifecycle.Failed && p.Kind != lifecycle.Authorized:
		p.TransactionID, name = orig.Text(), origName
	case modification:
		return "", payload.Invalid(origName, origName+" is required: it names the payment a modification is of")
	}
	date, _, err := item.Child(prefix, "eventDate")
	if err != nil {
		return "", err
	}
	if date != nil && date.Kind() == payload.String {
		if at, err := time.Parse(time.RFC3339, date.Text()); err == nil {
			p.At = at.UTC()
		}
	}
	return name, nil
}

// Types are the eventCodes an Adyen source records, AUTHORISATION first,
// then codes' in name order: every source records them all
// (provider.Typed). An item of another code, or one Adyen says it could
// not carry out (success "false"), is acknowledged and written nowhere.
func (a adapter) Types() []provider.EventType {
	auth := lifecycle.Succeeded
	if a.manualCapture {
		auth = lifecycle.Authorized
	}
	out := []provider.EventType{{Name: "AUTHORISATION", Kind: auth, Recorded: true}}
	names := make([]string, 0, len(codes))
	for c := range codes {
		names = append(names, c)
	}
	slices.Sort(names)
	for _, c := range names {
		out = append(out, provider.EventType{Name: c, Kind: codes[c], Recorded: true})
	}
	return out
}
