package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/lock"
)

func TestRetryStrategies(t *testing.T) {
	t.Parallel()
	exp := lock.ExponentialBackoff(10*time.Millisecond, 250*time.Millisecond)
	cases := []struct {
		name    string
		s       lock.RetryStrategy
		attempt int
		elapsed time.Duration
		lo, hi  time.Duration // NextBackoff within [lo, hi]
	}{
		{"NoRetryStops", lock.NoRetry(), 1, 0, 0, 0},
		{"LinearIsConstant", lock.LinearBackoff(30 * time.Millisecond), 7, time.Hour, 30 * time.Millisecond, 30 * time.Millisecond},
		{"ExponentialFirstBetweenMinAnd2Min", exp, 1, 0, 10 * time.Millisecond, 20 * time.Millisecond},
		{"ExponentialThird", exp, 3, 0, 40 * time.Millisecond, 80 * time.Millisecond},
		{"ExponentialCappedAtMax", exp, 10, 0, 125 * time.Millisecond, 250 * time.Millisecond},
		{"ExponentialHugeAttemptStaysCapped", exp, 1 << 30, 0, 125 * time.Millisecond, 250 * time.Millisecond},
		{"ExponentialMinEqualsMaxIsConstant", lock.ExponentialBackoff(time.Second, time.Second), 5, 0, time.Second, time.Second},
		{"ExponentialMinBelow1msIs1ms", lock.ExponentialBackoff(0, 0), 3, 0, time.Millisecond, time.Millisecond},
		{"MaxWaitPassesShortSleeps", lock.MaxWait(lock.LinearBackoff(30*time.Millisecond), time.Second), 2, 500 * time.Millisecond, 30 * time.Millisecond, 30 * time.Millisecond},
		{"MaxWaitCutsTheLastSleepToTheBudget", lock.MaxWait(lock.LinearBackoff(30*time.Millisecond), time.Second), 9, 990 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
		{"MaxWaitStopsOnceSpent", lock.MaxWait(lock.LinearBackoff(30*time.Millisecond), time.Second), 9, time.Second, 0, 0},
		{"MaxWaitKeepsTheInnerStop", lock.MaxWait(lock.NoRetry(), time.Second), 1, 0, 0, 0},
		{"LimitRetryAllowsN", lock.LimitRetry(lock.LinearBackoff(time.Millisecond), 2), 2, 0, time.Millisecond, time.Millisecond},
		{"LimitRetryStopsAfterN", lock.LimitRetry(lock.LinearBackoff(time.Millisecond), 2), 3, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for range 200 {
				if d := tc.s.NextBackoff(tc.attempt, tc.elapsed); d < tc.lo || d > tc.hi {
					t.Fatalf("NextBackoff(%d, %v) = %v, want within [%v, %v]", tc.attempt, tc.elapsed, d, tc.lo, tc.hi)
				}
			}
		})
	}
}

// Callers that find one key busy at the same moment must not come back at
// the same moment.
func TestExponentialBackoffIsJittered(t *testing.T) {
	t.Parallel()
	s := lock.ExponentialBackoff(10*time.Millisecond, time.Second)
	for attempt := 1; attempt <= 12; attempt++ {
		seen := map[time.Duration]bool{}
		for range 50 {
			seen[s.NextBackoff(attempt, 0)] = true
		}
		if len(seen) < 10 {
			t.Fatalf("attempt %d: %d distinct sleeps in 50 draws, want them spread", attempt, len(seen))
		}
	}
}

