package store

import (
	"context"
	"testing"
	"time"
)

func TestConsoleSearchPayments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, src := range []string{"stripe", "adyen"} {
		for _, id := range []string{"s-1", "s-2"} {
			p := newPayment(id)
			p.Source = src
			p.EventID = "evt_" + src + "_" + id
			if _, err := b.store.Payments().RecordPayment(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	later := time.Now().Add(time.Hour)
	tests := []struct {
		name string
		q    PaymentSearch
		want []string // source/transaction_id, newest first
	}{
		{"ByTransactionID", PaymentSearch{TransactionID: "s-1"}, []string{"adyen/s-1", "stripe/s-1"}},
		{"ByEventID", PaymentSearch{EventID: "evt_adyen_s-2"}, []string{"adyen/s-2"}},
		{"BySource", PaymentSearch{Source: "stripe"}, []string{"stripe/s-2", "stripe/s-1"}},
		{"BySourceAndRange", PaymentSearch{Source: "stripe", Since: time.Now().Add(-time.Hour), Until: later}, []string{"stripe/s-2", "stripe/s-1"}},
		{"RangeInTheFuture", PaymentSearch{Since: later}, nil},
		{"Limit", PaymentSearch{Limit: 1}, []string{"adyen/s-2"}},
		{"Nothing", PaymentSearch{TransactionID: "nope"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.store.Payments().SearchPayments(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Source+"/"+p.TransactionID)
				if p.Payload != nil || p.EventID == "" || p.ReceivedAt.IsZero() {
					t.Errorf("%+v: want no payload, an event id and received_at", p)
				}
			}
			if len(names) != len(tc.want) {
				t.Fatalf("got %v, want %v", names, tc.want)
			}
			for i := range names {
				if names[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", names, tc.want)
				}
			}
		})
	}
}
