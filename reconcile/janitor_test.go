package reconcile_test

import (
	"context"
	"log/slog"
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
