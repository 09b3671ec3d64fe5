package lock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Adaptive is a Client that sends each command through pipelined when
// another command of the Locker is in flight, and through direct when none
// is. An auto-pipeliner (redis.Client.AutoPipeline) pays goroutine hand-offs
// that only pay off when several deliveries' commands can share a write: a
// lone delivery's obtain and release then go straight out, as over a plain
// client, and a burst's go out pipelined. Both clients must reach the same
// Redis (typically a *redis.Client and its own auto-pipeliner).
type Adaptive struct {
	direct, pipelined Client
	inFlight          atomic.Int64
}

var _ Client = (*Adaptive)(nil)

// NewAdaptive returns an Adaptive over direct and pipelined.
func NewAdaptive(direct, pipelined Client) *Adaptive {
	return &Adaptive{direct: direct, pipelined: pipelined}
}

// pick counts a command in flight and returns the client to send it with;
// the caller calls done once the command has its reply.
func (a *Adaptive) pick() Client {
	if a.inFlight.Add(1) == 1 {
		return a.direct
	}
	return a.pipelined
}

func (a *Adaptive) done() { a.inFlight.Add(-1) }

// SetNX implements Client.
func (a *Adaptive) SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd {
	defer a.done()
	return a.pick().SetNX(ctx, key, value, expiration)
}

// PTTL implements Client.
func (a *Adaptive) PTTL(ctx context.Context, key string) *redis.DurationCmd {
	defer a.done()
	return a.pick().PTTL(ctx, key)
}

// Ping implements Client.
func (a *Adaptive) Ping(ctx context.Context) *redis.StatusCmd {
	defer a.done()
	return a.pick().Ping(ctx)
}

// Eval implements redis.Scripter.
func (a *Adaptive) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	defer a.done()
	return a.pick().Eval(ctx, script, keys, args...)
}

// EvalSha implements redis.Scripter.
func (a *Adaptive) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	defer a.done()
	return a.pick().EvalSha(ctx, sha1, keys, args...)
}

// EvalRO implements redis.Scripter.
func (a *Adaptive) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	defer a.done()
	return a.pick().EvalRO(ctx, script, keys, args...)
}

// EvalShaRO implements redis.Scripter.
func (a *Adaptive) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	defer a.done()
	return a.pick().EvalShaRO(ctx, sha1, keys, args...)
}

// ScriptExists implements redis.Scripter.
func (a *Adaptive) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	defer a.done()
	return a.pick().ScriptExists(ctx, hashes...)
}

// ScriptLoad implements redis.Scripter.
func (a *Adaptive) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	defer a.done()
	return a.pick().ScriptLoad(ctx, script)
}
