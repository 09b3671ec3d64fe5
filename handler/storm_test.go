package handler_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// deliverUntilAcknowledged posts a payment like a PSP: again and again
// until a 2xx, honouring nothing but a short pause.
func deliverUntilAcknowledged(t *testing.T, base, tx string, amount int64) answer {
	t.Helper()
	for i := 0; i < 200; i++ {
		a := pay(t, base, tx, amount, "JPY")
		if a.status == http.StatusOK {
			return a
		}
		if a.status != http.StatusConflict && a.status != http.StatusServiceUnavailable {
			t.Errorf("retry of %s answered %d: %s", tx, a.status, a.raw)
			return a
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("%s never acknowledged", tx)
	return answer{}
}

func TestDuplicateStormAcrossThreeReplicasRecordsOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		lockWait time.Duration
	}{
		{"waiting for the lock", 0}, // the default: wait up to 2s
		{"not waiting, 409s", -1},   // a busy delivery not yet recorded answers 409 at once
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// A slow insert keeps the lock busy long enough for the storm
			// to meet it.
			slow := func(s handler.Recorder) handler.Recorder { return slowStore{s, 100 * time.Millisecond} }
			duplicateStorm(t, paylocktest.Options{Config: handler.Config{LockWait: c.lockWait}, Wrap: slow})
		})
	}
}

// slowStore delays every RecordPayment, as a loaded database would.
type slowStore struct {
	handler.Recorder
	delay time.Duration
}

func (s slowStore) RecordPayment(ctx context.Context, p store.Payment) (store.Payment, error) {
	time.Sleep(s.delay)
	return s.Recorder.RecordPayment(ctx, p)
}

func duplicateStorm(t *testing.T, o paylocktest.Options) {
	reps := startReplicas(t, 3, o)
	const deliveries = 100
	tx := "tx-storm-1"

	answers := make([]answer, deliveries)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range deliveries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i] = pay(t, reps[i%3].URL, tx, 1000, "JPY")
		}()
	}
	close(start)
	wg.Wait()

	byStatus := map[string]int{}
	var conflicts []int
	for i, a := range answers {
		key := fmt.Sprint(a.status)
		if a.status == http.StatusOK {
			key += " " + a.str("result")
		}
		byStatus[key]++
		switch {
		case a.status == http.StatusOK && (a.str("result") == "processed" || a.str("result") == "duplicate"):
		case a.status == http.StatusConflict:
			wantRetryAfter(t, a)
			conflicts = append(conflicts, i)
		default:
			t.Errorf("delivery %d: %d %s", i, a.status, a.raw)
		}
	}
	t.Logf("answers by status: %v", byStatus)
	if byStatus["200 processed"] != 1 {
		t.Fatalf("processed answers = %d, want exactly 1 (%v)", byStatus["200 processed"], byStatus)
	}
	if n := testkit.PaymentRows(t, reps[0].Store.Pool(), tx); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
	for _, i := range conflicts {
		a := deliverUntilAcknowledged(t, reps[i%3].URL, tx, 1000)
		if a.str("result") != "duplicate" {
			t.Errorf("redelivery of a 409 answered %q, want duplicate", a.str("result"))
		}
	}
	if n := testkit.PaymentRows(t, reps[0].Store.Pool(), tx); n != 1 {
		t.Fatalf("rows after redeliveries = %d, want 1", n)
	}
}

func TestManyTransactionsManyDeliveriesEachRecordedOnce(t *testing.T) {
	t.Parallel()
	reps := startReplicas(t, 3, paylocktest.Options{})
	const txs, deliveries = 50, 20
	var mu sync.Mutex
	processed := map[string]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range txs * deliveries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tx := fmt.Sprintf("tx-many-%d", i%txs)
			a := deliverUntilAcknowledged(t, reps[i%3].URL, tx, int64(100+i%txs))
			mu.Lock()
			if a.str("result") == "processed" {
				processed[tx]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if n := testkit.PaymentRows(t, reps[0].Store.Pool(), ""); n != txs {
		t.Fatalf("rows = %d, want %d", n, txs)
	}
	for i := range txs {
		tx := fmt.Sprintf("tx-many-%d", i)
		if processed[tx] != 1 {
			t.Errorf("%s answered processed %d times, want 1", tx, processed[tx])
		}
		if n := testkit.PaymentRows(t, reps[0].Store.Pool(), tx); n != 1 {
			t.Errorf("%s: %d rows", tx, n)
		}
	}
}

// TestLockOffRecordsOnceOnTheConstraintAlone: PAYLOCK_LOCK=off, kept to
// measure what the lock buys, answers the same: one processed, the rest
// duplicates, one row; and it never touches Redis.
func TestLockOffRecordsOnceOnTheConstraintAlone(t *testing.T) {
	t.Parallel()
	reps := startReplicas(t, 3, paylocktest.Options{
		Config:   handler.Config{NoLock: true},
		RedisURL: "redis://" + closedAddr(t) + "/0",
	})
	const deliveries = 60
	answers := make(chan answer, deliveries)
	for i := range deliveries {
		go func() { answers <- pay(t, reps[i%3].URL, "tx-nolock", 100, "JPY") }()
	}
	byResult := map[string]int{}
	for range deliveries {
		a := <-answers
		if a.status != 200 {
			t.Errorf("%d %s", a.status, a.raw)
		}
		byResult[a.str("result")]++
	}
	if byResult["processed"] != 1 || byResult["duplicate"] != deliveries-1 {
		t.Fatalf("answers %v", byResult)
	}
	if n := testkit.PaymentRows(t, reps[0].Store.Pool(), "tx-nolock"); n != 1 {
		t.Fatalf("rows = %d", n)
	}
}
