package lock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

var (
	//go:embed obtain.lua
	obtainLua string
	//go:embed release.lua
	releaseLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed pttl.lua
	pttlLua string
	//go:embed finish.lua
	finishLua string

	obtainScript  = redis.NewScript(obtainLua)
	releaseScript = redis.NewScript(releaseLua)
	refreshScript = redis.NewScript(refreshLua)
	pttlScript    = redis.NewScript(pttlLua)
	finishScript  = redis.NewScript(finishLua)
)

var (
	// ErrNotObtained is returned by Obtain when another owner holds the key.
	ErrNotObtained = errors.New("lock: not obtained")

	// ErrFinished is returned by Obtain when the key holds the marker that
	// Finish leaves: the work the lock guarded was done moments ago. The
	// caller learns that cheaply; whether it really was done is for the
	// caller's own records to confirm (for paylock, the database).
	ErrFinished = errors.New("lock: finished")

	// ErrNotHeld is returned by Release and Refresh when the key expired,
	// vanished, or now has another owner.
	ErrNotHeld = errors.New("lock: not held")

	// ErrLeaseLost is the cause (see context.Cause) of a KeepAlive context
	// cancelled because the lease could not be confirmed.
	ErrLeaseLost = errors.New("lock: lease lost")
)

// Client is what a Locker needs of a go-redis client: the scripts
// (redis.Scripter: EVALSHA, EVAL on NOSCRIPT) and the three plain commands
// it sends (SET NX for a free key, PTTL, PING). *redis.Client,
// *redis.ClusterClient, a failover client and a *redis.AutoPipeliner all
// fit, as does a test's wrapper that injects faults.
type Client interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	PTTL(ctx context.Context, key string) *redis.DurationCmd
	Ping(ctx context.Context) *redis.StatusCmd
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (*redis.AutoPipeliner)(nil)
)

// Locker obtains locks on keys of one Redis client. It is safe for
// concurrent use.
type Locker struct {
	client  Client
	observe func(Event)
	now     func() time.Time
	tracer  trace.Tracer
}

// Option configures a Locker.
type Option func(*Locker)

// WithObserver makes the Locker call fn, synchronously, after every Redis
// call it makes and when a KeepAlive lease is lost. fn must be quick and safe
// for concurrent use.
func WithObserver(fn func(Event)) Option {
	return func(l *Locker) { l.observe = fn }
}

// WithClock makes the Locker read the time that lease deadlines are
// computed and checked against from now instead of time.Now. Tests that move
// a miniredis clock (FastForward) move this one with it, to play a process
// that was paused past its TTL. Timers still run in real time.
func WithClock(now func() time.Time) Option {
	return func(l *Locker) { l.now = now }
}

// New returns a Locker using client, which should have ContextTimeoutEnabled
// set (see the package documentation). client may be an auto-pipeliner
// (redis.Client.AutoPipeline): commands that many deliveries send at once
// then share one write and one read.
func New(client Client, opts ...Option) *Locker {
	l := &Locker{client: client, now: time.Now}
	for _, o := range opts {
		o(l)
	}
	if l.tracer == nil {
		l.tracer = defaultTracer()
	}
	return l
}

// ObtainOption configures one Obtain call.
type ObtainOption func(*obtainConfig)

type obtainConfig struct {
	retry  RetryStrategy
	fenced bool
}

// WithRetry makes Obtain try a busy key again as s says (see
// ExponentialBackoff, LinearBackoff, MaxWait, LimitRetry). The default is
// NoRetry. Retries are bounded by ctx too: Obtain gives up, returning the
// *BusyError, when the next attempt could not start before ctx's deadline,
// and returns ctx's error when ctx is cancelled while it sleeps. Prefer
// MaxWait to a deadline for bounding the wait: a deadline also bounds the
// Redis commands, and one that passes during a command is an error, not a
// busy key.
func WithRetry(s RetryStrategy) ObtainOption {
	return func(c *obtainConfig) { c.retry = s }
}

