package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/paylock/paylock/lifecycle"
)

func TestUnsettledPaymentsAreThePendingAndAuthorizedOnesOfTheSourcesUnchangedLongest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ps := b.store.Payments()
	event := func(source, tx string, kind lifecycle.Kind) {
		t.Helper()
		if _, err := ps.RecordEvent(ctx, PaymentEvent{Source: source, TransactionID: tx, EventID: "evt_" + tx + "_" + string(kind),
			Kind: kind, Amount: 100, Currency: "EUR", Payload: []byte(`{}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	event("stripe", "pi_auth_old", lifecycle.Authorized)
	event("stripe", "pi_auth_older", lifecycle.Authorized)
	event("stripe", "pi_pending", lifecycle.Refund) // a refund before its payment: pending
	event("stripe", "pi_failed", lifecycle.Failed)
	event("stripe", "pi_auth_new", lifecycle.Authorized)
	event("adyen", "psp_auth", lifecycle.Authorized)
	recordListed(t, b, "stripe", "pi_paid")
	for tx, age := range map[string]string{"pi_auth_old": "2 hours", "pi_auth_older": "3 hours", "pi_pending": "90 minutes",
		"pi_failed": "3 hours", "psp_auth": "3 hours", "pi_paid": "3 hours"} {
		if _, err := b.store.Pool().Exec(ctx, `UPDATE payments SET received_at = now() - $2::interval, updated_at = now() - $2::interval
			WHERE transaction_id = $1`, tx, age); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ps.UnsettledPayments(ctx, []string{"stripe"}, time.Now().Add(-time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Source+"/"+p.TransactionID)
	}
	if want := []string{"stripe/pi_auth_older", "stripe/pi_auth_old", "stripe/pi_pending"}; !slices.Equal(names, want) {
		t.Errorf("unsettled %v, want %v (authorized or pending, of stripe, unchanged for an hour, longest first)", names, want)
	}
	if got, _ := ps.UnsettledPayments(ctx, []string{"stripe"}, time.Now().Add(-time.Hour), 1); len(got) != 1 || got[0].TransactionID != "pi_auth_older" {
		t.Errorf("limit 1: %v, want pi_auth_older", got)
	}
	if got, err := ps.UnsettledPayments(ctx, nil, time.Now(), 10); err != nil || len(got) != 0 {
		t.Errorf("no sources: %v %v, want none", got, err)
	}
}
