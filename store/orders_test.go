package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/order"
)

func TestRegisterOrderOnceSameBodyAgainDifferentBodyConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	expires := time.Date(2026, 12, 3, 12, 0, 0, 123456789, time.UTC)
	r := OrderRegistration{OrderID: "ord-1", Amount: 2000, Currency: "EUR", ExpiresAt: expires}
	o, created, err := b.store.Orders().RegisterOrder(ctx, r)
	if err != nil || !created {
		t.Fatalf("first registration: created %v, %v", created, err)
	}
	if o.Status != order.Awaiting || o.Version != 1 || !o.Registered || o.Amount != 2000 || o.Currency != "EUR" ||
		!o.ExpiresAt.Equal(expires.Truncate(time.Microsecond)) {
		t.Fatalf("registered %+v", o)
	}
	again, created, err := b.store.Orders().RegisterOrder(ctx, r)
	if err != nil || created || again.OrderID != "ord-1" || again.Version != 1 {
		t.Fatalf("same body again: %+v created %v, %v; want the order, not created", again, created, err)
	}
	for name, other := range map[string]OrderRegistration{
		"amount":    {OrderID: "ord-1", Amount: 2001, Currency: "EUR", ExpiresAt: expires},
		"currency":  {OrderID: "ord-1", Amount: 2000, Currency: "USD", ExpiresAt: expires},
		"expiry":    {OrderID: "ord-1", Amount: 2000, Currency: "EUR", ExpiresAt: expires.Add(time.Second)},
		"no expiry": {OrderID: "ord-1", Amount: 2000, Currency: "EUR"},
	} {
		if _, _, err := b.store.Orders().RegisterOrder(ctx, other); !errors.Is(err, ErrOrderConflict) {
			t.Errorf("another %s: %v; want ErrOrderConflict", name, err)
		}
	}
	got, err := b.store.Orders().GetOrder(ctx, "ord-1")
	if err != nil || got.Amount != 2000 || got.Currency != "EUR" || len(got.Payments) != 0 {
		t.Fatalf("GetOrder after conflicts: %+v, %v", got, err)
	}
}

func TestRegisterOrderRefusesBadFieldsAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, r := range []OrderRegistration{
		{OrderID: "", Amount: 1, Currency: "EUR"},
		{OrderID: string(make([]byte, MaxOrderIDLength+1)), Amount: 1, Currency: "EUR"},
		{OrderID: "bad-amount", Amount: 0, Currency: "EUR"},
		{OrderID: "bad-currency", Amount: 1, Currency: "eur"},
	} {
		if _, _, err := b.store.Orders().RegisterOrder(ctx, r); !errors.Is(err, ErrOrderInvalid) {
			t.Errorf("%+v: %v; want ErrOrderInvalid", r, err)
		}
	}
	if got, err := b.store.Orders().ListOrders(ctx, OrderList{}); err != nil || len(got) != 0 {
		t.Fatalf("after refusals: %d orders, %v", len(got), err)
	}
	if _, err := b.store.Orders().GetOrder(ctx, "bad-amount"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetOrder of an unknown order: %v; want ErrNotFound", err)
	}
}

func TestListOrdersPagesNewestFirstAndFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, id := range []string{"o-1", "o-2", "o-3", "o-4", "o-5"} {
		if _, _, err := b.store.Orders().RegisterOrder(ctx, OrderRegistration{OrderID: id, Amount: 100, Currency: "EUR"}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Exec(t, b.admin, `UPDATE orders SET status = 'paid' WHERE order_id IN ('o-2', 'o-4')`)
	var seen []string
	l := OrderList{Limit: 2}
	for {
		page, err := b.store.Orders().ListOrders(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page {
			seen = append(seen, o.OrderID)
		}
		if len(page) < l.Limit {
			break
		}
		c := page[len(page)-1].Cursor()
		l.After = &c
	}
	if want := []string{"o-5", "o-4", "o-3", "o-2", "o-1"}; !slices.Equal(seen, want) {
		t.Fatalf("paged %v; want %v", seen, want)
	}
	paid, err := b.store.Orders().ListOrders(ctx, OrderList{Status: order.Paid})
	if err != nil || len(paid) != 2 || paid[0].OrderID != "o-4" || paid[1].OrderID != "o-2" {
		t.Fatalf("status paid: %+v, %v", paid, err)
	}
	if later, err := b.store.Orders().ListOrders(ctx, OrderList{Since: time.Now().Add(time.Hour)}); err != nil || len(later) != 0 {
		t.Fatalf("since an hour from now: %+v, %v", later, err)
	}
}

// TestStuckOrdersAreTheUnpaidOnesNoPaymentNamesInTheWindow: the janitor's
// list holds the registered orders awaiting (or expired) with no payment
// linked, registered in [since, before), newest first, and no other.
func TestStuckOrdersAreTheUnpaidOnesNoPaymentNamesInTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := time.Now()
	for i, id := range []string{"old", "stuck-1", "stuck-2", "expired", "linked", "paid", "unregistered", "young"} {
		if _, _, err := b.store.Orders().RegisterOrder(ctx, OrderRegistration{OrderID: id, Amount: 1000, Currency: "JPY"}); err != nil {
			t.Fatal(err)
		}
		// created an hour apart, "old" first, "young" a minute ago
		at := now.Add(time.Duration(i-7) * time.Hour)
		if id == "old" {
			at = now.Add(-30 * 24 * time.Hour)
		}
		if id == "young" {
			at = now.Add(-time.Minute)
		}
		if _, err := b.admin.Exec(ctx, `UPDATE orders SET created_at = $2 WHERE order_id = $1`, id, at); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`UPDATE orders SET status = 'expired' WHERE order_id = 'expired'`,
		`UPDATE orders SET status = 'paid', amount_paid = 1000 WHERE order_id = 'paid'`,
		`UPDATE orders SET status = 'unregistered', amount = NULL, currency = NULL WHERE order_id = 'unregistered'`,
		`INSERT INTO order_payments (source, transaction_id, order_id, payment_version) VALUES ('stripe', 'pi_1', 'linked', 1)`,
	} {
		if _, err := b.admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	before, since := now.Add(-10*time.Minute), now.Add(-7*24*time.Hour)
	got, err := b.store.Orders().StuckOrders(ctx, before, since, 10)
	if want := []string{"expired", "stuck-2", "stuck-1"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("StuckOrders = %v, %v; want %v", got, err, want)
	}
	if got, err := b.store.Orders().StuckOrders(ctx, before, since, 2); err != nil || len(got) != 2 || got[0] != "expired" {
		t.Errorf("limit 2: %v, %v", got, err)
	}
	if got, err := b.store.Orders().StuckOrders(ctx, since, before, 10); err != nil || got != nil {
		t.Errorf("an empty window: %v, %v", got, err)
	}
}