// WithFencing makes Obtain mint a fencing token along with the lock, in the
// same round trip: a number that increases with every fenced Obtain of the
// key, read with (*Lock).Fence. Every Obtain of a key must use WithFencing
// for the fences to order its holders. See the package documentation for
// how to use the fence, where its counter lives, and what a failover does
// to it.
func WithFencing() ObtainOption {
	return func(c *obtainConfig) { c.fenced = true }
}

// BusyError is the error Obtain returns when another owner holds the key
// (after every retry the strategy allowed). It matches ErrNotObtained:
// test with errors.Is(err, ErrNotObtained), and reach the fields with
// errors.As.
type BusyError struct {
	Key string
	// TTL is the holder's remaining TTL as the last attempt saw it, read in
	// the same round trip: a fair Retry-After (0 for a key without a TTL,
	// which this package never sets).
	TTL time.Duration
	// Attempts is how many attempts found the key busy (1 without retries).
	Attempts int
	// Waited is the time Obtain slept between attempts.
	Waited time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("lock: not obtained: %q held for another %v (%d attempts)", e.Key, e.TTL, e.Attempts)
}

// Unwrap returns ErrNotObtained.
func (e *BusyError) Unwrap() error { return ErrNotObtained }

// Obtain sets key to a fresh random token (a UUID v4) for ttl, truncated to
// whole milliseconds, unless another owner holds the key, and returns the
// held Lock. It succeeds too when go-redis retried the command after its
// first copy set the key and the reply was lost. By default it makes one
// attempt; WithRetry makes it wait for a busy key, and WithFencing makes
// it mint a fencing token with the lock.
//
// Obtain returns:
//   - a *BusyError, which matches ErrNotObtained, only when another owner
//     holds the key at the last attempt the retry strategy (and ctx's
//     deadline) allowed; it carries the holder's remaining TTL;
//   - ErrFinished when the key holds the marker that Finish leaves: the
//     work was done moments ago; Obtain does not retry then;
//   - ctx's error, wrapped, when ctx is cancelled while Obtain sleeps
//     between attempts (a deadline ends the wait with the *BusyError);
//   - a wrapped error for a ttl below 1 ms, a fenced key that cannot share
//     a cluster slot with its counter (see the package documentation), a
//     transport error, a timeout or a cancelled ctx during a command, never
//     matching ErrNotObtained and never retried; after a transport error
//     or timeout the key may have been set with our token nonetheless, and
//     then expires with ttl.
//
// Each attempt is reported to the observer as an EventObtain.
func (l *Locker) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	return l.obtainTraced(ctx, key, func(ctx context.Context) (*Lock, error) { return l.obtainAttempts(ctx, key, ttl, opts) })
}

