package lock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/lock"
)

// counting is a Client that counts its SetNX calls and, when gate is set,
// holds each one until gate is closed.
type counting struct {
	lock.Client
	setNX   atomic.Int32
	gate    chan struct{}
	entered chan struct{}
}

func (c *counting) SetNX(ctx context.Context, key string, value any, exp time.Duration) *redis.BoolCmd {
	c.setNX.Add(1)
	if c.gate != nil {
		c.entered <- struct{}{}
		<-c.gate
	}
	return c.Client.SetNX(ctx, key, value, exp)
}

// TestAdaptiveSendsALoneCommandDirectAndConcurrentOnesPipelined: with
// nothing in flight, obtain goes through the direct client (no pipeliner
// hand-off for a lone delivery); while a command is in flight, the next
// one goes through the pipelined client; once both are done, direct again.
func TestAdaptiveSendsALoneCommandDirectAndConcurrentOnesPipelined(t *testing.T) {
	t.Parallel()
	e := setupRedis(t)
	ap, err := e.client.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	direct := &counting{Client: e.client, gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	piped := &counting{Client: ap}
	l := lock.New(lock.NewAdaptive(direct, piped))

	first := make(chan error, 1)
	go func() {
		lk, err := l.Obtain(ctxT(t), e.key+":a", time.Minute)
		if err == nil {
			err = lk.Release(ctxT(t))
		}
		first <- err
	}()
	<-direct.entered // the first SET NX is in flight, held
	lk, err := l.Obtain(ctxT(t), e.key+":b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := piped.setNX.Load(); got != 1 {
		t.Fatalf("pipelined SET NX calls while another was in flight: %d, want 1", got)
	}
	close(direct.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := lk.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	direct.gate = nil
	lk, err = l.Obtain(ctxT(t), e.key+":c", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if d, p := direct.setNX.Load(), piped.setNX.Load(); d != 2 || p != 1 {
		t.Fatalf("SET NX calls: direct %d, pipelined %d; want 2 and 1", d, p)
	}
}
