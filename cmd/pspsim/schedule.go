package main

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// schedule is the retry schedule of one delivery: a PSP's exponential
// backoff with jitter, compressed into milliseconds and seconds, that also
// honours the receiver's Retry-After.
type schedule struct {
	Initial    time.Duration // first backoff interval
	Max        time.Duration // the interval stops growing here (jitter may exceed it by Jitter)
	Multiplier float64       // growth per retry
	Jitter     float64       // randomization factor: each wait is interval × [1-Jitter, 1+Jitter]
	// TimeScale multiplies a Retry-After before it is honoured, so that a
	// run can compress a server's "1" (second) into, say, 50ms.
	TimeScale float64
}

// backOff returns a fresh backoff for one delivery. It is not safe for
// concurrent use; each delivery has its own.
func (s schedule) backOff() *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     s.Initial,
		RandomizationFactor: s.Jitter,
		Multiplier:          s.Multiplier,
		MaxInterval:         s.Max,
	}
	b.Reset()
	return b
}

// wait returns how long to pause before the next attempt: the backoff's next
// interval, or the scaled Retry-After when that is longer (retryAfter < 0
// means the answer carried none).
func (s schedule) wait(b *backoff.ExponentialBackOff, retryAfter time.Duration) time.Duration {
	d := b.NextBackOff()
	if retryAfter >= 0 {
		d = max(d, s.scale(retryAfter))
	}
	return d
}

// scale compresses a Retry-After by TimeScale.
func (s schedule) scale(d time.Duration) time.Duration {
	scaled := float64(d) * s.TimeScale
	if scaled >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(scaled)
}

// parseRetryAfter reads a Retry-After header (RFC 9110 §10.2.3): delay
// seconds or an HTTP date, relative to now. It returns -1 when the header is
// absent or unreadable; a date in the past is 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 || secs > math.MaxInt64/int64(time.Second) {
			return -1
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return -1
}
