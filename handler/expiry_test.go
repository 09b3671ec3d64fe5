package handler_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/store"
)

// stallFirst holds the first RecordPayment until released, like a replica
// paused (GC, SIGSTOP, a slow disk) in the middle of a request.
type stallFirst struct {
	handler.Store
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
	return s.Store.RecordPayment(ctx, p)
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
	r := startReplica(t, options{
		redisURL: "redis://" + mr.Addr() + "/0",
		cfg:      handler.Config{LockTTL: ttl, LockWait: -1},
		wrap:     func(s handler.Store) handler.Store { stall.Store = s; return stall },
	})
	tx := "tx-expiry"
	key := lockKey(r, tx)

	first := make(chan answer, 1)
	go func() { first <- pay(t, r.url, tx, 700, "JPY") }()
	<-stall.entered
	mr.FastForward(ttl + time.Second) // the stalled request's lock expires

	if a := pay(t, r.url, tx, 700, "JPY"); a.status != 200 || a.str("result") != "processed" {
		t.Fatalf("second request: %d %s", a.status, a.raw)
	}
	// Someone else owns the key when the stalled request wakes up.
	current, err := lock.New(r.rdb).Obtain(context.Background(), key, time.Minute)
	if err != nil {
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
	if n := rows(t, r.store, tx); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
}
