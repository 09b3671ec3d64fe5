package forward

import (
	"math/rand/v2"
	"sync"
	"time"
)

// limiter enforces one destination's Policy.Concurrency and Policy.Rate in
// this process: a job over either is snoozed (no attempt spent) and
// offered again after the wait admit returns.
type limiter struct {
	sem      chan struct{} // nil: no concurrency cap
	interval time.Duration // 0: no rate

	mu   sync.Mutex
	next time.Time // when the next delivery may start (rate)
}

// limitBusyWait is how long a job waits when its destination has
// Concurrency deliveries in flight here.
const limitBusyWait = 50 * time.Millisecond

func newLimiter(p Policy) *limiter {
	if p.Concurrency <= 0 && p.Rate <= 0 {
		return nil
	}
	l := &limiter{}
	if p.Concurrency > 0 {
		l.sem = make(chan struct{}, p.Concurrency)
	}
	if p.Rate > 0 {
		l.interval = time.Duration(float64(time.Second) / p.Rate)
	}
	return l
}

// admit takes a place for one delivery at now: it returns the function
// that gives the place back, or, when the destination is at its cap,
// how long to wait (a little more, so that the waiting jobs do not come
// back in step). A nil limiter admits everything.
func (l *limiter) admit(now time.Time) (release func(), wait time.Duration) {
	if l == nil {
		return func() {}, 0
	}
	if l.sem != nil {
		select {
		case l.sem <- struct{}{}:
		default:
			return nil, limitBusyWait + rand.N(limitBusyWait)
		}
	}
	release = func() {
		if l.sem != nil {
			<-l.sem
		}
	}
	if l.interval > 0 {
		l.mu.Lock()
		if l.next.After(now) {
			wait = l.next.Sub(now)
			l.mu.Unlock()
			release()
			return nil, wait + rand.N(l.interval/4+1)
		}
		l.next = now.Add(l.interval)
		l.mu.Unlock()
	}
	return release, 0
}
