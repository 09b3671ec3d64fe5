package lock

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// A Pacer shares limits on some work among every process that uses the
// same Redis: at most so many at once (leased places in a sorted set,
// places.lua) and at most so many starts per second (a GCRA rate,
// github.com/go-redis/redis_rate), per name. paylock paces each forward
// destination's deliveries with it (its concurrency and rate) across the
// replicas.
//
// Like the lock, it is an efficiency measure: a place whose holder died is
// given back when its lease runs out, a Redis failover may forget places
// and rates, and when Redis cannot answer the caller decides what to do
// (paylock's forward worker then paces each replica on its own).
type Pacer struct {
	rdb    redis.UniversalClient
	prefix string
	rate   *redis_rate.Limiter
}

//go:embed places.lua
var placesLua string

var placesScript = redis.NewScript(placesLua)

// placesBusyWait is how long Acquire asks a caller to wait when every
// place is held: places are not queued, the caller tries again.
const placesBusyWait = 50 * time.Millisecond

// NewPacer returns a Pacer whose keys start with prefix: prefix +
// "pace:{name}:places" and "rate:" + prefix + "pace:{name}" (the rate
// library's own prefix first). The braces keep a name's keys in one slot
// of a Redis Cluster.
func NewPacer(rdb redis.UniversalClient, prefix string) *Pacer {
	return &Pacer{rdb: rdb, prefix: prefix, rate: redis_rate.NewLimiter(rdb)}
}

// Acquire takes a place for one unit of name's work: one of concurrency
// places (0: no cap), leased for lease, and one of rate starts per second
// (0: no rate). It returns the function that gives the place back (its
// lease ends it otherwise), or, when name is at either cap, how long to
// wait before trying again (release is then nil). An error is Redis's,
// and nothing is held.
func (p *Pacer) Acquire(ctx context.Context, name string, concurrency int, rate float64, lease time.Duration) (release func(), wait time.Duration, err error) {
	return p.AcquireBurst(ctx, name, concurrency, rate, 1, lease)
}

// AcquireBurst is Acquire with a rate that lets burst starts through at
// once after a quiet spell (burst 1: one at a time, as Acquire).
func (p *Pacer) AcquireBurst(ctx context.Context, name string, concurrency int, rate float64, burst int, lease time.Duration) (release func(), wait time.Duration, err error) {
	release = func() {}
	key := p.prefix + "pace:{" + name + "}"
	if concurrency > 0 {
		if lease < time.Millisecond {
			return nil, 0, fmt.Errorf("lock: pace %s: a lease of %v", name, lease)
		}
		places, token := key+":places", uuid.NewString()
		got, err := placesScript.Run(ctx, p.rdb, []string{places}, concurrency, lease.Milliseconds(), token).Int()
		if err != nil {
			return nil, 0, fmt.Errorf("lock: pace %s: %w", name, err)
		}
		if got == 0 {
			return nil, placesBusyWait, nil
		}
		release = func() {
			// Best effort: the lease gives the place back otherwise.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = p.rdb.ZRem(ctx, places, token).Err()
		}
	}
	if rate > 0 {
		res, err := p.rate.Allow(ctx, key, rateLimit(rate, burst))
		if err != nil {
			release()
			return nil, 0, fmt.Errorf("lock: pace %s: %w", name, err)
		}
		if res.Allowed == 0 {
			release()
			return nil, max(res.RetryAfter, time.Millisecond), nil
		}
	}
	return release, 0, nil
}

// rateLimit is rate starts per second, burst of them at once after a
// quiet spell, as a GCRA limit: one per 1/rate seconds.
func rateLimit(rate float64, burst int) redis_rate.Limit {
	return redis_rate.Limit{Rate: 1, Burst: max(burst, 1), Period: time.Duration(float64(time.Second) / rate)}
}
