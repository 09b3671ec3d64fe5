package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/paylock/paylock/handler"
)

// LockConfig is the Redis lock: its TTL, how long a delivery waits for a
// busy one, the finished marker, the keys' prefix, what to do when Redis is
// down, and the Redis deployment itself.
type LockConfig struct {
	TTL         time.Duration       // PAYLOCK_LOCK_TTL
	Wait        time.Duration       // PAYLOCK_LOCK_WAIT; 0: do not wait
	FinishedTTL time.Duration       // PAYLOCK_LOCK_FINISHED_TTL; 0: release plainly
	Prefix      string              // PAYLOCK_LOCK_PREFIX
	Unavailable handler.RedisPolicy // PAYLOCK_REDIS_UNAVAILABLE
	Off         bool                // PAYLOCK_LOCK=off: the database constraint alone
	Pipeline    bool                // PAYLOCK_LOCK_PIPELINE=auto: the lock's commands auto-pipelined
	Redis       RedisConfig         // REDIS_URL, PAYLOCK_REDIS_*
}

func (c *LockConfig) title() string { return "lock and Redis" }

func (c *LockConfig) settings() []setting {
	return append([]setting{
		{env: "PAYLOCK_LOCK_TTL", flag: "lock-ttl", def: "5s", usage: "lock time-to-live (kept alive by a watchdog)",
			parse: durationAtLeast(&c.TTL, 100*time.Millisecond)},
		{env: "PAYLOCK_LOCK_WAIT", flag: "lock-wait", def: "2s", usage: "how long a delivery waits for a busy lock before answering 409",
			parse: durationAtLeast(&c.Wait, 0)},
		{env: "PAYLOCK_LOCK_FINISHED_TTL", flag: "lock-finished-ttl", def: "10s", usage: "how long a settled transaction's lock key keeps a finished marker, so late duplicates settle with a read (0: release plainly)",
			parse: durationAtLeast(&c.FinishedTTL, 0)},
		{env: "PAYLOCK_LOCK_PREFIX", flag: "lock-prefix", def: "paylock:", usage: "prefix of the Redis lock keys",
			parse: func(v string) error { c.Prefix = v; return nonEmpty(v) }},
		{env: "PAYLOCK_REDIS_UNAVAILABLE", flag: "redis-unavailable", def: "backstop", usage: "when Redis is down: backstop (record on the database constraint alone) or reject (503)",
			parse: func(v string) error {
				c.Unavailable = handler.RedisPolicy(v)
				if v != string(handler.Backstop) && v != string(handler.Reject) {
					return errors.New("want backstop or reject")
				}
				return nil
			}},
		{env: "PAYLOCK_LOCK", flag: "lock", def: "on", usage: "on: the Redis lock guards each transaction; off: the database constraint alone (for benchmarks)",
			parse: func(v string) error {
				switch v {
				case "on", "off":
					c.Off = v == "off"
					return nil
				}
				return errors.New("want on or off")
			}},
		{env: "PAYLOCK_LOCK_PIPELINE", flag: "lock-pipeline", def: "auto", usage: "auto: the lock's commands from concurrent deliveries share one write to Redis (go-redis auto-pipelining; standalone mode only); off: one round trip each",
			parse: func(v string) error {
				switch v {
				case "auto", "off":
					c.Pipeline = v == "auto"
					return nil
				}
				return errors.New("want auto or off")
			}},
	}, c.Redis.settings()...)
}

// validate keeps Redis calls well inside a lease: a refresh that gets no
// answer fails, and is tried again, while the lease still runs.
func (c *LockConfig) validate() error {
	if c.Redis.Timeout*2 > c.TTL {
		return fmt.Errorf("invalid PAYLOCK_REDIS_TIMEOUT=%s: must be at most half of PAYLOCK_LOCK_TTL (%s)", c.Redis.Timeout, c.TTL)
	}
	return c.Redis.validate()
}

func (c *LockConfig) logAttrs() []slog.Attr {
	return append([]slog.Attr{
		slog.String("redis_url", redactURL(c.Redis.URL)),
		slog.Duration("lock_ttl", c.TTL),
		slog.Duration("lock_wait", c.Wait),
		slog.String("lock_prefix", c.Prefix),
		slog.String("redis_unavailable", string(c.Unavailable)),
	}, c.Redis.logAttrs()...)
}

// handlerWait maps a zero setting (PAYLOCK_LOCK_WAIT=0: do not wait;
// PAYLOCK_LOCK_FINISHED_TTL=0: no marker) to the handler's negative value;
// the handler reads zero as "use the default".
func handlerWait(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
