package lock_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
)

// env is one backend prepared for one test: a client of its own, a key of its
// own, and ways to move the server's clock and to make a key vanish.
type env struct {
	client *redis.Client
	key    string
	// short is a TTL that advance(2*short) is sure to expire.
	short time.Duration
	// advance moves the server's clock forward by d.
	advance func(d time.Duration)
	// vanish makes the key disappear behind its owner's back.
	vanish func(t *testing.T)
}

type backend struct {
	name  string
	setup func(t *testing.T, hooks ...redis.Hook) *env
}

var backends = []backend{
	{"miniredis", setupMiniredis},
	{"redis", setupRedis},
}

// setupMiniredis starts a miniredis of the test's own; time moves only when
// the test says so.
func setupMiniredis(t *testing.T, hooks ...redis.Hook) *env {
	t.Helper()
	mr := miniredis.RunT(t)
	c := newClient(t, &redis.Options{Addr: mr.Addr()}, hooks...)
	return &env{
		client:  c,
		key:     testkit.Key(t, "lock"),
		short:   time.Second,
		advance: mr.FastForward,
		vanish: func(t *testing.T) {
			t.Helper()
			mr.FlushAll()
		},
	}
}

// setupRedis uses the shared server from REDIS_URL (skipping the test when
// it is unreachable outside CI); time moves by sleeping, so TTLs are short.
func setupRedis(t *testing.T, hooks ...redis.Hook) *env {
	t.Helper()
	opt, err := redis.ParseURL(testkit.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, opt, hooks...)
	key := testkit.Key(t, "lock")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Del(ctx, key)
	})
	return &env{
		client:  c,
		key:     key,
		short:   100 * time.Millisecond,
		advance: time.Sleep,
		vanish: func(t *testing.T) {
			t.Helper()
			// Never FLUSHALL the shared server.
			if err := c.Del(context.Background(), key).Err(); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func newClient(t testing.TB, opt *redis.Options, hooks ...redis.Hook) *redis.Client {
	t.Helper()
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(opt)
	for _, h := range hooks {
		c.AddHook(h)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustObtain(t *testing.T, l *lock.Locker, key string, ttl time.Duration) *lock.Lock {
	t.Helper()
	lk, err := l.Obtain(ctxT(t), key, ttl)
	if err != nil {
		t.Fatalf("Obtain(%q, %v): %v", key, ttl, err)
	}
	return lk
}

func get(t *testing.T, c *redis.Client, key string) string {
	t.Helper()
	v, err := c.Get(ctxT(t), key).Result()
	if errors.Is(err, redis.Nil) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestBehaviour runs every case against miniredis and against real Redis.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		hooks func() []redis.Hook
		run   func(t *testing.T, e *env)
	}{
		{name: "SecondObtainIsNotObtained", run: func(t *testing.T, e *env) {
			l := lock.New(e.client)
			first := mustObtain(t, l, e.key, time.Minute)
			_, err := l.Obtain(ctxT(t), e.key, time.Minute)
			if !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("second Obtain: err = %v, want ErrNotObtained", err)
			}
			if got := get(t, e.client, e.key); got != first.Token() {
				t.Fatalf("key = %q, want the first owner's token %q", got, first.Token())
			}
		}},
		{name: "ConcurrentObtainersHaveExactlyOneWinner", run: func(t *testing.T, e *env) {
			l := lock.New(e.client)
			var won, busy atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 64 {
				wg.Go(func() {
					<-start
					_, err := l.Obtain(ctxT(t), e.key, time.Minute)
					switch {
					case err == nil:
						won.Add(1)
					case errors.Is(err, lock.ErrNotObtained):
						busy.Add(1)
					default:
						t.Error(err)
					}
				})
			}
			close(start)
			wg.Wait()
			if won.Load() != 1 || busy.Load() != 63 {
				t.Fatalf("won %d, busy %d; want 1 and 63", won.Load(), busy.Load())
			}
		}},
		{name: "FinishLeavesAMarkerThatObtainReportsUntilItExpires", run: func(t *testing.T, e *env) {
			l := lock.New(e.client)
			lk := mustObtain(t, l, e.key, time.Minute)
			if err := lk.Finish(ctxT(t), e.short); err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if _, err := l.Obtain(ctxT(t), e.key, time.Minute); !errors.Is(err, lock.ErrFinished) || errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("Obtain after Finish: err = %v, want ErrFinished only", err)
			}
			if err := lk.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Release after Finish: err = %v, want ErrNotHeld (the marker is not a token)", err)
			}
			e.advance(2 * e.short)
			mustObtain(t, l, e.key, time.Minute)
		}},
		{name: "StaleOwnerCannotFinishNewOwnersLock", run: func(t *testing.T, e *env) {
			l := lock.New(e.client)
			stale := mustObtain(t, l, e.key, e.short)
			e.advance(2 * e.short)
			owner := mustObtain(t, l, e.key, time.Minute)
			if err := stale.Finish(ctxT(t), time.Minute); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("stale Finish: err = %v, want ErrNotHeld", err)
			}
			if got := get(t, e.client, e.key); got != owner.Token() {
				t.Fatalf("key = %q, want the owner's token", got)
			}
		}},
		{name: "ExpiredLockCanBeObtainedByANewOwner", run: func(t *testing.T, e *env) {
			l := lock.New(e.client)
			mustObtain(t, l, e.key, e.short)
			e.advance(2 * e.short)
			mustObtain(t, l, e.key, time.Minute)
		}},
		{name: "StaleOwnerCannotReleaseNewOwnersLock", run: func(t *testing.T, e *env) {
			l := lock.New(e.client)
			stale := mustObtain(t, l, e.key, e.short)
			e.advance(2 * e.short)
			owner := mustObtain(t, l, e.key, time.Minute)

			if err := stale.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("stale Release: err = %v, want ErrNotHeld", err)
			}
			if err := stale.Refresh(ctxT(t), time.Hour); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("stale Refresh: err = %v, want ErrNotHeld", err)
			}
			if ttl, err := stale.TTL(ctxT(t)); err != nil || ttl != 0 {
				t.Fatalf("stale TTL = %v, %v; want 0, nil", ttl, err)
			}
			if got := get(t, e.client, e.key); got != owner.Token() {
				t.Fatalf("key = %q, want the new owner's token %q", got, owner.Token())
			}
			ttl, err := owner.TTL(ctxT(t))
			if err != nil || ttl <= 50*time.Second || ttl > time.Minute {
				t.Fatalf("new owner's TTL = %v, %v; want its own minute, untouched", ttl, err)
			}
			if err := owner.Release(ctxT(t)); err != nil {
				t.Fatalf("new owner's Release: %v", err)
			}
		}},
		{name: "RefreshExtendsTheLease", run: func(t *testing.T, e *env) {
			l := lock.New(e.client)
			lk := mustObtain(t, l, e.key, e.short)
			before := lk.Deadline()
			if err := lk.Refresh(ctxT(t), time.Minute); err != nil {
				t.Fatal(err)
			}
			if !lk.Deadline().After(before.Add(50 * time.Second)) {
				t.Fatalf("Deadline moved from %v to %v, want about a minute later", before, lk.Deadline())
			}
			e.advance(2 * e.short)
			if ttl, err := l.KeyTTL(ctxT(t), e.key); err != nil || ttl < 50*time.Second {
				t.Fatalf("KeyTTL = %v, %v; want about a minute", ttl, err)
			}
			if err := lk.Release(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if ttl, err := l.KeyTTL(ctxT(t), e.key); err != nil || ttl != 0 {
				t.Fatalf("KeyTTL after Release = %v, %v; want 0, nil", ttl, err)
			}
		}},
		{name: "ReleaseWorksAfterScriptFlush", run: func(t *testing.T, e *env) {
			l := lock.New(e.client)
			lk := mustObtain(t, l, e.key, time.Minute)
			// On the shared server this empties everyone's script cache;
			// go-redis answers NOSCRIPT with EVAL, so that only costs a
			// round trip.
			if err := e.client.ScriptFlush(ctxT(t)).Err(); err != nil {
				t.Fatal(err)
			}
			if err := lk.Release(ctxT(t)); err != nil {
				t.Fatalf("Release after SCRIPT FLUSH: %v", err)
			}
			if got := get(t, e.client, e.key); got != "<absent>" {
				t.Fatalf("key = %q after Release, want it gone", got)
			}
		}},
		{name: "ReleaseAfterTheKeyVanishedIsNotHeld", run: func(t *testing.T, e *env) {
			l := lock.New(e.client)
			lk := mustObtain(t, l, e.key, time.Minute)
			e.vanish(t)
			if err := lk.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Release: err = %v, want ErrNotHeld", err)
			}
			if err := lk.Refresh(ctxT(t), time.Minute); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Refresh: err = %v, want ErrNotHeld", err)
			}
		}},
		{name: "ObtainSucceedsWhenGoRedisRetriesALostReply", run: func(t *testing.T, e *env) {
			loser := &replyLoser{key: []byte(e.key)}
			e.client.AddHook(loser)
			l := lock.New(e.client)

			loser.arm()
			lk := mustObtain(t, l, e.key, time.Minute)
			if loser.lost.Load() != 1 {
				t.Fatalf("replies dropped = %d, want 1 (the hook did not fire)", loser.lost.Load())
			}
			// The SET went out twice: go-redis retried it. The retry found
			// the key taken, and obtain.lua found it ours.
			if sent := loser.commands(); len(sent) < 3 || sent[0] != "set" || sent[1] != "set" || sent[2] != "evalsha" {
				t.Fatalf("commands sent = %q, want set, set (the retry), evalsha, ...", sent)
			}
			if got := get(t, e.client, e.key); got != lk.Token() {
				t.Fatalf("key = %q, want our token %q", got, lk.Token())
			}
			if err := lk.Release(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if got := get(t, e.client, e.key); got != "<absent>" {
				t.Fatalf("key = %q after Release: an orphan", got)
			}

			// The same fault makes a plain SET NX report our own key as
			// taken: the bug obtain.lua exists to avoid.
			loser.arm()
			ok, err := e.client.SetNX(ctxT(t), e.key, "token", time.Minute).Result()
			if err != nil || ok || loser.lost.Load() != 2 {
				t.Fatalf("SET NX with a lost reply = %v, %v (dropped %d); want false, nil, 2", ok, err, loser.lost.Load())
			}
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, b.setup(t))
				})
			}
		})
	}
}

