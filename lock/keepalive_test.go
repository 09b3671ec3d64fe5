package lock_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
)

func TestKeepAliveHoldsTheLockThroughWorkLongerThanItsTTL(t *testing.T) {
	t.Parallel()
	e := setupRedis(t) // real expiry needs a real clock
	var rec recorder
	l := lock.New(e.client, lock.WithObserver(rec.observe))
	const ttl = 300 * time.Millisecond
	lk := mustObtain(t, l, e.key, ttl)

	lease, stop := lk.KeepAlive(ctxT(t))
	defer stop()
	select {
	case <-lease.Done():
		t.Fatalf("lease lost during the work: %v", context.Cause(lease))
	case <-time.After(3*ttl + ttl/2):
	}
	if got := get(t, e.client, e.key); got != lk.Token() {
		t.Fatalf("key = %q after 3.5 TTLs of work, want our token", got)
	}
	if n := rec.count(lock.EventRefresh, "ok"); n < 3 {
		t.Fatalf("%d refreshes during 3.5 TTLs, want at least 3", n)
	}
	stop()
	if err := lk.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func TestKeepAliveCancelsWithinOneTTLWhenTheKeyIsDeleted(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := b.setup(t)
			var rec recorder
			l := lock.New(e.client, lock.WithObserver(rec.observe))
			const ttl = 300 * time.Millisecond
			lk := mustObtain(t, l, e.key, ttl)
			lease, stop := lk.KeepAlive(ctxT(t))
			defer stop()

			// The key goes once the watchdog has refreshed it: mid-lease.
			testkit.WaitFor(t, 2*time.Second, "the first refresh", func() bool { return rec.count(lock.EventRefresh, "ok") >= 1 })
			if err := e.client.Del(ctxT(t), e.key).Err(); err != nil {
				t.Fatal(err)
			}
			deleted := time.Now()
			select {
			case <-lease.Done():
			case <-time.After(2 * time.Second):
				t.Fatal("lease context not cancelled 2s after the key was deleted")
			}
			if took := time.Since(deleted); took > ttl {
				t.Errorf("lease cancelled %v after the key was deleted, want within one TTL (%v)", took, ttl)
			}
			cause := context.Cause(lease)
			if !errors.Is(cause, lock.ErrLeaseLost) || !errors.Is(cause, lock.ErrNotHeld) {
				t.Errorf("cause = %v, want ErrLeaseLost and ErrNotHeld", cause)
			}
			stop()
			if n := rec.count(lock.EventLeaseLost, "lost"); n != 1 {
				t.Errorf("%d lease lost events, want 1", n)
			}
		})
	}
}

var errInjected = errors.New("injected: connection refused")

// faults makes every command fail (or hang until its context ends) once set.
type faults struct {
	fail atomic.Bool
	hang bool
}

func (f *faults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *faults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !f.fail.Load() {
			return next(ctx, cmd)
		}
		if f.hang {
			<-ctx.Done()
			return ctx.Err()
		}
		return errInjected
	}
}

func (f *faults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestKeepAliveCancelsAtTheDeadlineWhenRedisStopsAnswering(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		for _, hang := range []bool{false, true} {
			name := b.name + "/errors"
			if hang {
				name = b.name + "/hangs"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f := &faults{hang: hang}
				e := b.setup(t, f)
				t.Cleanup(func() { f.fail.Store(false) }) // before the key is cleaned up
				var rec recorder
				l := lock.New(e.client, lock.WithObserver(rec.observe))
				const ttl = 300 * time.Millisecond
				lk := mustObtain(t, l, e.key, ttl)
				f.fail.Store(true)
				deadline := lk.Deadline()

				lease, stop := lk.KeepAlive(ctxT(t))
				defer stop()
				select {
				case <-lease.Done():
				case <-time.After(2 * time.Second):
					t.Fatal("lease context not cancelled 2s after Redis stopped answering")
				}
				at := time.Now()
				if at.Before(deadline) {
					t.Errorf("lease cancelled %v before the deadline", deadline.Sub(at))
				}
				if late := at.Sub(deadline); late > 250*time.Millisecond { // slack for a loaded machine
					t.Errorf("lease cancelled %v after the deadline, want at it", late)
				}
				cause := context.Cause(lease)
				if !errors.Is(cause, lock.ErrLeaseLost) || errors.Is(cause, lock.ErrNotHeld) {
					t.Errorf("cause = %v, want ErrLeaseLost and not ErrNotHeld", cause)
				}
				if !hang && !errors.Is(cause, errInjected) {
					t.Errorf("cause = %v, want it to wrap the last refresh error", cause)
				}
				stop()
				if n := rec.count(lock.EventRefresh, "error"); n < 1 {
					t.Errorf("%d failed refreshes, want at least 1", n)
				}
				if n := rec.count(lock.EventLeaseLost, "lost"); n != 1 {
					t.Errorf("%d lease lost events, want 1", n)
				}
			})
		}
	}
}

