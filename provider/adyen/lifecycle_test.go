package adyen

import (
	"testing"
	"time"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

// of makes a modification or dispute item of payment A1.
func of(psp, code, success string, replace ...string) string {
	return item(psp, code, success, append([]string{`"originalReference":""`, `"originalReference":"A1"`}, replace...)...)
}

func TestAdyenAdapterRecordsTheLifecycleCodes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	ev := func(k lifecycle.Kind, psp, code, refund string) provider.Event {
		return provider.Event{Kind: k, TransactionID: "A1", Amount: 1000, Currency: "EUR", EventID: psp + ":" + code, RefundID: refund,
			Stage: stages[code], Account: "PaylockECOM", At: at}
	}
	capture := func(k lifecycle.Kind, psp, code string) provider.Event {
		e := ev(k, psp, code, "")
		e.CaptureID = psp
		return e
	}
	for _, tc := range []struct {
		name string
		body string
		want []provider.Event
	}{
		{"a refund, linked by originalReference, its pspReference the refund's id", batch(of("R1", "REFUND", "true")),
			[]provider.Event{ev(lifecycle.Refund, "R1", "REFUND", "R1")}},
		{"a refund Adyen could not make changes nothing", batch(of("R1", "REFUND", "false")), nil},
		{"REFUND_FAILED undoes the refund", batch(of("R1", "REFUND_FAILED", "true")),
			[]provider.Event{ev(lifecycle.RefundFailed, "R1", "REFUND_FAILED", "R1")}},
		{"a cancellation", batch(of("C1", "CANCELLATION", "true")), []provider.Event{ev(lifecycle.Canceled, "C1", "CANCELLATION", "")}},
		{"the dispute codes", batch(of("D1", "NOTIFICATION_OF_CHARGEBACK", "true"), of("D1", "CHARGEBACK", "true"),
			of("D1", "CHARGEBACK_REVERSED", "true"), of("D1", "SECOND_CHARGEBACK", "true"), of("D1", "PREARBITRATION_WON", "true"),
			of("D1", "INFORMATION_SUPPLIED", "true"), of("D1", "DISPUTE_DEFENSE_PERIOD_ENDED", "true"), of("D1", "PREARBITRATION_LOST", "true")),
			[]provider.Event{ev(lifecycle.DisputeOpened, "D1", "NOTIFICATION_OF_CHARGEBACK", ""), ev(lifecycle.DisputeLost, "D1", "CHARGEBACK", ""),
				ev(lifecycle.DisputeWon, "D1", "CHARGEBACK_REVERSED", ""), ev(lifecycle.DisputeLost, "D1", "SECOND_CHARGEBACK", ""),
				ev(lifecycle.DisputeWon, "D1", "PREARBITRATION_WON", ""), ev(lifecycle.DisputeOpened, "D1", "INFORMATION_SUPPLIED", ""),
				ev(lifecycle.DisputeOpened, "D1", "DISPUTE_DEFENSE_PERIOD_ENDED", ""), ev(lifecycle.DisputeLost, "D1", "PREARBITRATION_LOST", "")}},
		{"a dispute notice naming the payment itself", batch(item("A1", "CHARGEBACK", "true")),
			[]provider.Event{{Kind: lifecycle.DisputeLost, TransactionID: "A1", Amount: 1000, Currency: "EUR", EventID: "A1:CHARGEBACK",
				Stage: 1, Account: "PaylockECOM", At: at}}},
		{"the payment and its refund in one batch", batch(item("A1", "AUTHORISATION", "true"), of("R1", "REFUND", "true")),
			[]provider.Event{{TransactionID: "A1", Amount: 1000, Currency: "EUR", EventID: "A1:AUTHORISATION", Account: "PaylockECOM"},
				ev(lifecycle.Refund, "R1", "REFUND", "R1")}},
		{"captures, a failed capture, a capture Adyen could not make", batch(of("C1", "CAPTURE", "true"), of("C2", "CAPTURE", "true"),
			of("C1", "CAPTURE_FAILED", "true"), of("C3", "CAPTURE", "false")),
			[]provider.Event{capture(lifecycle.Captured, "C1", "CAPTURE"), capture(lifecycle.Captured, "C2", "CAPTURE"),
				capture(lifecycle.CaptureFailed, "C1", "CAPTURE_FAILED")}},
		{"cancel-or-refund: a void or a refund, keyed as a refund", batch(of("X1", "CANCEL_OR_REFUND", "true")),
			[]provider.Event{ev(lifecycle.CancelOrRefund, "X1", "CANCEL_OR_REFUND", "X1")}},
		{"an authorisation adjustment", batch(of("J1", "AUTHORISATION_ADJUSTMENT", "true")),
			[]provider.Event{ev(lifecycle.AuthorizationAdjusted, "J1", "AUTHORISATION_ADJUSTMENT", "")}},
		{"an offer closed: the payment never completed", batch(item("A1", "OFFER_CLOSED", "true")),
			[]provider.Event{{Kind: lifecycle.Failed, TransactionID: "A1", Amount: 1000, Currency: "EUR", EventID: "A1:OFFER_CLOSED",
				Account: "PaylockECOM", At: at}}},
		{"the same item twice: once", batch(of("R1", "REFUND", "true"), of("R1", "REFUND", "true")),
			[]provider.Event{ev(lifecycle.Refund, "R1", "REFUND", "R1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := testAdapter.Adapt([]byte(tc.body), "")
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				tc.want[i].Payload = got[min(i, len(got)-1)].Payload
			}
			providertest.WantEvents(t, got, tc.want)
		})
	}
}

// TestAdyenManualCaptureAuthorises: with capture: manual, a successful
// AUTHORISATION is money held (authorized), not a payment taken.
func TestAdyenManualCaptureAuthorises(t *testing.T) {
	t.Parallel()
	a, err := Provider{}.New(provider.Config{Source: "adyen", Rules: testAdapter.rules, Settings: provider.Settings{"capture": []byte(`"manual"`)}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Adapt([]byte(batch(item("A1", "AUTHORISATION", "true"))), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.Event{{Kind: lifecycle.Authorized, TransactionID: "A1", Amount: 1000, Currency: "EUR", EventID: "A1:AUTHORISATION",
		Account: "PaylockECOM", At: time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC), Payload: got[0].Payload}}
	providertest.WantEvents(t, got, want)
	if _, err := (Provider{}).New(provider.Config{Source: "adyen", Rules: testAdapter.rules, Settings: provider.Settings{"capture": []byte(`"later"`)}}); err == nil {
		t.Fatal(`capture: "later" accepted`)
	}
}

func TestAdyenAdapterRefusesAModificationOfNoPayment(t *testing.T) {
	t.Parallel()
	_, err := testAdapter.Adapt([]byte(batch(item("R1", "REFUND", "true"))), "")
	providertest.WantRefused(t, err, 422, "notificationItems[0].NotificationRequestItem.originalReference")
}