// replyLoser is a go-redis hook that loses the reply to the next command
// mentioning key once arm is called: the command reaches the server and runs,
// then the connection dies before the reply is read, as when a network drops.
// go-redis sees io.EOF, which it retries on a fresh connection. Error replies
// (NOSCRIPT before go-redis falls back to EVAL) come through untouched.
//
// It works at the connection, not in ProcessHook: process hooks wrap the
// whole command, retries included, so an error returned there is never
// retried by go-redis.
type replyLoser struct {
	key   []byte
	armed atomic.Bool
	lost  atomic.Int32 // replies dropped

	mu   sync.Mutex
	sent []string // names of the commands mentioning key written since arm
}

func (h *replyLoser) arm() {
	h.mu.Lock()
	h.sent = nil
	h.mu.Unlock()
	h.armed.Store(true)
}

func (h *replyLoser) commands() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sent)
}

func (h *replyLoser) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &lossyConn{Conn: c, h: h}, nil
	}
}

func (h *replyLoser) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *replyLoser) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

type lossyConn struct {
	net.Conn
	h    *replyLoser
	drop atomic.Bool // the reply now awaited is to be lost
}

func (c *lossyConn) Write(p []byte) (int, error) {
	mine := bytes.Contains(p, c.h.key)
	if mine {
		// A command is a RESP array: *<n>\r\n$<len>\r\n<name>\r\n...
		if f := bytes.SplitN(p, []byte("\r\n"), 4); len(f) == 4 {
			c.h.mu.Lock()
			c.h.sent = append(c.h.sent, string(f[2]))
			c.h.mu.Unlock()
		}
	}
	c.drop.Store(mine && c.h.armed.Load())
	return c.Conn.Write(p)
}

