// Package ratelog bounds how often a kind of log line is written: lines an
// unauthenticated client can cause (a refused signature, a wrong admin
// token) must not let it flood the log. A Limiter lets a burst of lines of
// each kind through, then one per interval, and says how many it held
// back, so that the next line written can carry the count.
package ratelog

import (
	"sync"
	"time"
)

// maxKinds bounds the kinds a Limiter tracks; beyond it the oldest state is
// forgotten (its kind starts a fresh burst). Kinds are the caller's own
// constants or configured names, so this is only a backstop.
const maxKinds = 1024

// Limiter lets, per kind, Burst lines through at once and then one per
// Every. The zero value is not usable: use New. It is safe for concurrent
// use.
type Limiter struct {
	every time.Duration
	burst float64
	now   func() time.Time

	mu    sync.Mutex
	kinds map[string]*bucket
}

type bucket struct {
	tokens     float64
	at         time.Time
	suppressed int
}

// New returns a Limiter letting burst lines of a kind through at once,
// then one per every.
func New(every time.Duration, burst int) *Limiter {
	return &Limiter{every: every, burst: float64(max(burst, 1)), now: time.Now, kinds: make(map[string]*bucket)}
}

// WithClock returns l reading the time from now (tests).
func (l *Limiter) WithClock(now func() time.Time) *Limiter {
	l.now = now
	return l
}

// Allow reports whether a line of kind may be written now. When it may,
// suppressed is how many lines of kind were held back since the last one
// written (to be logged with it); when it may not, the line is counted as
// held back.
func (l *Limiter) Allow(kind string) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, found := l.kinds[kind]
	if !found {
		if len(l.kinds) >= maxKinds {
			clear(l.kinds)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.kinds[kind] = b
	}
	if elapsed := now.Sub(b.at); elapsed > 0 && l.every > 0 {
		b.tokens = min(l.burst, b.tokens+float64(elapsed)/float64(l.every))
	}
	b.at = now
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}
