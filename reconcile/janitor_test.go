package reconcile_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/store"
)

// unsettled lists n payments of source "stripe" and remembers what it was
// asked.
type unsettled struct {
	n      int
	limit  int
	before time.Time
}

func (u *unsettled) UnsettledPayments(_ context.Context, sources []string, before time.Time, limit int) ([]store.PaymentRef, error) {
	u.limit, u.before = limit, before
	var out []store.PaymentRef
	for i := range min(u.n, limit) {
		out = append(out, store.PaymentRef{Source: sources[0], TransactionID: "pi_" + string(rune('a'+i))})
	}
	return out, nil
}

// timedFetcher records when each payment was fetched; every one is
// succeeded.
type timedFetcher struct {
	mu sync.Mutex
	at []time.Time
}

func (f *timedFetcher) Fetch(_ context.Context, ref string) ([]byte, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = append(f.at, time.Now())
	return []byte(`{"id":"` + ref + `"}`), "succeeded", nil
}

type recorder struct{}

func (recorder) Sync(context.Context, string, []byte, string) (handler.IngestResult, error) {
	return handler.IngestResult{Result: "processed"}, nil
}

func TestJanitorSyncsAtMostRateAPaymentASecondAndAsManyAsFitInItsInterval(t *testing.T) {
	t.Parallel()
	f := &timedFetcher{}
	u := &unsettled{n: 5}
	s := &reconcile.Sync{Handler: recorder{}, Sources: []string{"stripe", "adyen"}, Fetchers: map[string]provider.Fetcher{"stripe": f}}
	j := &reconcile.Janitor{Sync: s, Payments: u, PendingAfter: time.Hour, Rate: 10, Logger: slog.New(slog.DiscardHandler)}
	start := time.Now()
	if err := j.Work(t.Context(), &river.Job[reconcile.JanitorArgs]{}); err != nil {
		t.Fatal(err)
	}
	if len(f.at) != 5 {
		t.Fatalf("%d payments synced, want 5", len(f.at))
	}
	for i := 1; i < len(f.at); i++ {
		if gap := f.at[i].Sub(f.at[i-1]); gap < 95*time.Millisecond {
			t.Errorf("sync %d came %v after the previous one; at 10 a second, want at least 100ms", i, gap)
		}
	}
	if u.before.Before(start.Add(-time.Hour)) || u.before.After(time.Now().Add(-time.Hour)) {
		t.Errorf("listed payments unchanged since %v, want PendingAfter (1h) before the run", u.before)
	}
	if u.limit != 500 {
		t.Errorf("a run lists at most %d, want 500 (10 a second for 50s of its minute)", u.limit)
	}
	j.Rate = 0.05 // one every 20s: two fit in a run (cut short: only the listing matters)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_ = j.Work(ctx, &river.Job[reconcile.JanitorArgs]{})
	if u.limit != 2 {
		t.Errorf("at 0.05 a second a run lists at most %d, want 2", u.limit)
	}
}

// stuckOrders lists its orders and remembers what it was asked.
type stuckOrders struct {
	ids           []string
	before, since time.Time
	limit         int
}

func (s *stuckOrders) StuckOrders(_ context.Context, before, since time.Time, limit int) ([]string, error) {
	s.before, s.since, s.limit = before, since, limit
	return s.ids[:min(len(s.ids), limit)], nil
}

// findingFetcher finds the payments of each order in byOrder and records
// each search and each fetch, one call log.
type findingFetcher struct {
	timedFetcher
	byOrder  map[string][]string
	pointers [][]string
	calls    []string
}

func (f *findingFetcher) Fetch(ctx context.Context, ref string) ([]byte, string, error) {
	f.calls = append(f.calls, "fetch "+ref)
	return f.timedFetcher.Fetch(ctx, ref)
}

func (f *findingFetcher) FindByOrder(_ context.Context, pointer []string, orderID string) ([]string, error) {
	f.mu.Lock()
	f.at = append(f.at, time.Now())
	f.mu.Unlock()
	f.calls = append(f.calls, "find "+orderID)
	f.pointers = append(f.pointers, pointer)
	return f.byOrder[orderID], nil
}

// TestJanitorLooksForTheStuckOrdersPaymentsAfterThePaymentsWithinItsPace:
// after the unsettled payments, each stuck order is looked for at the
// sources that can find it, and each payment found is synced; searches
// and syncs share the run's budget and its pace; without Orders (orders
// off) nothing is looked for.
func TestJanitorLooksForTheStuckOrdersPaymentsAfterThePaymentsWithinItsPace(t *testing.T) {
	t.Parallel()
	f := &findingFetcher{byOrder: map[string][]string{"ord-1": {"pi_x"}, "ord-3": {"pi_y", "pi_z"}}}
	u := &unsettled{n: 1}
	orders := &stuckOrders{ids: []string{"ord-1", "ord-2", "ord-3"}}
	pointer := []string{"data", "object", "metadata", "order_id"}
	var results []string
	s := &reconcile.Sync{Handler: recorder{}, Sources: []string{"stripe", "adyen"},
		Fetchers: map[string]provider.Fetcher{"stripe": f}}
	j := &reconcile.Janitor{Sync: s, Payments: u, PendingAfter: time.Hour, Rate: 20, Logger: slog.New(slog.DiscardHandler),
		Orders: orders, OrderPointers: map[string][]string{"stripe": pointer, "adyen": {"merchantReference"}},
		Observe: func(_, result string) { results = append(results, result) }}
	start := time.Now()
	if err := j.Work(t.Context(), &river.Job[reconcile.JanitorArgs]{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"fetch pi_a", "find ord-1", "fetch pi_x", "find ord-2", "find ord-3", "fetch pi_y", "fetch pi_z"}
	if !slices.Equal(f.calls, want) {
		t.Fatalf("calls %v, want %v", f.calls, want)
	}
	if len(results) != 4 {
		t.Errorf("%d syncs observed, want 4 (one payment, three found)", len(results))
	}
	for i := 1; i < len(f.at); i++ {
		if gap := f.at[i].Sub(f.at[i-1]); gap < 45*time.Millisecond {
			t.Errorf("call %d came %v after the previous one; at 20 a second, want at least 50ms", i, gap)
		}
	}
	if orders.limit != 999 || !orders.since.Equal(orders.before.Add(-reconcile.OrderSearchWindow)) ||
		orders.before.Before(start.Add(-time.Hour)) || orders.before.After(time.Now().Add(-time.Hour)) {
		t.Errorf("orders listed in [%v, %v) limit %d; want the window before PendingAfter and the budget left (999)",
			orders.since, orders.before, orders.limit)
	}
	for _, p := range f.pointers {
		if !slices.Equal(p, pointer) {
			t.Errorf("searched by %v, want the source's pointer %v", p, pointer)
		}
	}

	// Orders off: the payments only.
	f.calls, orders.limit = nil, 0
	j.Orders = nil
	if err := j.Work(t.Context(), &river.Job[reconcile.JanitorArgs]{}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.calls, []string{"fetch pi_a"}) || orders.limit != 0 {
		t.Errorf("without Orders: calls %v, orders listed (limit %d)", f.calls, orders.limit)
	}
}