func (c *lossyConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && p[0] != '-' && c.drop.Load() && c.h.armed.CompareAndSwap(true, false) {
		c.h.lost.Add(1)
		c.Conn.Close()
		return 0, io.EOF
	}
	return n, err
}

func TestObtainWhenRedisIsUnreachableIsAnErrorNotBusy(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var events []lock.Event
	c := newClient(t, &redis.Options{Addr: addr, DialTimeout: 100 * time.Millisecond, MaxRetries: 1})
	l := lock.New(c, lock.WithObserver(func(e lock.Event) { events = append(events, e) }))

	_, err = l.Obtain(ctxT(t), "paylock-test:unreachable", time.Minute)
	if err == nil || errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("Obtain against a closed port: err = %v, want a transport error", err)
	}
	if len(events) != 1 || events[0].Outcome != "error" || events[0].Err == nil {
		t.Fatalf("events = %+v, want one obtain error", events)
	}
}

func TestObtainIsBoundedByTheContextDeadline(t *testing.T) {
	t.Parallel()
	// A server that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	c := newClient(t, &redis.Options{Addr: ln.Addr().String(), ReadTimeout: time.Minute, WriteTimeout: time.Minute, MaxRetries: -1})
	l := lock.New(c)

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = l.Obtain(ctx, "paylock-test:silent", time.Minute)
	if err == nil || errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("Obtain against a silent server: err = %v, want a timeout", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Obtain took %v with a 200ms context deadline", took)
	}
}

