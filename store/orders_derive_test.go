package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/order"
)

// orderLinks links the default source's payments by their body's order_id.
var orderLinks = OrderDeriver{Links: map[string][]string{DefaultSource: {"order_id"}}, Destination: "default"}

// payFor records a payment of amount EUR naming orderID.
func payFor(t *testing.T, b *bundle, tx, orderID string, amount int64) {
	t.Helper()
	p := Payment{TransactionID: tx, Amount: amount, Currency: "EUR", EventID: "evt_" + tx,
		Payload: fmt.Appendf(nil, `{"transaction_id":%q,"amount":%d,"currency":"EUR","order_id":%q}`, tx, amount, orderID)}
	if _, err := b.store.Payments().RecordPayment(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func derive(t *testing.T, b *bundle) DeriveResult {
	t.Helper()
	res, err := b.store.Orders().DeriveOrders(context.Background(), orderLinks)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// orderMessages lists the order.* forward jobs of orderID, by type.
func orderMessages(t *testing.T, b *bundle, orderID string) map[string][]ForwardArgs {
	t.Helper()
	jobs, err := b.store.Outbox().ForwardJobs(context.Background(), ForwardJobFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]ForwardArgs{}
	for _, j := range jobs {
		if j.Args.Order != nil && j.Args.Order.OrderID == orderID {
			out[j.Args.Type] = append(out[j.Args.Type], j.Args)
		}
	}
	return out
}

func mustOrder(t *testing.T, b *bundle, id string) Order {
	t.Helper()
	o, err := b.store.Orders().GetOrder(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestTwoPaymentsForOneOrderAreDoublePaidOnceInEitherOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		order []string
		// apart: the deriver runs between the two payments.
		apart bool
	}{
		{"a then b, derived apart", []string{"pi_a", "pi_b"}, true},
		{"b then a, derived apart", []string{"pi_b", "pi_a"}, true},
		{"a and b, derived together", []string{"pi_a", "pi_b"}, false},
		{"b and a, derived together", []string{"pi_b", "pi_a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			if _, _, err := b.store.Orders().RegisterOrder(ctx, OrderRegistration{OrderID: "ord-2x", Amount: 1999, Currency: "EUR"}); err != nil {
				t.Fatal(err)
			}
			for _, tx := range tc.order {
				payFor(t, b, tx, "ord-2x", 1999)
				if tc.apart {
					derive(t, b)
				}
			}
			derive(t, b)
			derive(t, b) // a second run finds nothing to change
			o := mustOrder(t, b, "ord-2x")
			if o.Status != order.DoublePaid || o.AmountPaid != 3998 || len(o.Payments) != 2 {
				t.Fatalf("order %+v; want double_paid, 3998 paid, two payments", o)
			}
			msgs := orderMessages(t, b, "ord-2x")
			if n := len(msgs["order.double_paid"]); n != 1 {
				t.Fatalf("%d order.double_paid messages (%v); want 1", n, msgs)
			}
			m := msgs["order.double_paid"][0].Order
			if m.Version != o.Version || m.AmountPaid != 3998 || len(m.Payments) != 2 {
				t.Errorf("order.double_paid carries %+v; want the order at version %d", m, o.Version)
			}
			if tc.apart && len(msgs["order.paid"]) != 1 {
				t.Errorf("derived apart: %d order.paid messages; want 1 (the first payment paid it)", len(msgs["order.paid"]))
			}
			items, err := b.store.Review().ReviewItems(ctx, ReviewFilter{Kind: ReviewOrder})
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != 1 || items[0].Type != "double_paid" {
				t.Fatalf("review items %+v; want one double_paid", items)
			}
			named := items[0].Details["payments"].([]ForwardedOrderPayment)
			var txs []string
			for _, p := range named {
				txs = append(txs, p.TransactionID)
			}
			slices.Sort(txs)
			if !slices.Equal(txs, []string{"pi_a", "pi_b"}) {
				t.Errorf("the review item names %v; want both payments", txs)
			}
		})
	}
}

func TestAnOrderExpiresOnceAcrossConcurrentDeriversThenAPaymentPaysIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, _, err := b.store.Orders().RegisterOrder(ctx, OrderRegistration{OrderID: "ord-exp", Amount: 1999, Currency: "EUR",
		ExpiresAt: time.Now().Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	// Three deriver instances (three leaders, or a retried job), each
	// running back to back until past the expiry.
	until := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			for time.Now().Before(until) {
				if _, err := b.store.Orders().DeriveOrders(ctx, orderLinks); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if o := mustOrder(t, b, "ord-exp"); o.Status != order.Expired || o.Version != 2 {
		t.Fatalf("order %+v; want expired at version 2", o)
	}
	if msgs := orderMessages(t, b, "ord-exp"); len(msgs["order.expired"]) != 1 || len(msgs) != 1 {
		t.Fatalf("messages %v; want exactly one order.expired", msgs)
	}
	payFor(t, b, "pi_late", "ord-exp", 1999)
	derive(t, b)
	derive(t, b)
	if o := mustOrder(t, b, "ord-exp"); o.Status != order.Paid || o.Version != 3 {
		t.Fatalf("after a late payment: %+v; want paid at version 3", o)
	}
	msgs := orderMessages(t, b, "ord-exp")
	if len(msgs["order.paid"]) != 1 || len(msgs["order.expired"]) != 1 {
		t.Fatalf("messages %v; want one order.expired and one order.paid", msgs)
	}
}

func TestAPaymentNamingAnUnregisteredOrderWaitsForItsRegistration(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	payFor(t, b, "pi_early", "ord-late", 1999)
	if res := derive(t, b); res.Linked != 1 {
		t.Fatalf("derive: %+v; want the payment linked", res)
	}
	o := mustOrder(t, b, "ord-late")
	if o.Status != order.Unregistered || o.Registered || len(o.Payments) != 1 || o.Payments[0].TransactionID != "pi_early" {
		t.Fatalf("order %+v; want unregistered with its payment", o)
	}
	if msgs := orderMessages(t, b, "ord-late"); len(msgs) != 0 {
		t.Fatalf("an unregistered order forwarded %v", msgs)
	}
	_, created, err := b.store.Orders().RegisterOrder(ctx, OrderRegistration{OrderID: "ord-late", Amount: 1999, Currency: "EUR"})
	if err != nil || !created {
		t.Fatalf("registering it: created %v, %v; want created", created, err)
	}
	derive(t, b)
	if o := mustOrder(t, b, "ord-late"); o.Status != order.Paid || o.AmountPaid != 1999 {
		t.Fatalf("after registration: %+v; want paid", o)
	}
	if msgs := orderMessages(t, b, "ord-late"); len(msgs["order.paid"]) != 1 {
		t.Fatalf("messages %v; want one order.paid", msgs)
	}
}

func TestPaymentsOfOtherSourcesOrWithoutAnOrderAreNotLinked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := newPayment("pi_plain") // names no order
	if _, err := b.store.Payments().RecordPayment(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	other := Payment{Source: "acme", TransactionID: "pi_acme", Amount: 5, Currency: "EUR",
		Payload: []byte(`{"order_id":"ord-acme"}`)}
	if _, err := b.store.Payments().RecordPayment(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if res := derive(t, b); res.Linked != 0 || res.Derived != 0 {
		t.Fatalf("derive: %+v; want nothing linked (no order id; a source that links none)", res)
	}
}

func TestTheDeriverJobRunsPeriodicallyOnTheLeaderAndCountsOrders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, _, err := b.store.Orders().RegisterOrder(ctx, OrderRegistration{OrderID: "ord-job", Amount: 1999, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	counts := make(chan map[order.Status]int64, 100)
	w := &OrderDeriveWorker{Orders: b.store.Orders(), Deriver: orderLinks, Interval: 200 * time.Millisecond,
		Logger: testkit.Logger(), CountEvery: time.Millisecond, Observe: func(m map[order.Status]int64) {
			select {
			case counts <- m:
			default:
			}
		}}
	rcfg := &river.Config{Logger: testkit.Logger(), FetchPollInterval: 100 * time.Millisecond, FetchCooldown: 50 * time.Millisecond}
	if err := w.AddTo(rcfg); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.store.RunJobs(ctx, rcfg, testkit.Logger(), nil)
	}()
	defer func() { cancel(); <-done }()
	payFor(t, b, "pi_job", "ord-job", 1999)
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case m := <-counts:
			if m[order.Paid] == 1 && m[order.Awaiting] == 0 {
				if o := mustOrder(t, b, "ord-job"); o.Status != order.Paid {
					t.Fatalf("counted paid, the order is %+v", o)
				}
				return
			}
		case <-time.After(time.Until(deadline)):
			t.Fatalf("the deriver job never paid the order: %+v", mustOrder(t, b, "ord-job"))
		}
	}
}

// TestTheOverlapLinksAPaymentCommittedAfterTheWatermarkPassedIt: a payment
// whose transaction began before the previous run (its received_at is
// older than the watermark) but committed after it is still linked, by
// the overlap; without one it would be missed.
func TestTheOverlapLinksAPaymentCommittedAfterTheWatermarkPassedIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	payFor(t, b, "pi_slow", "ord-slow", 1999)
	testkit.Exec(t, b.admin, `UPDATE order_deriver SET watermark = now() + interval '5 seconds'`)
	narrow := orderLinks
	narrow.Overlap = time.Second
	if res, err := b.store.Orders().DeriveOrders(context.Background(), narrow); err != nil || res.Linked != 0 {
		t.Fatalf("an overlap shorter than the commit's delay: %+v, %v; want the payment missed", res, err)
	}
	testkit.Exec(t, b.admin, `UPDATE order_deriver SET watermark = now() + interval '5 seconds'`)
	if res := derive(t, b); res.Linked != 1 {
		t.Fatalf("the default overlap: %+v; want the payment linked", res)
	}
	if o := mustOrder(t, b, "ord-slow"); o.Status != order.Unregistered || len(o.Payments) != 1 {
		t.Fatalf("order %+v; want unregistered with the payment", o)
	}
}

func TestDerivePaymentOrderPaysTheOrderAtOnceAndOnceWithTheDeriver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const n = 20
	for i := range n {
		id := fmt.Sprintf("ord-sync-%d", i)
		if _, _, err := b.store.Orders().RegisterOrder(ctx, OrderRegistration{OrderID: id, Amount: 1999, Currency: "EUR"}); err != nil {
			t.Fatal(err)
		}
		payFor(t, b, fmt.Sprintf("pi_sync_%d", i), id, 1999)
	}
	// Each payment's order derived by its sync while deriver runs go on.
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			o, err := b.store.Orders().DerivePaymentOrder(ctx, orderLinks, DefaultSource, fmt.Sprintf("pi_sync_%d", i))
			if err == nil && (o.Status != order.Paid || o.AmountPaid != 1999) {
				err = fmt.Errorf("sync %d answered %+v; want paid", i, o)
			}
			errs <- err
		}()
		go func() {
			defer wg.Done()
			_, err := b.store.Orders().DeriveOrders(ctx, orderLinks)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		id := fmt.Sprintf("ord-sync-%d", i)
		if msgs := orderMessages(t, b, id); len(msgs["order.paid"]) != 1 || len(msgs) != 1 {
			t.Errorf("%s: messages %v; want one order.paid", id, msgs)
		}
	}
	// Derived again, nothing changes.
	before := mustOrder(t, b, "ord-sync-0")
	o, err := b.store.Orders().DerivePaymentOrder(ctx, orderLinks, DefaultSource, "pi_sync_0")
	if err != nil || o.Version != before.Version || o.Status != order.Paid {
		t.Fatalf("derived again: %+v, %v; want paid at version %d", o, err, before.Version)
	}
	for _, tc := range []struct{ source, tx string }{{DefaultSource, "pi_missing"}, {"other", "pi_sync_0"}} {
		if _, err := b.store.Orders().DerivePaymentOrder(ctx, orderLinks, tc.source, tc.tx); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s/%s: %v; want ErrNotFound", tc.source, tc.tx, err)
		}
	}
	payFor(t, b, "pi_no_order", "", 1999)
	if _, err := b.store.Orders().DerivePaymentOrder(ctx, orderLinks, DefaultSource, "pi_no_order"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a payment naming no order: %v; want ErrNotFound", err)
	}
}
