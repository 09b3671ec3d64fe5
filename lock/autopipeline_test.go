package lock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
)

// TestLockOverAnAutoPipelinerKeepsItsGuarantees runs a Locker over go-redis's
// blocking auto-pipeliner, alone and behind an Adaptive client as serve
// builds it: the concurrent obtains of one key share pipelined writes and
// still have exactly one winner, each winner of its own key finishes, and a
// fenced obtain (the script path) mints increasing fences.
func TestLockOverAnAutoPipelinerKeepsItsGuarantees(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		for _, adaptive := range []bool{false, true} {
			name := b.name + "/autopipeline"
			if adaptive {
				name = b.name + "/adaptive"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := b.setup(t)
				ap, err := e.client.AutoPipeline()
				if err != nil {
					t.Fatal(err)
				}
				var c lock.Client = ap
				if adaptive {
					c = lock.NewAdaptive(e.client, ap)
				}
				guarantees(t, e, lock.New(c))
			})
		}
	}
}

func guarantees(t *testing.T, e *env, l *lock.Locker) {
	{
		{
			var won, busy atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 64 {
				wg.Go(func() {
					<-start
					lk, err := l.Obtain(ctxT(t), e.key, time.Minute)
					switch {
					case err == nil:
						won.Add(1)
					case errors.Is(err, lock.ErrNotObtained), errors.Is(err, lock.ErrFinished):
						busy.Add(1)
						return
					default:
						t.Error(err)
						return
					}
					if err := lk.Finish(ctxT(t), time.Minute); err != nil {
						t.Errorf("Finish: %v", err)
					}
				})
			}
			close(start)
			wg.Wait()
			if won.Load() != 1 || busy.Load() != 63 {
				t.Fatalf("won %d, busy %d; want 1 and 63", won.Load(), busy.Load())
			}
			fkey := e.key + ":fenced"
			t.Cleanup(func() { e.client.Del(context.Background(), fkey, counterKey(fkey)) })
			first := mustObtainFenced(t, l, fkey, time.Minute)
			if err := first.Release(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			second := mustObtainFenced(t, l, fkey, time.Minute)
			if second.Fence() <= first.Fence() {
				t.Fatalf("fences %d then %d, want increasing", first.Fence(), second.Fence())
			}
			if err := second.Release(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

var _ lock.Client = (*redis.AutoPipeliner)(nil)

// BenchmarkLoneObtainRelease is one delivery at a time (a lone sender):
// obtain and release back to back from one goroutine, over the plain
// client, over the auto-pipeliner, which then has nothing to batch, and over
// an Adaptive client of both.
func BenchmarkLoneObtainRelease(b *testing.B) {
	c := benchClient(b)
	ap, err := c.AutoPipeline()
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name   string
		client lock.Client
	}{{"plain", c}, {"autopipeline", ap}, {"adaptive", lock.NewAdaptive(c, ap)}} {
		b.Run(bc.name, func(b *testing.B) {
			l := lock.New(bc.client)
			prefix := testkit.Key(b, "")
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				lk, err := l.Obtain(ctx, prefix+strconv.Itoa(i), time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if err := lk.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
