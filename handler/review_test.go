package handler_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

func TestMismatchStormAcrossThreeReplicasKeepsOneReviewItemPerDistinctDelivery(t *testing.T) {
	t.Parallel()
	reps := startReplicas(t, 3, paylocktest.Options{})
	const tx = "tx-mismatch-storm"
	if a := pay(t, reps[0].URL, tx, 1000, "JPY"); a.status != http.StatusOK {
		t.Fatalf("first delivery: %d %s", a.status, a.raw)
	}
	// Two wrong deliveries (2000 and 3000), each retried 15 times, over
	// three replicas at once.
	const deliveries = 30
	answers := make([]answer, deliveries)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range deliveries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i] = pay(t, reps[i%3].URL, tx, int64(2000+1000*(i%2)), "JPY")
		}()
	}
	close(start)
	wg.Wait()
	for i, a := range answers {
		if a.status != http.StatusUnprocessableEntity || a.str("type") == "" {
			t.Errorf("delivery %d: %d %s, want 422 mismatch", i, a.status, a.raw)
		}
	}
	p, err := reps[0].Store.Payments().Payment(context.Background(), "", tx)
	if err != nil || p.Amount != 1000 || p.Currency != "JPY" || testkit.PaymentRows(t, reps[0].Store.Pool(), tx) != 1 {
		t.Fatalf("stored payment %+v, %v; want the original 1000 JPY, once", p, err)
	}
	items, err := reps[0].Store.Review().ReviewItems(context.Background(), store.ReviewFilter{Kind: store.ReviewMismatch})
	if err != nil || len(items) != 2 {
		t.Fatalf("review items %+v, %v; want one per distinct delivery (2)", items, err)
	}
	amounts := map[int64]bool{}
	for _, it := range items {
		d := it.Details
		amounts[d["amount"].(int64)] = true
		if d["stored_amount"] != int64(1000) || d["request_id"] == "" || !strings.Contains(d["body"].(string), tx) {
			t.Errorf("item %+v", it)
		}
	}
	if !amounts[2000] || !amounts[3000] {
		t.Errorf("amounts %v, want 2000 and 3000", amounts)
	}
}

// failingMismatches cannot keep a mismatch.
type failingMismatches struct{ handler.Recorder }

func (failingMismatches) RecordMismatch(context.Context, store.Mismatch) error {
	return store.ErrUnavailable
}

func TestAMismatchIsStill422WhenItCannotBeKeptForReview(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{Wrap: func(s handler.Recorder) handler.Recorder { return failingMismatches{s} }})
	if a := pay(t, r.URL, "tx-mm-fail", 1000, "JPY"); a.status != http.StatusOK {
		t.Fatalf("first: %d %s", a.status, a.raw)
	}
	wantProblem(t, pay(t, r.URL, "tx-mm-fail", 1001, "JPY"), http.StatusUnprocessableEntity)
	if items, err := r.Store.Review().ReviewItems(context.Background(), store.ReviewFilter{}); err != nil || len(items) != 0 {
		t.Fatalf("items %+v, %v; want none", items, err)
	}
}
