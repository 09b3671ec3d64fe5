package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/problem"
)

// held is a lock this delivery holds, with when it was obtained.
type held struct {
	*lock.Lock
	at time.Time
}

// busyPolling is how a delivery polls a busy key: randomized exponential
// backoff, so that replicas waiting on one key do not poll in step.
var busyPolling = lock.ExponentialBackoff(10*time.Millisecond, 250*time.Millisecond)

// waitOptions is how obtain waits on a busy key for at most wait: the
// strategies are values, so one slice serves every delivery (built once in
// New, not per delivery). None when wait is 0.
func waitOptions(wait time.Duration) []lock.ObtainOption {
	if wait <= 0 {
		return nil
	}
	return []lock.ObtainOption{lock.WithRetry(lock.MaxWait(busyPolling, wait))}
}

// obtain takes key. With wait, it polls up to LockWait while another
// request holds the key (the retry strategy is the lock's; the policy, how
// long, is the handler's). It returns a nil lock and nil error when Redis is
// unreachable and the policy is Backstop, errFinished when the key holds
// the finished marker, and a problem.Busy carrying the holder's remaining TTL
// (for Retry-After) when the key is still held. waited reports whether the
// key was busy at least once.
func (h *Handler) obtain(ctx context.Context, key string, o *outcome, wait bool) (lk *held, waited bool, err error) {
	var opts []lock.ObtainOption
	if wait {
		opts = h.waitOpts // nil when LockWait is 0
	}
	start := time.Now()
	l, err := h.locker.Obtain(ctx, key, h.cfg.LockTTL, opts...)
	o.lockWait += time.Since(start)
	var busy *lock.BusyError
	switch {
	case err == nil:
		o.lockMode = "locked"
		waited = l.Attempts() > 1
		o.waited = o.waited || waited
		return &held{Lock: l, at: time.Now()}, waited, nil
	case errors.As(err, &busy):
		o.waited = true
		retryAfter := busy.TTL
		if retryAfter <= 0 {
			retryAfter = h.cfg.LockTTL
		}
		return nil, true, problem.Busy{RetryAfter: retryAfter}
	case errors.Is(err, lock.ErrFinished):
		return nil, false, errFinished
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case h.cfg.RedisUnavailable == Reject:
		o.redisDown = string(Reject)
		h.log.WarnContext(ctx, "redis unavailable: rejecting (PAYLOCK_REDIS_UNAVAILABLE=reject)", slog.Any("error", err))
		return nil, false, fmt.Errorf("%w: %w", problem.ErrRedisUnavailable, err)
	default:
		o.lockMode, o.redisDown = "backstop", string(Backstop)
		h.log.WarnContext(ctx, "redis unavailable: recording on the database constraint alone (PAYLOCK_REDIS_UNAVAILABLE=backstop)", slog.Any("error", err))
		return nil, false, nil
	}
}
