package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
)

// Two replicas' pacers share a name's places: the third caller of two
// places waits until one is given back, or until a dead holder's lease
// runs out.
func TestPacerSharesPlacesAmongProcesses(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	prefix := testkit.Key(t, "pace") + ":"
	a := lock.NewPacer(testkit.Redis(t), prefix)
	b := lock.NewPacer(testkit.Redis(t), prefix)

	r1, wait, err := a.Acquire(ctx, "crm", 2, 0, time.Minute)
	if err != nil || r1 == nil || wait != 0 {
		t.Fatalf("first place: release %v, wait %v, %v", r1 != nil, wait, err)
	}
	r2, _, err := b.Acquire(ctx, "crm", 2, 0, time.Minute)
	if err != nil || r2 == nil {
		t.Fatalf("second place, another process: %v", err)
	}
	r3, wait, err := a.Acquire(ctx, "crm", 2, 0, time.Minute)
	if err != nil || r3 != nil || wait <= 0 {
		t.Fatalf("third caller of 2 places: release %v, wait %v, %v; want a wait", r3 != nil, wait, err)
	}
	if r, _, err := a.Acquire(ctx, "ledger", 2, 0, time.Minute); err != nil || r == nil {
		t.Fatalf("another name's places are its own: %v", err)
	}
	r2()
	r3, _, err = a.Acquire(ctx, "crm", 2, 0, time.Minute)
	if err != nil || r3 == nil {
		t.Fatalf("a place given back is taken again: %v", err)
	}

	// A holder that dies gives its place back when its lease runs out.
	prefix2 := testkit.Key(t, "pace-lease") + ":"
	c := lock.NewPacer(testkit.Redis(t), prefix2)
	if r, _, err := c.Acquire(ctx, "crm", 1, 0, 200*time.Millisecond); err != nil || r == nil {
		t.Fatalf("the place a holder dies with: %v", err)
	}
	if r, _, err := c.Acquire(ctx, "crm", 1, 0, time.Minute); err != nil || r != nil {
		t.Fatalf("its place while leased: taken %v (%v), want a wait", r != nil, err)
	}
	testkit.WaitFor(t, 5*time.Second, "the dead holder's lease to run out", func() bool {
		r, _, err := c.Acquire(ctx, "crm", 1, 0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return r != nil
	})
}

// A rate of 5 per second admits one start, then asks the next to wait
// about a fifth of a second, whichever process asks.
func TestPacerSharesARateAmongProcesses(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	prefix := testkit.Key(t, "pace") + ":"
	a := lock.NewPacer(testkit.Redis(t), prefix)
	b := lock.NewPacer(testkit.Redis(t), prefix)
	if r, _, err := a.Acquire(ctx, "crm", 0, 5, time.Minute); err != nil || r == nil {
		t.Fatalf("first start: %v", err)
	}
	r, wait, err := b.Acquire(ctx, "crm", 0, 5, time.Minute)
	if err != nil || r != nil || wait <= 0 || wait > 200*time.Millisecond {
		t.Fatalf("second start at once, another process: admitted %v, wait %v, %v; want a wait of at most 200ms", r != nil, wait, err)
	}
	time.Sleep(wait)
	if r, _, err := b.Acquire(ctx, "crm", 0, 5, time.Minute); err != nil || r == nil {
		t.Fatalf("after the wait it said: admitted %v, %v", r != nil, err)
	}

	// A start refused by the rate holds no place.
	if r, _, err := a.Acquire(ctx, "both", 1, 5, time.Minute); err != nil || r == nil {
		t.Fatalf("first start of both: %v", err)
	} else {
		r()
	}
	if r, _, err := a.Acquire(ctx, "both", 1, 5, time.Minute); err != nil || r != nil {
		t.Fatalf("second start of both at once: admitted %v (%v), want the rate's wait", r != nil, err)
	}
	testkit.WaitFor(t, 5*time.Second, "a place and a start", func() bool {
		r, _, err := a.Acquire(ctx, "both", 1, 5, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return r != nil
	})
}

// Redis unreachable: an error, and nothing held.
func TestPacerReportsRedisErrors(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	p := lock.NewPacer(c, "paylock:")
	for _, lim := range []struct {
		concurrency int
		rate        float64
	}{{2, 0}, {0, 5}} {
		r, _, err := p.Acquire(context.Background(), "crm", lim.concurrency, lim.rate, time.Second)
		if err == nil || r != nil {
			t.Fatalf("%+v: release %v, err %v; want an error", lim, r != nil, err)
		}
	}
}