// obtainAttempts is Obtain's work: attempts until the key is ours, the
// retry strategy gives up, or an error.
func (l *Locker) obtainAttempts(ctx context.Context, key string, ttl time.Duration, opts []ObtainOption) (*Lock, error) {
	o, err := l.newObtaining(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	defer o.stop()
	for attempt := 1; ; attempt++ {
		lk, r, err := o.try(ctx, attempt)
		if lk != nil || err != nil {
			return lk, err
		}
		if err := o.wait(ctx, attempt, r); err != nil {
			return nil, err
		}
	}
}

// obtaining is one Obtain call across its attempts.
type obtaining struct {
	l         *Locker
	key, fkey string // fkey: the fence counter's key, "" unfenced
	token     string
	ttl       time.Duration
	cfg       obtainConfig
	start     time.Time     // when the attempts began, for the retry strategy
	waited    time.Duration // slept between attempts so far
	timer     *time.Timer   // the wait between attempts, made at the first one
}

// newObtaining checks ttl and key, applies opts and draws the token.
func (l *Locker) newObtaining(key string, ttl time.Duration, opts []ObtainOption) (*obtaining, error) {
	ttl, err := checkTTL(ttl)
	if err != nil {
		return nil, err
	}
	var cfg obtainConfig
	if len(opts) > 0 {
		c := &obtainConfig{}
		for _, o := range opts {
			o(c)
		}
		cfg = *c
	}
	var fkey string
	if cfg.fenced {
		if fkey, err = fenceKey(key); err != nil {
			return nil, err
		}
	}
	id, err := uuid.NewRandom()
	if err != nil {
		return nil, fmt.Errorf("lock: token: %w", err)
	}
	return &obtaining{l: l, key: key, fkey: fkey, token: id.String(), ttl: ttl, cfg: cfg, start: time.Now()}, nil
}

// stop releases the timer of the waits, if one was made.
func (o *obtaining) stop() {
	if o.timer != nil {
		o.timer.Stop()
	}
}

// try makes attempt number attempt and reports it to the observer. It
// returns the Lock when acquired, an error when the attempt failed or met
// a finished marker, and neither when the key is busy (r says for how
// long).
func (o *obtaining) try(ctx context.Context, attempt int) (*Lock, obtainResult, error) {
	l := o.l
	began, sent := time.Now(), l.now()
	r, err := l.obtain(ctx, o.key, o.fkey, o.token, o.ttl)
	e := Event{Kind: EventObtain, Key: o.key, Duration: time.Since(began), Attempt: attempt}
	switch {
	case err != nil:
		e.Outcome, e.Err = "error", err
		l.emit(e)
		return nil, r, fmt.Errorf("lock: obtain %q: %w", o.key, err)
	case r.state == stateAcquired:
		e.Outcome = "acquired"
		l.emit(e)
		value := o.token
		if o.cfg.fenced {
			value = o.token + "/" + strconv.FormatInt(r.n, 10)
		}
		return &Lock{
			locker: l, key: o.key, token: value, fence: r.n, attempts: attempt, waited: o.waited,
			obtained: sent, ttl: o.ttl, deadline: leaseEnd(sent, o.ttl),
		}, r, nil
	case r.state == stateFinished:
		e.Outcome = "finished"
		l.emit(e)
		return nil, r, ErrFinished
	}
	e.Outcome = "busy"
	l.emit(e)
	return nil, r, nil
}

// wait sleeps until the next attempt, as the retry strategy says. It
// returns the *BusyError when there is none (no strategy, the strategy
// gave up, or it could not start before ctx's deadline), and ctx's cause
// when ctx is cancelled meanwhile.
func (o *obtaining) wait(ctx context.Context, attempt int, r obtainResult) error {
	var d time.Duration
	if o.cfg.retry != nil {
		d = o.cfg.retry.NextBackoff(attempt, time.Since(o.start))
	}
	if end, ok := ctx.Deadline(); ok && !time.Now().Add(d).Before(end) {
		d = 0 // the next attempt could not start in time
	}
	if d <= 0 {
		return o.busy(attempt, r)
	}
	if o.timer == nil {
		o.timer = time.NewTimer(d)
	} else {
		o.timer.Reset(d)
	}
	slept := time.Now()
	select {
	case <-ctx.Done():
		o.waited += time.Since(slept)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// A late timer: the deadline ended the wait, not a caller.
			return o.busy(attempt, r)
		}
		return fmt.Errorf("lock: obtain %q: waiting: %w", o.key, context.Cause(ctx))
	case <-o.timer.C:
	}
	o.waited += time.Since(slept)
	return nil
}

// busy is the error of a key still busy at the last attempt.
func (o *obtaining) busy(attempt int, r obtainResult) *BusyError {
	return &BusyError{Key: o.key, TTL: time.Duration(max(r.n, 0)) * time.Millisecond, Attempts: attempt, Waited: o.waited}
}

// What obtain.lua found.
const (
	stateBusy     = 0
	stateAcquired = 1
	stateFinished = 2
)

// obtainResult is one attempt's outcome: a state, and n, which is the fence
// (0 unfenced) when acquired and the key's PTTL in ms otherwise.
type obtainResult struct {
	state int64
	n     int64
}

