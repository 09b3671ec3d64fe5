package handler_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/store"
)

// stallFirst holds the first RecordPayment until released, like a replica
// paused (GC, SIGSTOP, a slow disk) in the middle of a request.
type stallFirst struct {
	handler.Recorder
	once    sync.Once
	entered chan struct{}
	resume  chan struct{}
}

func (s *stallFirst) RecordPayment(ctx context.Context, p store.Payment) (store.Payment, error) {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.entered)
		<-s.resume
	}
	return s.Recorder.RecordPayment(ctx, p)
}

// TestLockExpiryMidRequestRecordsOnce: the first request stalls inside the
// store past its lock's TTL; a second request takes the expired lock and
// records the payment. The first then answers duplicate or a retryable
// error, never a second row, and its release leaves the current owner's
// lock alone.
func TestLockExpiryMidRequestRecordsOnce(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	stall := &stallFirst{entered: make(chan struct{}), resume: make(chan struct{})}
	const ttl = 2 * time.Second
	r := startReplica(t, paylocktest.Options{
		RedisURL: "redis://" + mr.Addr() + "/0",
		// Plain releases: the test has a third party take the key after
		// the second request (a finished marker would keep it from that).
		Config: handler.Config{LockTTL: ttl, LockWait: -1, FinishedTTL: -1},
		Wrap:   func(s handler.Recorder) handler.Recorder { stall.Recorder = s; return stall },
	})
	tx := "tx-expiry"
	key := r.LockKey(tx)

	first := make(chan answer, 1)
	go func() { first <- pay(t, r.URL, tx, 700, "JPY") }()
	<-stall.entered
	mr.FastForward(ttl + time.Second) // the stalled request's lock expires

	if a := pay(t, r.URL, tx, 700, "JPY"); a.status != 200 || a.str("result") != "processed" {
		t.Fatalf("second request: %d %s", a.status, a.raw)
	}
	// Someone else owns the key when the stalled request wakes up.
	current, err := lock.New(r.Redis).Obtain(context.Background(), key, time.Minute)
	if err != nil {
		close(stall.resume) // let the stalled request end before failing
		<-first
		t.Fatal(err)
	}
	close(stall.resume)
	a := <-first
	switch {
	case a.status == http.StatusOK && a.str("result") == "duplicate":
	case a.status == http.StatusServiceUnavailable:
		wantRetryAfter(t, a)
	default:
		t.Fatalf("stalled request answered %d %s; want 200 duplicate or 503", a.status, a.raw)
	}
	if got, _ := mr.Get(key); got != current.Token() {
		t.Fatalf("lock key holds %q after the stale release, want the current owner's %q", got, current.Token())
	}
	if n := testkit.PaymentRows(t, r.Store.Pool(), tx); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
}

// TestLateDuplicatesSettleWithAReadNotAWrite: once a transaction is
// recorded, its lock key keeps a finished marker for a while; deliveries
// meeting it answer duplicate from a database read, with no write attempt.
func TestLateDuplicatesSettleWithAReadNotAWrite(t *testing.T) {
	t.Parallel()
	r, reg := instrumented(t, paylocktest.Options{})
	if a := pay(t, r.URL, "tx-late", 100, "JPY"); a.str("result") != "processed" {
		t.Fatalf("first: %d %s", a.status, a.raw)
	}
	for i := 0; i < 5; i++ {
		if a := pay(t, r.URL, "tx-late", 100, "JPY"); a.str("result") != "duplicate" {
			t.Fatalf("late duplicate: %d %s", a.status, a.raw)
		}
	}
	a := pay(t, r.URL, "tx-late", 999, "JPY")
	wantProblem(t, a, http.StatusUnprocessableEntity) // still a mismatch, from the database
	if got := testkit.Gathered(t, reg).Sum("paylock_db_write_attempts_total", `source="payments"`); got != 1 {
		t.Fatalf("write attempts = %v, want 1", got)
	}
	if got := testkit.Gathered(t, reg).Sum("paylock_lock_obtain_total", `outcome="finished"`); got != 6 {
		t.Fatalf("finished obtains = %v, want 6", got)
	}
	if n := testkit.PaymentRows(t, r.Store.Pool(), "tx-late"); n != 1 {
		t.Fatalf("rows = %d", n)
	}
}

// TestFinishedMarkerWithoutARowLetsTheDatabaseDecide: a marker the database
// does not back (restored from an older backup, say) never yields a 2xx by
// itself: the delivery is recorded on the constraint.
func TestFinishedMarkerWithoutARowLetsTheDatabaseDecide(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{})
	key := r.LockKey("tx-marker-only")
	if err := r.Redis.Set(context.Background(), key, "finished:someone", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if a := pay(t, r.URL, "tx-marker-only", 100, "JPY"); a.str("result") != "processed" {
		t.Fatalf("%d %s, want processed", a.status, a.raw)
	}
	if n := testkit.PaymentRows(t, r.Store.Pool(), "tx-marker-only"); n != 1 {
		t.Fatalf("rows = %d", n)
	}
}
