package pace_test

import (
	"testing"
	"time"

	"github.com/paylock/paylock/internal/pace"
)

func TestLocalHoldsConcurrencyAndRate(t *testing.T) {
	if pace.NewLocal(0, 0) != nil {
		t.Fatal("no cap and no rate: want nil")
	}
	var none *pace.Local
	if r, w := none.Admit(time.Now()); r == nil || w != 0 {
		t.Fatal("a nil Local must admit")
	}
	l := pace.NewLocal(2, 0)
	now := time.Now()
	r1, _ := l.Admit(now)
	r2, _ := l.Admit(now)
	if r1 == nil || r2 == nil {
		t.Fatal("two places of two")
	}
	if r, w := l.Admit(now); r != nil || w < pace.BusyWait {
		t.Fatalf("third of two: release %v, wait %v", r != nil, w)
	}
	r1()
	if r, _ := l.Admit(now); r == nil {
		t.Fatal("a place given back is taken again")
	}

	rl := pace.NewLocal(0, 10) // one start per 100ms
	if r, w := rl.Admit(now); r == nil || w != 0 {
		t.Fatal("first start")
	}
	if r, w := rl.Admit(now.Add(10 * time.Millisecond)); r != nil || w < 90*time.Millisecond {
		t.Fatalf("second start 10ms later: release %v, wait %v; want about 90ms", r != nil, w)
	}
	if r, _ := rl.Admit(now.Add(100 * time.Millisecond)); r == nil {
		t.Fatal("a start 100ms later")
	}

	bl := pace.NewLocalBurst(0, 10, 3) // three at once, then one per 100ms
	for i := range 3 {
		if r, _ := bl.Admit(now); r == nil {
			t.Fatalf("start %d of a burst of 3", i+1)
		}
	}
	if r, w := bl.Admit(now); r != nil || w < 100*time.Millisecond {
		t.Fatalf("a fourth at once: release %v, wait %v; want about 100ms", r != nil, w)
	}
	if r, _ := bl.Admit(now.Add(100 * time.Millisecond)); r == nil {
		t.Fatal("one more 100ms later")
	}
	if r, _ := bl.Admit(now.Add(100 * time.Millisecond)); r != nil {
		t.Fatal("two more 100ms later")
	}
}