// obtain sets key to token for ttl unless the key holds another token, and
// reports whether the key holds token now. Our own token is found when
// go-redis retried a command whose first copy was applied and whose reply
// was lost; the key is then ours. With fkey, the fence counter, the key is
// set by obtain.lua alone, which mints the fence.
func (l *Locker) obtain(ctx context.Context, key, fkey, token string, ttl time.Duration) (obtainResult, error) {
	var keys []string
	if fkey != "" {
		keys = []string{key, fkey}
	} else {
		// The common case, a free key, costs one plain SET NX.
		set, err := l.client.SetNX(ctx, key, token, ttl).Result()
		if err != nil {
			return obtainResult{}, err
		}
		if set {
			return obtainResult{state: stateAcquired}, nil
		}
		// The key exists: another owner's, ours if this was a retry, or a
		// finished marker. The script sets the key if it is absent
		// (expired meanwhile) or ours.
		keys = []string{key}
	}
	v, err := obtainScript.Run(ctx, l.client, keys, token, ttl.Milliseconds()).Int64Slice()
	if err != nil {
		return obtainResult{}, err
	}
	if len(v) != 2 {
		return obtainResult{}, fmt.Errorf("obtain.lua returned %v", v)
	}
	return obtainResult{state: v[0], n: v[1]}, nil
}

// Ping reports whether Redis answers (PING): a readiness check. Its error
// is the transport's, wrapped.
func (l *Locker) Ping(ctx context.Context) error {
	if err := l.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("lock: ping: %w", err)
	}
	return nil
}

// KeyTTL returns the remaining TTL of key, whoever holds it, and 0, nil when
// the key is absent. A key without a TTL (never set by this package) is an
// error, as is a transport error.
func (l *Locker) KeyTTL(ctx context.Context, key string) (time.Duration, error) {
	d, err := l.client.PTTL(ctx, key).Result()
	switch {
	case err != nil:
		return 0, fmt.Errorf("lock: pttl %q: %w", key, err)
	case d == -2:
		return 0, nil
	case d < 0:
		return 0, fmt.Errorf("lock: key %q has no TTL", key)
	}
	return d, nil
}

// Lock is a held lock: a key and the token that Obtain set it to. Its methods
// are safe for concurrent use.
type Lock struct {
	locker   *Locker
	key      string
	token    string // the value the key holds
	fence    int64
	attempts int
	waited   time.Duration
	obtained time.Time
	released atomic.Bool

	mu       sync.Mutex
	ttl      time.Duration // of the last successful obtain or refresh
	deadline time.Time     // local lease deadline (monotonic)
}

// Key returns the locked key.
func (lk *Lock) Key() string { return lk.key }

// Token returns the value the key holds while the lock is ours: a random
// token, followed for a fenced lock by "/" and the fence.
func (lk *Lock) Token() string { return lk.token }

// Fence returns the fencing token minted by an Obtain with WithFencing, and
// 0 for a lock obtained without it. Fences of one key increase with every
// fenced Obtain (see the package documentation for the exceptions).
func (lk *Lock) Fence() int64 { return lk.fence }

// Attempts returns how many attempts Obtain made: 1 when the key was free
// at once, more when Obtain waited for it (WithRetry).
func (lk *Lock) Attempts() int { return lk.attempts }

// Waited returns the time Obtain slept between attempts: 0 when the key
// was free at once.
func (lk *Lock) Waited() time.Duration { return lk.waited }

// Deadline returns the local lease deadline: when the last successful Obtain
// or Refresh command was sent, plus its TTL, minus a clock-drift allowance of
// 1% of the TTL plus 2 ms. Until then the key is ours unless someone else
// deleted it or Redis lost it. The time carries a monotonic reading, so
// compare it with time.Now, time.Until or time.Since only (or with the
// clock given to WithClock).
func (lk *Lock) Deadline() time.Time {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.deadline
}

