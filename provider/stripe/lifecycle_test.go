package stripe

import (
	"bytes"
	"testing"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
)

// refundEvent is a Refund event of type typ whose refund has status.
func refundEvent(typ, status string) []byte {
	b := bytes.Replace(sample("refund.failed.json"), []byte(`"type": "refund.failed"`), []byte(`"type": "`+typ+`"`), 1)
	return bytes.Replace(b, []byte(`"status": "failed"`), []byte(`"status": "`+status+`"`), 1)
}

// TestStripeRefundsCarryTheirStatus: every refund event type says its
// Refund's id and status, so a refund that fails after it was reported
// is taken back.
func TestStripeRefundsCarryTheirStatus(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, nil)
	for _, tc := range []struct {
		typ, status string
		want        lifecycle.Kind
	}{
		{"refund.created", "pending", lifecycle.RefundPending},
		{"refund.updated", "requires_action", lifecycle.RefundPending},
		{"refund.updated", "succeeded", lifecycle.Refund},
		{"charge.refund.updated", "failed", lifecycle.RefundFailed},
		{"refund.failed", "failed", lifecycle.RefundFailed},
		{"refund.updated", "canceled", lifecycle.RefundFailed},
	} {
		got, err := a.Adapt(refundEvent(tc.typ, tc.status), "")
		if err != nil {
			t.Fatalf("%s %s: %v", tc.typ, tc.status, err)
		}
		if len(got) != 1 || got[0].Kind != tc.want || got[0].RefundID != "re_3QpaylockRE0001" ||
			got[0].TransactionID != "pi_3QpaylockPI0001" || got[0].Amount != 500 || got[0].Cumulative {
			t.Fatalf("%s %s: %+v, want one %s of refund re_3QpaylockRE0001 of pi_3QpaylockPI0001", tc.typ, tc.status, got, tc.want)
		}
	}
	if _, err := a.Adapt(refundEvent("refund.updated", "lost"), ""); err == nil {
		t.Fatal("a refund of unknown status was accepted")
	}
}

// TestAChargeSourceFilesEveryEventUnderTheCharge: a source recording
// charge.succeeded alone gets its charges' refunds and disputes (they were
// filed under the PaymentIntent, a pending orphan, before).
func TestAChargeSourceFilesEveryEventUnderTheCharge(t *testing.T) {
	t.Parallel()
	byCharge := newAdapter(t, []string{"charge.succeeded", "charge.refunded", "refund.failed", "charge.dispute.created",
		"payment_intent.canceled", "charge.captured"})
	byPI := newAdapter(t, nil)
	for _, tc := range []struct {
		name       string
		body       []byte
		charge, pi string
	}{
		{"charge.refunded", sample("charge.refunded.json"), "ch_3QpaylockCH0002", "pi_3QpaylockPI0001"},
		{"refund.failed", sample("refund.failed.json"), "ch_3QpaylockCH0002", "pi_3QpaylockPI0001"},
		{"charge.dispute.created", sample("charge.dispute.created.json"), "ch_3QpaylockCH0002", "pi_3QpaylockPI0001"},
		{"charge.captured", sample("charge.captured.json"), "ch_3QpaylockCH0003", "pi_3QpaylockPI0003"},
		{"payment_intent.canceled: its latest charge, none yet", sample("payment_intent.canceled.json"), "pi_3QpaylockPI0002", "pi_3QpaylockPI0002"},
	} {
		for _, side := range []struct {
			a    provider.Adapter
			want string
		}{{byCharge, tc.charge}, {byPI, tc.pi}} {
			got, err := side.a.Adapt(tc.body, "")
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if len(got) != 1 || got[0].TransactionID != side.want {
				t.Fatalf("%s: %+v, want one event of %s", tc.name, got, side.want)
			}
		}
	}
}

// TestAuthorisationsAndCaptures: a PaymentIntent awaiting capture is
// authorised; its Charge's capture is cumulative; amount_capturable
// falling to 0 says nothing.
func TestAuthorisationsAndCaptures(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, nil)
	got, err := a.Adapt(sample("payment_intent.amount_capturable_updated.json"), "")
	if err != nil || len(got) != 1 || got[0].Kind != lifecycle.Authorized || got[0].Amount != 2000 {
		t.Fatalf("amount_capturable_updated: %+v %v", got, err)
	}
	zero := bytes.Replace(sample("payment_intent.amount_capturable_updated.json"), []byte(`"amount_capturable": 2000`), []byte(`"amount_capturable": 0`), 1)
	if got, err := a.Adapt(zero, ""); err != nil || len(got) != 0 {
		t.Fatalf("amount_capturable 0: %+v %v, want nothing recorded", got, err)
	}
	got, err = a.Adapt(sample("charge.captured.json"), "")
	if err != nil || len(got) != 1 || got[0].Kind != lifecycle.Captured || !got[0].Cumulative || got[0].Amount != 1500 ||
		got[0].CaptureID != "ch_3QpaylockCH0003" {
		t.Fatalf("charge.captured: %+v %v", got, err)
	}
}
