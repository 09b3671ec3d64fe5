// Package pace holds one process's limit on some work: at most so many at
// once and at most so many starts per second. paylock's forward worker
// paces a destination with it when the replicas' shared pacer (lock.Pacer)
// is off or cannot answer, and the webhook pipeline its fetches from a
// provider's API the same way.
package pace

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Local enforces a concurrency and a rate in this process: work over
// either waits the time Admit returns and is offered again. A nil *Local
// admits everything.
type Local struct {
	sem      chan struct{} // nil: no concurrency cap
	interval time.Duration // 0: no rate
	slack    time.Duration // how far ahead of now the next start may be booked: (burst-1) intervals

	mu   sync.Mutex
	next time.Time // when the next start may be (rate)
}

// BusyWait is how long work waits when Concurrency units are in flight.
const BusyWait = 50 * time.Millisecond

// NewLocal returns the limit of concurrency units at once (0: no cap) and
// rate starts per second (0: no rate); nil when there is neither.
func NewLocal(concurrency int, rate float64) *Local {
	return NewLocalBurst(concurrency, rate, 1)
}

// NewLocalBurst is NewLocal whose rate lets burst starts through at once
// after a quiet spell (a GCRA: the theoretical arrival time may run
// burst-1 intervals ahead of now).
func NewLocalBurst(concurrency int, rate float64, burst int) *Local {
	if concurrency <= 0 && rate <= 0 {
		return nil
	}
	l := &Local{}
	if concurrency > 0 {
		l.sem = make(chan struct{}, concurrency)
	}
	if rate > 0 {
		l.interval = time.Duration(float64(time.Second) / rate)
		l.slack = time.Duration(max(burst, 1)-1) * l.interval
	}
	return l
}

// Admit takes a place for one unit of work at now: it returns the function
// that gives the place back, or, at either cap, how long to wait (a little
// more, so that waiting work does not come back in step).
func (l *Local) Admit(now time.Time) (release func(), wait time.Duration) {
	if l == nil {
		return func() {}, 0
	}
	if l.sem != nil {
		select {
		case l.sem <- struct{}{}:
		default:
			return nil, BusyWait + rand.N(BusyWait)
		}
	}
	release = func() {
		if l.sem != nil {
			<-l.sem
		}
	}
	if l.interval > 0 {
		l.mu.Lock()
		tat := l.next
		if tat.Before(now) {
			tat = now
		}
		if ahead := tat.Sub(now); ahead > l.slack {
			l.mu.Unlock()
			release()
			return nil, ahead - l.slack + rand.N(l.interval/4+1)
		}
		l.next = tat.Add(l.interval)
		l.mu.Unlock()
	}
	return release, 0
}
