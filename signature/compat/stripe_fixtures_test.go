package compat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stripe/stripe-go/v82"
)

// stripeFixtures are the Stripe provider's samples (provider/stripe/samples).
const stripeFixtures = "../../provider/stripe/samples"

// TestStripeFixturesAreStripeEvents reads each sample of the Stripe
// provider (its tests and its conformance samples) with stripe-go and checks
// the ids, amounts and currency those expect, and that every key of the fixture is a field
// stripe-go knows, at every level where both are objects.
func TestStripeFixturesAreStripeEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file    string
		typ     stripe.EventType
		eventID string
		check   func(t *testing.T, raw json.RawMessage)
	}{
		{"payment_intent.succeeded.json", stripe.EventTypePaymentIntentSucceeded, "evt_3QpaylockPI0001",
			func(t *testing.T, raw json.RawMessage) {
				var pi stripe.PaymentIntent
				mustUnmarshal(t, raw, &pi)
				if pi.ID != "pi_3QpaylockPI0001" || pi.Object != "payment_intent" || pi.AmountReceived != 2000 ||
					pi.Currency != stripe.CurrencyJPY || pi.Status != stripe.PaymentIntentStatusSucceeded {
					t.Errorf("PaymentIntent = %s %s %d %s %s", pi.ID, pi.Object, pi.AmountReceived, pi.Currency, pi.Status)
				}
				knownKeys(t, "data.object", raw, pi)
			}},
		// The README's Stripe quick start sends this one (examples/stripe).
		{"../../../examples/stripe/payment_intent.succeeded.json", stripe.EventTypePaymentIntentSucceeded, "evt_3QsampleXpi7Ky2Lq0W1rT9mZ",
			func(t *testing.T, raw json.RawMessage) {
				var pi stripe.PaymentIntent
				mustUnmarshal(t, raw, &pi)
				if pi.ID != "pi_3QsampleXpi7Ky2Lq0W1rT9mZ" || pi.Object != "payment_intent" || pi.AmountReceived != 4999 ||
					pi.Currency != stripe.CurrencyUSD || pi.Status != stripe.PaymentIntentStatusSucceeded {
					t.Errorf("PaymentIntent = %s %s %d %s %s", pi.ID, pi.Object, pi.AmountReceived, pi.Currency, pi.Status)
				}
				knownKeys(t, "data.object", raw, pi)
			}},
		{"charge.succeeded.json", stripe.EventTypeChargeSucceeded, "evt_3QpaylockCH0001",
			func(t *testing.T, raw json.RawMessage) {
				var ch stripe.Charge
				mustUnmarshal(t, raw, &ch)
				if ch.ID != "ch_3QpaylockCH0001" || ch.Object != "charge" || ch.Amount != 1500 ||
					ch.Currency != stripe.CurrencyEUR || !ch.Paid || ch.PaymentIntent != nil {
					t.Errorf("Charge = %s %s %d %s paid=%v pi=%v", ch.ID, ch.Object, ch.Amount, ch.Currency, ch.Paid, ch.PaymentIntent)
				}
				knownKeys(t, "data.object", raw, ch)
			}},
		{"customer.created.json", stripe.EventTypeCustomerCreated, "evt_1QpaylockCU0001",
			func(t *testing.T, raw json.RawMessage) {
				var cu stripe.Customer
				mustUnmarshal(t, raw, &cu)
				if cu.ID != "cus_QpaylockCU0001" || cu.Object != "customer" {
					t.Errorf("Customer = %s %s", cu.ID, cu.Object)
				}
				knownKeys(t, "data.object", raw, cu)
			}},
		{"payment_intent.payment_failed.json", stripe.EventTypePaymentIntentPaymentFailed, "evt_3QpaylockPF0001",
			func(t *testing.T, raw json.RawMessage) {
				var pi stripe.PaymentIntent
				mustUnmarshal(t, raw, &pi)
				if pi.ID != "pi_3QpaylockPI0002" || pi.Amount != 2000 || pi.Currency != stripe.CurrencyJPY ||
					pi.Status != stripe.PaymentIntentStatusRequiresPaymentMethod || pi.LastPaymentError == nil {
					t.Errorf("PaymentIntent = %s %d %s %s", pi.ID, pi.Amount, pi.Currency, pi.Status)
				}
				knownKeys(t, "data.object", raw, pi)
			}},
		{"payment_intent.canceled.json", stripe.EventTypePaymentIntentCanceled, "evt_3QpaylockPC0001",
			func(t *testing.T, raw json.RawMessage) {
				var pi stripe.PaymentIntent
				mustUnmarshal(t, raw, &pi)
				if pi.ID != "pi_3QpaylockPI0002" || pi.Amount != 2000 || pi.Status != stripe.PaymentIntentStatusCanceled {
					t.Errorf("PaymentIntent = %s %d %s", pi.ID, pi.Amount, pi.Status)
				}
				knownKeys(t, "data.object", raw, pi)
			}},
		{"charge.refunded.json", stripe.EventTypeChargeRefunded, "evt_3QpaylockRF0001",
			func(t *testing.T, raw json.RawMessage) {
				var ch stripe.Charge
				mustUnmarshal(t, raw, &ch)
				if ch.ID != "ch_3QpaylockCH0002" || ch.AmountRefunded != 500 || ch.Currency != stripe.CurrencyJPY ||
					ch.PaymentIntent == nil || ch.PaymentIntent.ID != "pi_3QpaylockPI0001" {
					t.Errorf("Charge = %s refunded %d %s pi=%v", ch.ID, ch.AmountRefunded, ch.Currency, ch.PaymentIntent)
				}
				knownKeys(t, "data.object", raw, ch)
			}},
		{"charge.dispute.created.json", stripe.EventTypeChargeDisputeCreated, "evt_3QpaylockDP0001",
			func(t *testing.T, raw json.RawMessage) { checkDispute(t, raw, stripe.DisputeStatusNeedsResponse) }},
		{"charge.dispute.closed.json", stripe.EventTypeChargeDisputeClosed, "evt_3QpaylockDC0001",
			func(t *testing.T, raw json.RawMessage) { checkDispute(t, raw, stripe.DisputeStatusLost) }},
		{"payment_intent.amount_capturable_updated.json", stripe.EventTypePaymentIntentAmountCapturableUpdated, "evt_3QpaylockAC0001",
			func(t *testing.T, raw json.RawMessage) {
				var pi stripe.PaymentIntent
				mustUnmarshal(t, raw, &pi)
				if pi.ID != "pi_3QpaylockPI0003" || pi.AmountCapturable != 2000 || pi.Status != stripe.PaymentIntentStatusRequiresCapture {
					t.Errorf("PaymentIntent = %s capturable %d %s", pi.ID, pi.AmountCapturable, pi.Status)
				}
				knownKeys(t, "data.object", raw, pi)
			}},
		{"charge.captured.json", stripe.EventTypeChargeCaptured, "evt_3QpaylockCP0001",
			func(t *testing.T, raw json.RawMessage) {
				var ch stripe.Charge
				mustUnmarshal(t, raw, &ch)
				if ch.ID != "ch_3QpaylockCH0003" || ch.AmountCaptured != 1500 || !ch.Captured ||
					ch.PaymentIntent == nil || ch.PaymentIntent.ID != "pi_3QpaylockPI0003" {
					t.Errorf("Charge = %s captured %d pi=%v", ch.ID, ch.AmountCaptured, ch.PaymentIntent)
				}
				knownKeys(t, "data.object", raw, ch)
			}},
		{"refund.failed.json", stripe.EventTypeRefundFailed, "evt_3QpaylockRE0002",
			func(t *testing.T, raw json.RawMessage) {
				var re stripe.Refund
				mustUnmarshal(t, raw, &re)
				if re.ID != "re_3QpaylockRE0001" || re.Amount != 500 || re.Status != stripe.RefundStatusFailed ||
					re.PaymentIntent == nil || re.PaymentIntent.ID != "pi_3QpaylockPI0001" || re.Charge == nil || re.Charge.ID != "ch_3QpaylockCH0002" {
					t.Errorf("Refund = %s %d %s", re.ID, re.Amount, re.Status)
				}
				knownKeys(t, "data.object", raw, re)
			}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(filepath.Join(stripeFixtures, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var e stripe.Event
			mustUnmarshal(t, body, &e)
			if e.ID != tc.eventID || e.Object != "event" || e.Type != tc.typ || e.APIVersion != stripe.APIVersion {
				t.Errorf("Event = %s %s %s %s", e.ID, e.Object, e.Type, e.APIVersion)
			}
			if e.Data == nil || len(e.Data.Raw) == 0 {
				t.Fatal("Event has no data.object")
			}
			// Data.Raw marshals back as itself; the object is compared on
			// its own by check.
			var top map[string]json.RawMessage
			mustUnmarshal(t, body, &top)
			delete(top, "data")
			knownKeys(t, "", mustMarshal(t, top), e)
			tc.check(t, e.Data.Raw)
		})
	}
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("unmarshal into %T: %v", v, err)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// knownKeys fails for every key of fixture that typed, marshalled back by
// encoding/json, does not have: a field stripe-go's type lacks, such as a
// misspelt or invented one, which json.Unmarshal silently drops.
func knownKeys(t *testing.T, path string, fixture []byte, typed any) {
	t.Helper()
	var want, got any
	mustUnmarshal(t, fixture, &want)
	mustUnmarshal(t, mustMarshal(t, typed), &got)
	for _, missing := range unknownKeys(path, want, got) {
		t.Errorf("fixture key %s is not a field of %T", missing, typed)
	}
}

func unknownKeys(path string, fixture, typed any) []string {
	f, ok := fixture.(map[string]any)
	if !ok {
		return nil
	}
	g, ok := typed.(map[string]any)
	if !ok {
		return nil
	}
	var out []string
	for k, v := range f {
		name := k
		if path != "" {
			name = path + "." + k
		}
		tv, ok := g[k]
		if !ok {
			out = append(out, name)
			continue
		}
		out = append(out, unknownKeys(name, v, tv)...)
	}
	sort.Strings(out)
	return out
}

// checkDispute checks a Dispute fixture: of PaymentIntent pi_3QpaylockPI0001
// through Charge ch_3QpaylockCH0002, 2000 JPY, in status.
func checkDispute(t *testing.T, raw json.RawMessage, status stripe.DisputeStatus) {
	t.Helper()
	var du stripe.Dispute
	mustUnmarshal(t, raw, &du)
	if du.ID != "du_3QpaylockDU0001" || du.Object != "dispute" || du.Amount != 2000 || du.Currency != stripe.CurrencyJPY ||
		du.Status != status || du.Charge == nil || du.Charge.ID != "ch_3QpaylockCH0002" ||
		du.PaymentIntent == nil || du.PaymentIntent.ID != "pi_3QpaylockPI0001" {
		t.Errorf("Dispute = %s %s %d %s %s charge=%v pi=%v", du.ID, du.Object, du.Amount, du.Currency, du.Status, du.Charge, du.PaymentIntent)
	}
	knownKeys(t, "data.object", raw, du)
}
