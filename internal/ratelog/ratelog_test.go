package ratelog_test

import (
	"testing"
	"time"

	"github.com/paylock/paylock/internal/ratelog"
	"github.com/paylock/paylock/internal/testkit"
)

func TestABurstThenOnePerIntervalWithTheHeldBackCount(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1_700_000_000, 0))
	l := ratelog.New(time.Second, 3).WithClock(clock.Now)
	written := 0
	for range 1000 {
		if ok, _ := l.Allow("refused"); ok {
			written++
		}
	}
	if written != 3 {
		t.Fatalf("a burst of 1000 wrote %d lines, want 3", written)
	}
	clock.Add(time.Second)
	ok, suppressed := l.Allow("refused")
	if !ok || suppressed != 997 {
		t.Fatalf("after one interval: ok %v suppressed %d, want a line carrying 997", ok, suppressed)
	}
	if ok, _ := l.Allow("refused"); ok {
		t.Fatal("a second line within the interval")
	}
	// Kinds are counted apart.
	if ok, suppressed := l.Allow("other"); !ok || suppressed != 0 {
		t.Fatalf("another kind: ok %v suppressed %d", ok, suppressed)
	}
}