// TestObtainWithRetry runs against miniredis and real Redis; the holder
// releases in real time, so both backends wait the same way.
func TestObtainWithRetry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"WaitsUntilTheHolderReleases", func(t *testing.T, e *env) {
			var rec recorder
			refused := make(chan struct{})
			var once sync.Once
			l := lock.New(e.client, lock.WithObserver(func(ev lock.Event) {
				rec.observe(ev)
				if ev.Kind == lock.EventObtain && ev.Outcome == "busy" {
					once.Do(func() { close(refused) })
				}
			}))
			holder := mustObtain(t, l, e.key, time.Minute)
			// The holder releases once the waiter has been refused.
			go func() {
				<-refused
				holder.Release(context.Background())
			}()
			start := time.Now()
			lk, err := l.Obtain(ctxT(t), e.key, time.Minute, lock.WithRetry(lock.MaxWait(lock.LinearBackoff(20*time.Millisecond), 5*time.Second)))
			if err != nil {
				t.Fatalf("Obtain with retry: %v", err)
			}
			if lk.Attempts() < 2 || lk.Waited() <= 0 || lk.Waited() > time.Since(start) {
				t.Fatalf("Attempts = %d, Waited = %v (of %v); want several attempts and the sleeps counted", lk.Attempts(), lk.Waited(), time.Since(start))
			}
			if got := get(t, e.client, e.key); got != lk.Token() {
				t.Fatalf("key = %q, want our token", got)
			}
			obtains := rec.outcomes(lock.EventObtain)
			if n := len(obtains); n != 1+lk.Attempts() || obtains[n-1] != "obtain:acquired" || rec.count(lock.EventObtain, "busy") != lk.Attempts()-1 {
				t.Fatalf("events %q: want the holder's acquired, %d busy, then acquired", obtains, lk.Attempts()-1)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if last := rec.events[len(rec.events)-1]; last.Attempt != lk.Attempts() {
				t.Fatalf("last event's Attempt = %d, want %d", last.Attempt, lk.Attempts())
			}
		}},
		{"BusyAfterMaxWaitCarriesTheHoldersTTL", func(t *testing.T, e *env) {
			var rec recorder
			l := lock.New(e.client, lock.WithObserver(rec.observe))
			mustObtain(t, l, e.key, time.Minute)
			const budget = 200 * time.Millisecond
			start := time.Now()
			_, err := l.Obtain(ctxT(t), e.key, time.Minute, lock.WithRetry(lock.MaxWait(lock.LinearBackoff(30*time.Millisecond), budget)))
			took := time.Since(start)
			var busy *lock.BusyError
			if !errors.Is(err, lock.ErrNotObtained) || !errors.As(err, &busy) {
				t.Fatalf("err = %v, want a *BusyError matching ErrNotObtained", err)
			}
			if busy.TTL <= 50*time.Second || busy.TTL > time.Minute {
				t.Errorf("BusyError.TTL = %v, want the holder's minute", busy.TTL)
			}
			// About 8 attempts 30ms apart; fewer on a loaded machine,
			// where each attempt takes longer and the sleeps less of
			// the budget.
			if busy.Attempts < 2 || busy.Key != e.key || busy.Waited <= 0 || busy.Waited > took {
				t.Errorf("BusyError = %+v after %v, want several attempts and their sleeps", *busy, took)
			}
			if took < budget || took > budget+time.Second {
				t.Errorf("Obtain took %v, want the budget (%v): the last attempt at its end", took, budget)
			}
			if n := rec.count(lock.EventObtain, "busy"); n != busy.Attempts {
				t.Errorf("%d busy events, want one per attempt (%d)", n, busy.Attempts)
			}
		}},
		{"BusyWithoutRetryCarriesTheHoldersTTL", func(t *testing.T, e *env) {
			l := lock.New(e.client)
			mustObtain(t, l, e.key, time.Minute)
			_, err := l.Obtain(ctxT(t), e.key, time.Minute)
			var busy *lock.BusyError
			if !errors.As(err, &busy) || busy.Attempts != 1 || busy.Waited != 0 || busy.TTL <= 50*time.Second {
				t.Fatalf("err = %v (%+v), want one attempt that saw the holder's minute", err, busy)
			}
		}},
		{"FinishedStopsRetryingAtOnce", func(t *testing.T, e *env) {
			var rec recorder
			l := lock.New(e.client, lock.WithObserver(rec.observe))
			lk := mustObtain(t, l, e.key, time.Minute)
			if err := lk.Finish(ctxT(t), time.Minute); err != nil {
				t.Fatal(err)
			}
			_, err := l.Obtain(ctxT(t), e.key, time.Minute, lock.WithRetry(lock.LinearBackoff(time.Millisecond)))
			if !errors.Is(err, lock.ErrFinished) || errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("err = %v, want ErrFinished only", err)
			}
			if got := rec.outcomes(lock.EventObtain); !equal(got, []string{"obtain:acquired", "obtain:finished"}) {
				t.Fatalf("events %q, want one finished attempt", got)
			}
		}},
		{"ContextDeadlineEndsTheWaitAsBusy", func(t *testing.T, e *env) {
			l := lock.New(e.client)
			mustObtain(t, l, e.key, time.Minute)
			// Attempts at 0 and 300ms; the next, at 600ms, could not start
			// before the deadline, so Obtain stops at 300ms, far from a
			// command cut short by the deadline.
			const deadline = 500 * time.Millisecond
			ctx, cancel := context.WithTimeout(ctxT(t), deadline)
			defer cancel()
			start := time.Now()
			_, err := l.Obtain(ctx, e.key, time.Minute, lock.WithRetry(lock.LinearBackoff(300*time.Millisecond)))
			if !errors.Is(err, lock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want ErrNotObtained: no attempt could start before the deadline", err)
			}
			if took := time.Since(start); took > deadline {
				t.Fatalf("Obtain returned %v after start, past the context deadline", took)
			}
		}},
		{"CancelledWhileWaitingIsTheContextsError", func(t *testing.T, e *env) {
			l := lock.New(e.client)
			mustObtain(t, l, e.key, time.Minute)
			ctx, cancel := context.WithCancel(ctxT(t))
			time.AfterFunc(50*time.Millisecond, cancel)
			_, err := l.Obtain(ctx, e.key, time.Minute, lock.WithRetry(lock.LinearBackoff(time.Second)))
			if !errors.Is(err, context.Canceled) || errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("err = %v, want context.Canceled and not ErrNotObtained", err)
			}
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, b.setup(t))
				})
			}
		})
	}
}

func TestObtainStopsRetryingOnARedisError(t *testing.T) {
	t.Parallel()
	f := &faults{}
	e := setupMiniredis(t, f)
	var rec recorder
	l := lock.New(e.client, lock.WithObserver(rec.observe))
	mustObtain(t, l, e.key, time.Minute)
	f.fail.Store(true)
	_, err := l.Obtain(ctxT(t), e.key, time.Minute, lock.WithRetry(lock.LinearBackoff(time.Millisecond)))
	if !errors.Is(err, errInjected) || errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("err = %v, want the injected error and not ErrNotObtained", err)
	}
	if got := rec.outcomes(lock.EventObtain); !equal(got, []string{"obtain:acquired", "obtain:error"}) {
		t.Fatalf("events %q, want one failed attempt, not retried", got)
	}
}
