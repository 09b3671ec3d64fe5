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
		return provider.Event{Kind: k, TransactionID: "A1", Amount: 1000, Currency: "EUR", EventID: psp + ":" + code, RefundID: refund, At: at}
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
			[]provider.Event{{Kind: lifecycle.DisputeLost, TransactionID: "A1", Amount: 1000, Currency: "EUR", EventID: "A1:CHARGEBACK", At: at}}},
		{"the payment and its refund in one batch", batch(item("A1", "AUTHORISATION", "true"), of("R1", "REFUND", "true")),
			[]provider.Event{{TransactionID: "A1", Amount: 1000, Currency: "EUR", EventID: "A1:AUTHORISATION"}, ev(lifecycle.Refund, "R1", "REFUND", "R1")}},
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

func TestAdyenAdapterRefusesAModificationOfNoPayment(t *testing.T) {
	t.Parallel()
	_, err := testAdapter.Adapt([]byte(batch(item("R1", "REFUND", "true"))), "")
	providertest.WantRefused(t, err, 422, "notificationItems[0].NotificationRequestItem.originalReference")
}
