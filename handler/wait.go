package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/paylock/paylock/lock"
)

// held is a lock this delivery holds, with when it was obtained.
type held struct {
	*lock.Lock
	at time.Time
}

// obtain takes key, waiting up to LockWait (polling with backoff and
// jitter) while another request holds it. It returns a nil lock and nil
// error when Redis is unreachable and the policy is Backstop, and a
// busyError when the key is still held after the wait. waited reports
// whether the key was busy at least once.
func (h *Handler) obtain(ctx context.Context, key string, o *outcome) (lk *held, waited bool, err error) {
	start := time.Now()
	defer func() { o.lockWait += time.Since(start) }()
	deadline := start.Add(h.cfg.LockWait)
	// Randomized exponential backoff: replicas waiting on one key do not poll
	// in step.
	bo := &backoff.ExponentialBackOff{
		InitialInterval:     10 * time.Millisecond,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         250 * time.Millisecond,
	}
	bo.Reset()
	for {
		lk, busy, err := h.tryObtain(ctx, key, o)
		if !busy {
			return lk, waited, err
		}
		waited, o.waited = true, true
		left := time.Until(deadline)
		if left <= 0 {
			return nil, true, busyError{}
		}
		t := time.NewTimer(min(bo.NextBackOff(), left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, true, ctx.Err()
		case <-t.C:
		}
	}
}

// obtainOnce makes one attempt at key. A busy key is a busyError carrying
// the holder's remaining TTL, for Retry-After.
func (h *Handler) obtainOnce(ctx context.Context, key string, o *outcome) (*held, error) {
	lk, busy, err := h.tryObtain(ctx, key, o)
	if !busy {
		return lk, err
	}
	ttl, err := h.locker.KeyTTL(ctx, key)
	if err != nil || ttl <= 0 {
		ttl = h.cfg.LockTTL
	}
	return nil, busyError{retryAfter: ttl}
}

// tryObtain makes one attempt at key and reports whether it was busy. It
// returns a nil lock and nil error when Redis is unreachable and the policy
// is Backstop.
func (h *Handler) tryObtain(ctx context.Context, key string, o *outcome) (lk *held, busy bool, err error) {
	l, err := h.locker.Obtain(ctx, key, h.cfg.LockTTL)
	switch {
	case err == nil:
		o.lockMode = "locked"
		return &held{Lock: l, at: time.Now()}, false, nil
	case errors.Is(err, lock.ErrNotObtained):
		return nil, true, err
	case errors.Is(err, lock.ErrFinished):
		return nil, false, errFinished
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case h.cfg.RedisUnavailable == Reject:
		o.redisDown = string(Reject)
		h.log.WarnContext(ctx, "redis unavailable: rejecting (PAYLOCK_REDIS_UNAVAILABLE=reject)", slog.Any("error", err))
		return nil, false, fmt.Errorf("%w: %w", errRedisUnavailable, err)
	default:
		o.lockMode, o.redisDown = "backstop", string(Backstop)
		h.log.WarnContext(ctx, "redis unavailable: recording on the database constraint alone (PAYLOCK_REDIS_UNAVAILABLE=backstop)", slog.Any("error", err))
		return nil, false, nil
	}
}