func (lk *Lock) lease() (time.Duration, time.Time) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.ttl, lk.deadline
}

// Release deletes the key if it still holds our token. It returns ErrNotHeld,
// touching nothing, when the key expired, vanished or has another owner, and
// a wrapped error on transport errors, timeouts or a cancelled ctx (the key
// then expires with its TTL). Release also stops any KeepAlive watchdog of
// the lock, which then reports no lost lease.
func (lk *Lock) Release(ctx context.Context) error {
	return lk.endTraced(ctx, "release", func(ctx context.Context) error {
		return lk.end(ctx, "release", releaseScript, lk.token)
	})
}

// Finish ends the lock like Release, but leaves a marker on the key for hold
// instead of deleting it: until the marker expires, Obtain on the key
// returns ErrFinished, so latecomers learn the work is done without taking
// the lock and doing it again. It returns ErrNotHeld, touching nothing, when
// the key is gone or has another owner.
func (lk *Lock) Finish(ctx context.Context, hold time.Duration) error {
	hold, err := checkTTL(hold)
	if err != nil {
		return err
	}
	return lk.endTraced(ctx, "finish", func(ctx context.Context) error {
		return lk.end(ctx, "finish", finishScript, lk.token, hold.Milliseconds())
	})
}

// end runs Release's or Finish's script and reports it as an EventRelease.
func (lk *Lock) end(ctx context.Context, op string, script *redis.Script, args ...any) error {
	lk.released.Store(true)
	l := lk.locker
	start := time.Now()
	n, err := script.Run(ctx, l.client, []string{lk.key}, args...).Int()
	took := time.Since(start)
	e := Event{Kind: EventRelease, Key: lk.key, Duration: took, Held: l.now().Sub(lk.obtained)}
	switch {
	case err != nil:
		e.Outcome, e.Err = "error", err
		l.emit(e)
		return fmt.Errorf("lock: %s %q: %w", op, lk.key, err)
	case n != 1:
		// Past the lease deadline the TTL ran out; before it, Redis lost the
		// key (a failover, a flush, an eviction) or go-redis retried this
		// release after its first copy deleted the key.
		e.Outcome = "expired"
		if l.now().Before(lk.Deadline()) {
			e.Outcome = "lost"
		}
		l.emit(e)
		return ErrNotHeld
	}
	e.Outcome = "released"
	l.emit(e)
	return nil
}

// Refresh sets the TTL of the key to ttl (whole milliseconds, at least 1 ms)
// if it still holds our token, and moves the lease deadline. It returns
// ErrNotHeld, touching nothing, when the key expired, vanished or has another
// owner, and a wrapped error for a ttl below 1 ms, transport errors, timeouts
// or a cancelled ctx.
func (lk *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	ttl, err := checkTTL(ttl)
	if err != nil {
		return err
	}
	l := lk.locker
	start, sent := time.Now(), l.now()
	n, err := refreshScript.Run(ctx, l.client, []string{lk.key}, lk.token, ttl.Milliseconds()).Int()
	took := time.Since(start)
	switch {
	case err != nil:
		l.emit(Event{Kind: EventRefresh, Key: lk.key, Outcome: "error", Duration: took, Err: err})
		return fmt.Errorf("lock: refresh %q: %w", lk.key, err)
	case n != 1:
		l.emit(Event{Kind: EventRefresh, Key: lk.key, Outcome: "not_held", Duration: took})
		return ErrNotHeld
	}
	lk.mu.Lock()
	lk.ttl, lk.deadline = ttl, leaseEnd(sent, ttl)
	lk.mu.Unlock()
	l.emit(Event{Kind: EventRefresh, Key: lk.key, Outcome: "ok", Duration: took})
	return nil
}

