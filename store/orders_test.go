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
