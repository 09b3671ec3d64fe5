package lock

import (
	"math/rand/v2"
	"time"
)

// RetryStrategy decides whether, and after how long, Obtain tries a busy key
// again. Pass one to Obtain with WithRetry.
//
// Strategies are stateless: Obtain passes the state in, so one strategy may
// be shared by any number of concurrent Obtain calls (a package-level
// variable, say).
type RetryStrategy interface {
	// NextBackoff returns how long Obtain sleeps before its next attempt,
	// after attempt (1 for the first) found the key busy and elapsed has
	// passed since the first attempt began. Zero or less stops retrying:
	// Obtain returns a *BusyError.
	NextBackoff(attempt int, elapsed time.Duration) time.Duration
}

type noRetry struct{}

func (noRetry) NextBackoff(int, time.Duration) time.Duration { return 0 }

// NoRetry makes one attempt only: a busy key is a *BusyError at once. It is
// the default.
func NoRetry() RetryStrategy { return noRetry{} }

type linearBackoff time.Duration

func (d linearBackoff) NextBackoff(int, time.Duration) time.Duration { return time.Duration(d) }

// LinearBackoff retries every d, without end (bound it with MaxWait,
// LimitRetry or the context) and without jitter: callers that start
// together poll together. Prefer ExponentialBackoff when several callers
// may wait on one key.
func LinearBackoff(d time.Duration) RetryStrategy { return linearBackoff(d) }

type exponentialBackoff struct{ min, max time.Duration }

// ExponentialBackoff retries without end (bound it with MaxWait, LimitRetry
// or the context), sleeping a random time between min and max that roughly
// doubles with each attempt: the n-th sleep is drawn uniformly from
// [max(min, h/2), h] with h = min(max, min·2ⁿ). The jitter keeps callers
// that wait on one key from polling in step. A min below 1 ms is taken as
// 1 ms, and a max below min as min (which makes the sleep exactly min).
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	min = maxDuration(min, time.Millisecond)
	return exponentialBackoff{min: min, max: maxDuration(max, min)}
}

func (e exponentialBackoff) NextBackoff(attempt int, _ time.Duration) time.Duration {
	h := e.max
	if attempt < 62 && e.min <= e.max>>attempt {
		h = e.min << attempt
	}
	lo := maxDuration(e.min, h/2)
	if h <= lo {
		return lo
	}
	return lo + rand.N(h-lo+1)
}

type maxWait struct {
	s      RetryStrategy
	budget time.Duration
}

// MaxWait bounds the time Obtain spends on a busy key to budget, counted
// from the start of its first attempt, without a context deadline that
// could cut a Redis command short. A sleep of s that would end past the
// budget is cut to what remains of it, so the last attempt starts at the
// budget's end; once the budget is spent, Obtain stops and returns the
// *BusyError.
func MaxWait(s RetryStrategy, budget time.Duration) RetryStrategy {
	return maxWait{s: s, budget: budget}
}

func (m maxWait) NextBackoff(attempt int, elapsed time.Duration) time.Duration {
	left := m.budget - elapsed
	if left <= 0 {
		return 0
	}
	d := m.s.NextBackoff(attempt, elapsed)
	if d <= 0 {
		return 0
	}
	return min(d, left)
}

type limitRetry struct {
	s   RetryStrategy
	max int
}

// LimitRetry lets s retry at most n times: Obtain makes at most n+1
// attempts.
func LimitRetry(s RetryStrategy, n int) RetryStrategy { return limitRetry{s: s, max: n} }

func (l limitRetry) NextBackoff(attempt int, elapsed time.Duration) time.Duration {
	if attempt > l.max {
		return 0
	}
	return l.s.NextBackoff(attempt, elapsed)
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