func TestReleaseEndsKeepAliveWithoutReportingALoss(t *testing.T) {
	t.Parallel()
	e := setupMiniredis(t)
	var rec recorder
	l := lock.New(e.client, lock.WithObserver(rec.observe))
	lk := mustObtain(t, l, e.key, 60*time.Millisecond)
	lease, stop := lk.KeepAlive(ctxT(t))
	defer stop()

	if err := lk.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease context not cancelled after Release")
	}
	if cause := context.Cause(lease); !errors.Is(cause, context.Canceled) || errors.Is(cause, lock.ErrLeaseLost) {
		t.Fatalf("cause = %v, want context.Canceled", cause)
	}
	stop()
	if n := rec.count(lock.EventLeaseLost, "lost"); n != 0 {
		t.Fatalf("%d lease lost events after Release, want 0", n)
	}
}

func TestKeepAliveStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"CancelFunc", "parent"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := setupMiniredis(t)
			var rec recorder
			l := lock.New(e.client, lock.WithObserver(rec.observe))
			// Long enough that a loaded machine (-race, parallel packages)
			// does not miss the lease deadline by itself.
			const ttl = 300 * time.Millisecond
			lk := mustObtain(t, l, e.key, ttl)
			parent, cancel := context.WithCancel(ctxT(t))
			lease, stop := lk.KeepAlive(parent)
			testkit.WaitFor(t, 2*time.Second, "a few refreshes", func() bool { return rec.count(lock.EventRefresh, "ok") >= 2 })

			if how == "parent" {
				cancel()
				<-lease.Done()
			}
			stop() // returns once the watchdog has exited
			stop() // and may be called again
			if !errors.Is(lease.Err(), context.Canceled) {
				t.Fatalf("lease.Err() = %v, want context.Canceled", lease.Err())
			}
			refreshes := rec.count(lock.EventRefresh, "ok")
			time.Sleep(2 * ttl)
			if n := rec.count(lock.EventRefresh, "ok"); n != refreshes {
				t.Fatalf("%d refreshes after stop", n-refreshes)
			}
			if n := rec.count(lock.EventLeaseLost, "lost"); n != 0 {
				t.Fatalf("%d lease lost events, want 0", n)
			}
			cancel()
		})
	}
}

// TestKeepAliveStartsNoGoroutineBeforeTheFirstRefresh: the common request
// ends well within TTL/3, and its watchdog must cost no goroutine. Not
// parallel: it counts the process's goroutines.
func TestKeepAliveStartsNoGoroutineBeforeTheFirstRefresh(t *testing.T) {
	e := setupMiniredis(t)
	var rec recorder
	l := lock.New(e.client, lock.WithObserver(rec.observe))
	lk := mustObtain(t, l, e.key, time.Minute)
	before := runtime.NumGoroutine()
	var stops []context.CancelFunc
	for range 100 {
		lease, stop := lk.KeepAlive(ctxT(t))
		if lease.Err() != nil {
			t.Fatalf("lease ended at once: %v", context.Cause(lease))
		}
		stops = append(stops, stop)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after 100 KeepAlives, %d before: want none started", n, before)
	}
	for _, stop := range stops {
		stop()
	}
	if got := rec.outcomes(0); !equal(got, []string{"obtain:acquired"}) {
		t.Fatalf("events %q: want no refresh before TTL/3", got)
	}
}

// A process paused past its lease deadline before the first refresh finds
// its lease lost when it resumes, without a refresh confirming it.
func TestKeepAliveAfterAPausePastTheDeadlineLosesTheLease(t *testing.T) {
	t.Parallel()
	e := setupMiniredis(t)
	var rec recorder
	clk := testkit.NewClock(time.Now())
	l := lock.New(e.client, lock.WithObserver(rec.observe), lock.WithClock(clk.Now))
	lk := mustObtain(t, l, e.key, 300*time.Millisecond)
	lease, stop := lk.KeepAlive(ctxT(t))
	defer stop()
	clk.Add(time.Second) // paused for a second; the first refresh is due on resume
	select {
	case <-lease.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease not cancelled after a pause past its deadline")
	}
	if cause := context.Cause(lease); !errors.Is(cause, lock.ErrLeaseLost) || errors.Is(cause, lock.ErrNotHeld) {
		t.Fatalf("cause = %v, want ErrLeaseLost (deadline passed)", cause)
	}
	if got := rec.outcomes(0); !equal(got, []string{"obtain:acquired", "lease_lost:lost"}) {
		t.Fatalf("events %q: want the loss, and no refresh first", got)
	}
}

func BenchmarkKeepAliveShortWork(b *testing.B) {
	mr := miniredis.RunT(b)
	lk, err := lock.New(newClient(b, &redis.Options{Addr: mr.Addr()})).Obtain(context.Background(), "k", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, stop := lk.KeepAlive(ctx)
		stop()
	}
}