// TTL returns the remaining TTL of the key while it holds our token, and
// 0, nil when it does not (expired, vanished or another owner). Transport
// errors, timeouts and a cancelled ctx are returned wrapped.
func (lk *Lock) TTL(ctx context.Context) (time.Duration, error) {
	n, err := pttlScript.Run(ctx, lk.locker.client, []string{lk.key}, lk.token).Int64()
	if err != nil {
		return 0, fmt.Errorf("lock: ttl %q: %w", lk.key, err)
	}
	if n <= 0 {
		return 0, nil
	}
	return time.Duration(n) * time.Millisecond, nil
}

// KeepAlive starts a watchdog that refreshes the lock every third of its TTL
// (the TTL of the last Obtain or Refresh) and returns a context derived from
// ctx that is cancelled as soon as the lease cannot be confirmed: when a
// refresh answers that the key is not ours (the cause matches both
// ErrLeaseLost and ErrNotHeld), or when refreshes keep failing until the
// lease deadline (cancelled at the deadline, by a timer, even while a refresh
// hangs; the cause matches ErrLeaseLost and wraps the last refresh error).
// Failed refreshes are retried every TTL/12; each refresh call is bounded by
// the lease deadline. A lost lease is reported once to the observer as
// EventLeaseLost, just before the context is cancelled.
//
// The watchdog costs one timer until the first refresh is due, at TTL/3:
// work that ends before then starts no goroutine. A process paused past the
// lease deadline finds its lease cancelled when that timer fires on resume,
// before any refresh is tried.
//
// Do the guarded work under the returned context. The CancelFunc stops the
// watchdog and waits for it to exit; call it when the work is done. Release
// stops the watchdog too, without reporting a lost lease: the context is then
// cancelled (with context.Canceled) when the watchdog next wakes.
func (lk *Lock) KeepAlive(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{}
	w.wg.Add(1) // done by the first wake, or by a stop that prevents it
	ttl, _ := lk.lease()
	w.timer = time.AfterFunc(ttl/3, func() {
		defer w.wg.Done()
		lk.watch(ctx, cancel)
	})
	return ctx, func() {
		cancel(nil)
		w.once.Do(func() {
			if w.timer.Stop() {
				w.wg.Done() // the watchdog never woke
			}
		})
		w.wg.Wait()
	}
}

type watchdog struct {
	timer *time.Timer
	once  sync.Once
	wg    sync.WaitGroup
}

