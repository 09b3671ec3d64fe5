package order_test

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/order"
)

var (
	now      = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	expected = &order.Expectation{Amount: 2000, Currency: "EUR", ExpiresAt: now.Add(time.Hour)}
)

func paid(id string, captured, refunded int64, currency string) order.PaymentState {
	st := lifecycle.StatusSucceeded
	switch {
	case captured == 0:
		st = lifecycle.StatusFailed
	case refunded == captured:
		st = lifecycle.Refunded
	case refunded > 0:
		st = lifecycle.PartiallyRefunded
	}
	return order.PaymentState{Source: "stripe", TransactionID: id, Status: st, Currency: currency,
		AmountCaptured: captured, AmountRefunded: refunded}
}

func TestDeriveEachStatus(t *testing.T) {
	t.Parallel()
	expired := &order.Expectation{Amount: 2000, Currency: "EUR", ExpiresAt: now.Add(-time.Second)}
	never := &order.Expectation{Amount: 2000, Currency: "EUR"}
	for _, c := range []struct {
		name     string
		exp      *order.Expectation
		payments []order.PaymentState
		want     order.State
	}{
		{"unregistered", nil, []order.PaymentState{paid("a", 2000, 0, "EUR")}, order.State{Status: order.Unregistered}},
		{"awaiting, nothing linked", expected, nil, order.State{Status: order.Awaiting}},
		{"awaiting, a failed payment", expected, []order.PaymentState{paid("a", 0, 0, "EUR")}, order.State{Status: order.Awaiting}},
		{"awaiting, no expiry", never, nil, order.State{Status: order.Awaiting}},
		{"expired at expires_at", &order.Expectation{Amount: 1, Currency: "EUR", ExpiresAt: now}, nil, order.State{Status: order.Expired}},
		{"expired", expired, []order.PaymentState{paid("a", 0, 0, "EUR")}, order.State{Status: order.Expired}},
		{"paid", expected, []order.PaymentState{paid("a", 2000, 0, "EUR")}, order.State{Status: order.Paid, AmountPaid: 2000}},
		{"paid after expiry", expired, []order.PaymentState{paid("a", 2000, 0, "EUR")}, order.State{Status: order.Paid, AmountPaid: 2000}},
		{"paid in two parts", expected, []order.PaymentState{paid("a", 1500, 0, "EUR"), paid("b", 500, 0, "EUR")},
			order.State{Status: order.Paid, AmountPaid: 2000}},
		{"paid again after a refund", expected, []order.PaymentState{paid("a", 2000, 2000, "EUR"), paid("b", 2000, 0, "EUR")},
			order.State{Status: order.Paid, AmountPaid: 2000}},
		{"underpaid", expected, []order.PaymentState{paid("a", 1999, 0, "EUR")}, order.State{Status: order.Underpaid, AmountPaid: 1999}},
		{"underpaid by a partial refund", expected, []order.PaymentState{paid("a", 2000, 500, "EUR")},
			order.State{Status: order.Underpaid, AmountPaid: 1500}},
		{"overpaid", expected, []order.PaymentState{paid("a", 2001, 0, "EUR")}, order.State{Status: order.Overpaid, AmountPaid: 2001}},
		{"double_paid", expected, []order.PaymentState{paid("a", 2000, 0, "EUR"), paid("b", 2000, 0, "EUR")},
			order.State{Status: order.DoublePaid, AmountPaid: 4000}},
		{"refunded", expected, []order.PaymentState{paid("a", 2000, 2000, "EUR")}, order.State{Status: order.Refunded}},
		{"refunded after expiry", expired, []order.PaymentState{paid("a", 2000, 2000, "EUR")}, order.State{Status: order.Refunded}},
		{"currency_mismatch", expected, []order.PaymentState{paid("a", 2000, 0, "EUR"), paid("b", 2000, 0, "USD")},
			order.State{Status: order.CurrencyMismatch, AmountPaid: 2000}},
		{"a failed payment in another currency is no mismatch", expected,
			[]order.PaymentState{paid("a", 2000, 0, "EUR"), paid("b", 0, 0, "USD")}, order.State{Status: order.Paid, AmountPaid: 2000}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := order.Derive(c.exp, c.payments, now); got != c.want {
				t.Errorf("Derive = %+v; want %+v", got, c.want)
			}
		})
	}
}

func TestStatusMessagesAndReviews(t *testing.T) {
	t.Parallel()
	var msgs []string
	for _, s := range order.Statuses {
		if m := s.Message(); m != "" {
			msgs = append(msgs, m)
		}
		want := s == order.DoublePaid || s == order.Overpaid || s == order.CurrencyMismatch
		if s.NeedsReview() != want {
			t.Errorf("%s.NeedsReview() = %v", s, !want)
		}
	}
	if fmt.Sprint(msgs) != fmt.Sprint(order.Messages) {
		t.Errorf("statuses forward %v; Messages says %v", msgs, order.Messages)
	}
}

// TestDeriveIgnoresArrivalOrder draws an order's expectation and payments
// (succeeded, partly or fully refunded, failed, some in another currency)
// and checks every permutation of the payments derives the same state.
func TestDeriveIgnoresArrivalOrder(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		exp := &order.Expectation{Amount: rapid.Int64Range(1, 5000).Draw(t, "amount"), Currency: "EUR",
			ExpiresAt: now.Add(time.Duration(rapid.IntRange(-2, 2).Draw(t, "expiry")) * time.Minute)}
		if rapid.IntRange(0, 9).Draw(t, "unregistered") == 0 {
			exp = nil
		}
		n := rapid.IntRange(0, 5).Draw(t, "payments")
		payments := make([]order.PaymentState, n)
		for i := range payments {
			captured := rapid.SampledFrom([]int64{0, 1000, 2000, 5000}).Draw(t, "captured")
			refunded := rapid.Int64Range(0, captured).Draw(t, "refunded")
			cur := "EUR"
			if rapid.IntRange(0, 7).Draw(t, "currency") == 0 {
				cur = "USD"
			}
			payments[i] = paid(fmt.Sprint("p", i), captured, refunded, cur)
		}
		want := order.Derive(exp, payments, now)
		permute(payments, 0, func() {
			if got := order.Derive(exp, payments, now); got != want {
				t.Fatalf("payments %+v derive %+v; another order derived %+v", payments, got, want)
			}
		})
	})
}

// permute calls f with every permutation of p[k:] (Heap's algorithm by
// swaps, restoring p afterwards).
func permute(p []order.PaymentState, k int, f func()) {
	if k == len(p) {
		f()
		return
	}
	for i := k; i < len(p); i++ {
		p[k], p[i] = p[i], p[k]
		permute(p, k+1, f)
		p[k], p[i] = p[i], p[k]
	}
}
