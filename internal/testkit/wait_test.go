package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

// failures is a testing.TB whose Fatal ends the goroutine it runs in and
// keeps the message, so that a test can see how a helper fails.
type failures struct {
	testing.TB
	msg string
}

func (f *failures) Helper() {}

func (f *failures) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs fn with a failures and returns its Fatal message ("" none).
func failure(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	f := &failures{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

func TestEventuallyReturnsOnceTheCheckPasses(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	testkit.Eventually(t, 5*time.Second, "the third call", func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the check's context has no deadline")
		}
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}
}

func TestEventuallyFailsWithEveryDistinctErrorInOrder(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	msg := failure(t, func(tb testing.TB) {
		testkit.Eventually(tb, 300*time.Millisecond, "replica promoted", func(context.Context) error {
			switch n := calls.Add(1); {
			case n <= 2:
				return errors.New("connection refused")
			case n <= 4:
				return errors.New("still a replica")
			default:
				return errors.New("cluster_state not ok")
			}
		})
	})
	if !strings.HasPrefix(msg, "replica promoted: not after 300ms: cluster_state not ok\n") {
		t.Fatalf("message %q, want what, timeout and the last error first", msg)
	}
	var seen []string
	for _, line := range strings.Split(msg, "\n\t")[1:] {
		_, err, _ := strings.Cut(line, ": ")
		seen = append(seen, err)
	}
	if fmt.Sprint(seen) != "[connection refused still a replica cluster_state not ok]" {
		t.Fatalf("history %q, want each distinct error once, in order", seen)
	}
}

func TestEventuallyGivesUpAtOnceOnErrGiveUp(t *testing.T) {
	t.Parallel()
	start := time.Now()
	msg := failure(t, func(tb testing.TB) {
		testkit.Eventually(tb, time.Minute, "ready", func(context.Context) error {
			return fmt.Errorf("%w: the server exited", testkit.ErrGiveUp)
		})
	})
	if took := time.Since(start); took > 5*time.Second || !strings.Contains(msg, "the server exited") {
		t.Fatalf("after %v: %q, want an immediate failure naming the cause", took, msg)
	}
}

func TestWaitForFailsNamingWhatItWaitedFor(t *testing.T) {
	t.Parallel()
	msg := failure(t, func(tb testing.TB) {
		testkit.WaitFor(tb, 50*time.Millisecond, "the row sent", func() bool { return false })
	})
	if msg != "timed out after 50ms waiting for the row sent" {
		t.Fatalf("message %q", msg)
	}
	var n atomic.Int32
	testkit.WaitFor(t, 5*time.Second, "three polls", func() bool { return n.Add(1) == 3 })
}

func TestClockMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)
	c := testkit.NewClock(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("Now = %v", c.Now())
	}
	c.Add(2 * time.Second)
	if got := c.Now().Sub(t0); got != 2*time.Second {
		t.Fatalf("after Add: %v", got)
	}
	c.Set(t0.Add(-time.Hour))
	if got := c.Now().Sub(t0); got != -time.Hour {
		t.Fatalf("after Set: %v", got)
	}
}