func TestObtainWithCancelledContextIsAnErrorNotBusy(t *testing.T) {
	t.Parallel()
	e := setupMiniredis(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := lock.New(e.client).Obtain(ctx, e.key, time.Minute)
	if !errors.Is(err, context.Canceled) || errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("err = %v, want context.Canceled and not ErrNotObtained", err)
	}
	if got := get(t, e.client, e.key); got != "<absent>" {
		t.Fatalf("key = %q, want absent", got)
	}
}

func TestTTLBelowOneMillisecondIsRejected(t *testing.T) {
	t.Parallel()
	e := setupMiniredis(t)
	l := lock.New(e.client)
	for _, ttl := range []time.Duration{0, -time.Second, 999 * time.Microsecond} {
		_, err := l.Obtain(ctxT(t), e.key, ttl)
		if err == nil || errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("Obtain(ttl=%v): err = %v, want a ttl error", ttl, err)
		}
	}
	if got := get(t, e.client, e.key); got != "<absent>" {
		t.Fatalf("key = %q, want absent", got)
	}
	lk := mustObtain(t, l, e.key, time.Millisecond)
	if err := lk.Refresh(ctxT(t), time.Microsecond); err == nil || errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Refresh(1µs): err = %v, want a ttl error", err)
	}
}

func TestDeadlineIsSentTimePlusTTLLessDrift(t *testing.T) {
	t.Parallel()
	e := setupMiniredis(t)
	before := time.Now()
	lk := mustObtain(t, lock.New(e.client), e.key, 10*time.Second)
	after := time.Now()
	// 10s - (1% of 10s + 2ms) = 9.898s after the command was sent.
	lease := 9898 * time.Millisecond
	if d := lk.Deadline(); d.Before(before.Add(lease)) || d.After(after.Add(lease)) {
		t.Fatalf("Deadline = %v after obtain start, want %v", d.Sub(before), lease)
	}
}

// recorder collects observer events.
type recorder struct {
	mu     sync.Mutex
	events []lock.Event
}

func (r *recorder) observe(e lock.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// outcomes returns "kind:outcome" of the events so far, of kind k if k != 0.
func (r *recorder) outcomes(k lock.EventKind) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if k == 0 || e.Kind == k {
			out = append(out, e.Kind.String()+":"+e.Outcome)
		}
	}
	return out
}

func (r *recorder) count(k lock.EventKind, outcome string) int {
	n := 0
	for _, o := range r.outcomes(k) {
		if o == k.String()+":"+outcome {
			n++
		}
	}
	return n
}