// watch runs from the first refresh on, in the goroutine of KeepAlive's
// timer, until ctx ends or the lease is lost.
func (lk *Lock) watch(ctx context.Context, cancel context.CancelCauseFunc) {
	if ctx.Err() != nil {
		return
	}
	if lk.released.Load() {
		cancel(nil)
		return
	}
	w := &leaseWatch{lk: lk, ctx: ctx, cancel: cancel}
	if !lk.locker.now().Before(lk.Deadline()) {
		// Paused past the deadline before the first refresh.
		w.lose(fmt.Errorf("%w: deadline passed unconfirmed", ErrLeaseLost))
		return
	}
	expiry := w.startExpiry()
	defer expiry.Stop()

	var tick *time.Timer
	for {
		next, done := w.refresh(expiry)
		if done {
			return
		}
		if tick == nil {
			tick = time.NewTimer(next)
			defer tick.Stop()
		} else {
			tick.Reset(next)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if lk.released.Load() {
			cancel(nil)
			return
		}
	}
}

// leaseWatch is one watchdog's run: the lease context it cancels, once,
// and the last refresh error, which the expiry timer reports.
type leaseWatch struct {
	lk     *Lock
	ctx    context.Context
	cancel context.CancelCauseFunc

	once    sync.Once
	mu      sync.Mutex
	lastErr error
}

// lose reports the lost lease to the observer and cancels the lease
// context with cause, once, unless the context ended or the lock was
// released meanwhile.
func (w *leaseWatch) lose(cause error) {
	w.once.Do(func() {
		lk := w.lk
		if w.ctx.Err() != nil || lk.released.Load() {
			return
		}
		lk.locker.emit(Event{Kind: EventLeaseLost, Key: lk.key, Outcome: "lost", Held: lk.locker.now().Sub(lk.obtained), Err: cause})
		w.cancel(cause)
	})
}

// startExpiry starts the timer that fires at the lease deadline, wherever
// the watchdog is (even inside a refresh call that hangs), unless a
// refresh moved it: then it waits for the new deadline.
func (w *leaseWatch) startExpiry() *time.Timer {
	lk := w.lk
	var expiry *time.Timer
	expiry = time.AfterFunc(math.MaxInt64, func() {
		if w.ctx.Err() != nil {
			return
		}
		if d := lk.Deadline().Sub(lk.locker.now()); d > 0 {
			expiry.Reset(d) // a Refresh moved the deadline
			return
		}
		w.mu.Lock()
		err := w.lastErr
		w.mu.Unlock()
		if err == nil {
			w.lose(fmt.Errorf("%w: deadline passed unconfirmed", ErrLeaseLost))
		} else {
			w.lose(fmt.Errorf("%w: deadline passed unconfirmed: %w", ErrLeaseLost, err))
		}
	})
	expiry.Reset(lk.Deadline().Sub(lk.locker.now()))
	return expiry
}

// refresh refreshes the lease once, bounded by its deadline, and moves
// expiry to the deadline that holds now. It returns when to refresh next
// (TTL/3, or TTL/12 after a failure, retried until the deadline), or done
// when the key is no longer ours: the lease is then lost, or ended by a
// Release.
func (w *leaseWatch) refresh(expiry *time.Timer) (next time.Duration, done bool) {
	lk := w.lk
	ttl, deadline := lk.lease()
	rctx, rcancel := context.WithDeadline(w.ctx, deadline)
	err := lk.Refresh(rctx, ttl)
	rcancel()
	expiry.Reset(lk.Deadline().Sub(lk.locker.now())) // moved by this or another Refresh
	switch {
	case err == nil:
		return ttl / 3, false
	case errors.Is(err, ErrNotHeld):
		if lk.released.Load() {
			w.cancel(nil)
		} else {
			w.lose(fmt.Errorf("%w: %w", ErrLeaseLost, ErrNotHeld))
		}
		return 0, true
	default:
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		return ttl / 12, false
	}
}

func checkTTL(ttl time.Duration) (time.Duration, error) {
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("lock: ttl %v is below 1ms", ttl)
	}
	return ttl.Truncate(time.Millisecond), nil
}

// leaseEnd is the local deadline of a lease of ttl whose command was sent at
// sent: ttl less a drift allowance of 1% plus 2 ms.
func leaseEnd(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - ttl/100 - 2*time.Millisecond)
}

// EventKind says which operation an Event reports.
type EventKind int

// Event kinds.
const (
	EventObtain EventKind = iota + 1
	EventRelease
	EventRefresh
	EventLeaseLost
)

func (k EventKind) String() string {
	switch k {
	case EventObtain:
		return "obtain"
	case EventRelease:
		return "release"
	case EventRefresh:
		return "refresh"
	case EventLeaseLost:
		return "lease_lost"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event reports one lock operation to the observer set with WithObserver.
type Event struct {
	Kind EventKind
	Key  string
	// Outcome is, for EventObtain, "acquired", "busy", "finished" (a
	// Finish marker) or "error"; for
	// EventRelease, "released", "expired" (ErrNotHeld after the lease
	// deadline: the TTL ran out), "lost" (ErrNotHeld before it: Redis lost
	// the key, or a retried release had deleted it) or "error"; for
	// EventRefresh, "ok", "not_held" or "error"; for EventLeaseLost, "lost".
	Outcome  string
	Duration time.Duration // latency of the Redis call, go-redis's retries included
	Attempt  int           // EventObtain: which attempt of one Obtain call (1 for the first)
	Held     time.Duration // EventRelease and EventLeaseLost: time since Obtain sent its command
	Err      error         // the error of "error" outcomes; for EventLeaseLost, the cause
}

func (l *Locker) emit(e Event) {
	if l.observe != nil {
		l.observe(e)
	}
}
