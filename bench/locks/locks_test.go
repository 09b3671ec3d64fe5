// Package locks compares one lock cycle (obtain, then release, of a fresh
// key) of paylock's lock package with the same cycle of two widely used Go
// Redis locks, and with its floor: a plain SET NX PX and DEL.
//
// Every benchmark uses a client built the same way (REDIS_URL, go-redis
// defaults, ContextTimeoutEnabled as paylock's own client), the same TTL, and
// the same parallelism (b.RunParallel: GOMAXPROCS goroutines), so that their
// ratios mean something when measured in one run. Keys carry a prefix of
// their own and are released (or deleted) by each cycle; none is left behind.
//
// It lives in the bench module so that paylock does not depend on the
// libraries it is compared with. scripts/bench.sh runs it; see BENCHMARKS.md.
package locks

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
)

// ttl is the lock TTL of every cycle: long enough that no key expires
// during a cycle, as in lock's own benchmarks.
const ttl = time.Minute

// token is what the floor sets: a value as long as a lock token.
const token = "0b9f6c1e-3d7a-4c52-9e0f-5a8d2b7c4e61"

// client returns a Redis client for REDIS_URL configured as paylock's (and
// lock's benchmarks') is, closed when b ends; b is skipped without a server
// (failed under CI=true).
func client(b *testing.B) *redis.Client {
	b.Helper()
	return testkit.Redis(b, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
}

// cycle runs one obtain-and-release of key; it fails b on any error.
type cycle func(ctx context.Context, key string) error

// run measures c on fresh keys, in parallel.
func run(b *testing.B, c cycle) {
	prefix := "paylock-bench:" + b.Name() + ":" + uuid.NewString()[:8] + ":"
	var n atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := c(ctx, prefix+strconv.FormatUint(n.Add(1), 10)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCycle runs the four cycles as sub-benchmarks so that one -bench
// pattern selects them all and their lines share a prefix.
func BenchmarkCycle(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		c := client(b)
		run(b, func(ctx context.Context, key string) error {
			ok, err := c.SetNX(ctx, key, token, ttl).Result()
			if err != nil {
				return err
			}
			if !ok {
				b.Fatalf("SET NX %s: key taken", key)
			}
			return c.Del(ctx, key).Err()
		})
	})
	b.Run("paylock", func(b *testing.B) {
		l := lock.New(client(b))
		run(b, func(ctx context.Context, key string) error {
			lk, err := l.Obtain(ctx, key, ttl)
			if err != nil {
				return err
			}
			return lk.Release(ctx)
		})
	})
	b.Run("redislock", func(b *testing.B) {
		l := redislock.New(client(b))
		run(b, func(ctx context.Context, key string) error {
			lk, err := l.Obtain(ctx, key, ttl, nil)
			if err != nil {
				return err
			}
			return lk.Release(ctx)
		})
	})
	b.Run("redsync", func(b *testing.B) {
		rs := redsync.New(goredis.NewPool(client(b)))
		run(b, func(ctx context.Context, key string) error {
			m := rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1))
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			ok, err := m.UnlockContext(ctx)
			if err == nil && !ok {
				b.Fatalf("redsync unlock %s: not held", key)
			}
			return err
		})
	})
}