func TestObserverSeesEachOutcome(t *testing.T) {
	t.Parallel()
	e := setupMiniredis(t)
	var rec recorder
	l := lock.New(e.client, lock.WithObserver(rec.observe))
	ctx := ctxT(t)

	lk := mustObtain(t, l, e.key, time.Second)
	l.Obtain(ctx, e.key, time.Second)
	lk.Refresh(ctx, time.Second)
	lk.Release(ctx)
	lk.Refresh(ctx, time.Second)

	lk = mustObtain(t, l, e.key, time.Second)
	e.advance(2 * time.Second)
	lk.Release(ctx)

	// Long enough that a loaded machine (-race) answers the first refresh
	// before the lease deadline passes by itself.
	lk = mustObtain(t, l, e.key, 300*time.Millisecond)
	lease, stop := lk.KeepAlive(ctx)
	defer stop()
	e.vanish(t)
	<-lease.Done()

	want := []string{
		"obtain:acquired", "obtain:busy", "refresh:ok", "release:released", "refresh:not_held",
		"obtain:acquired", "release:lost", // gone before our own clock says it could expire
		"obtain:acquired", "refresh:not_held", "lease_lost:lost",
	}
	if got := rec.outcomes(0); !equal(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, ev := range rec.events {
		if ev.Key != e.key || ev.Duration < 0 {
			t.Errorf("event %+v: wrong key or duration", ev)
		}
		if (ev.Kind == lock.EventRelease || ev.Kind == lock.EventLeaseLost) && ev.Held <= 0 {
			t.Errorf("event %+v: Held not set", ev)
		}
	}
	if last := rec.events[len(rec.events)-1]; !errors.Is(last.Err, lock.ErrLeaseLost) {
		t.Errorf("lease lost event Err = %v, want the cause", last.Err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func BenchmarkObtainRelease(b *testing.B) {
	l := lock.New(benchClient(b))
	prefix := testkit.Key(b, "")
	var n atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			key := prefix + strconv.FormatUint(n.Add(1), 10)
			lk, err := l.Obtain(ctx, key, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if err := lk.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkObtainReleaseFenced is BenchmarkObtainRelease with WithFencing:
// the same two round trips, the first a script that also INCRs the key's
// counter. Each goroutine reuses one key, so that only a few counters are
// left to delete.
func BenchmarkObtainReleaseFenced(b *testing.B) {
	c := benchClient(b)
	l := lock.New(c)
	prefix := testkit.Key(b, "")
	b.Cleanup(func() { deletePrefix(b, c, prefix) })
	var n atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		key := prefix + strconv.FormatUint(n.Add(1), 10)
		for pb.Next() {
			lk, err := l.Obtain(ctx, key, time.Minute, lock.WithFencing())
			if err != nil {
				b.Fatal(err)
			}
			if err := lk.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkObtainReleaseWithRetry is BenchmarkObtainRelease with a retry
// strategy that a free key never uses: what the option costs.
func BenchmarkObtainReleaseWithRetry(b *testing.B) {
	l := lock.New(benchClient(b))
	prefix := testkit.Key(b, "")
	retry := lock.WithRetry(lock.MaxWait(lock.ExponentialBackoff(10*time.Millisecond, 250*time.Millisecond), 2*time.Second))
	var n atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			key := prefix + strconv.FormatUint(n.Add(1), 10)
			lk, err := l.Obtain(ctx, key, time.Minute, retry)
			if err != nil {
				b.Fatal(err)
			}
			if err := lk.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func deletePrefix(b *testing.B, c *redis.Client, prefix string) {
	ctx := context.Background()
	iter := c.Scan(ctx, 0, "*"+prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
	if err := iter.Err(); err != nil {
		b.Error(err)
	}
}

// BenchmarkRawSetNXDel is the floor for BenchmarkObtainRelease: the same two
// round trips as plain commands, without token, script or ownership check.
func BenchmarkRawSetNXDel(b *testing.B) {
	c := benchClient(b)
	prefix := testkit.Key(b, "")
	var n atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			key := prefix + strconv.FormatUint(n.Add(1), 10)
			ok, err := c.SetNX(ctx, key, "0b9f6c1e-3d7a-4c52-9e0f-5a8d2b7c4e61", time.Minute).Result()
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			if err := c.Del(ctx, key).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchClient(b *testing.B) *redis.Client {
	opt, err := redis.ParseURL(testkit.RedisURL(b))
	if err != nil {
		b.Fatal(err)
	}
	return newClient(b, opt)
}

// TestReleaseTellsAnExpiredLeaseFromALostKey: ErrNotHeld both times, but the
// observer learns whether the TTL ran out (the TTL is too short) or the key
// went missing while the lease still ran (Redis lost it).
func TestReleaseTellsAnExpiredLeaseFromALostKey(t *testing.T) {
	t.Parallel()
	e := setupMiniredis(t)
	var rec recorder
	clk := testkit.NewClock(time.Now())
	l := lock.New(e.client, lock.WithObserver(rec.observe), lock.WithClock(clk.Now))
	ctx := ctxT(t)

	lk := mustObtain(t, l, e.key, time.Second)
	e.advance(2 * time.Second) // Redis's clock
	clk.Add(2 * time.Second)   // ours: the process was paused past its TTL
	if err := lk.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release after expiry: %v, want ErrNotHeld", err)
	}
	lk = mustObtain(t, l, e.key, time.Second)
	e.vanish(t)
	if err := lk.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release of a vanished key: %v, want ErrNotHeld", err)
	}
	want := []string{"obtain:acquired", "release:expired", "obtain:acquired", "release:lost"}
	if got := rec.outcomes(0); !equal(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
}
