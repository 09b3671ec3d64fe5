package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/paylock/paylock/store"
)

// The breaker: a sick destination harms nobody else.
//
// Each replica counts its attempts per destination. A destination whose
// last FailingAfter attempts failed, or half of its last breakerWindow, is
// failing (destination.failing); it is healthy again once a success
// follows and fewer than a fifth of the last breakerWindow failed. One
// whose last Policy.ParkAfter attempts failed, with no success for
// ParkStreak, is parked (destination.parked): its jobs wait, snoozed
// without spending an attempt, and are kept, never dropped. (A receiver
// that fails often but not always is failing, not parked: its successes
// go on.) The state is shared by every replica through the store
// (store.Outbox.MoveDestination), read again every breakerRefresh.
//
// While parked, a probe is due after Policy.Probe (doubling after each
// failed probe up to ProbeMost): one replica claims it (store.ClaimProbe),
// which makes the oldest waiting job never probed available, marked as
// the probe, and that job alone is sent (store.ConsumeProbe, just before
// it goes), one probe at a time. A failed probe spends no attempt (it
// waits as the parked jobs do), so the oldest message never runs out of
// attempts while its destination is parked. Its success brings the destination back
// (destination.recovered) and releases every waiting job at once, in the
// same transaction; so does "paylock forward resume". A failed attempt
// spends an attempt as ever; a refusal for good (ErrPermanent) or a
// missing destination says nothing about the destination's health and is
// not counted.
//
// Operator events (destination.failing, destination.parked,
// destination.recovered, message.exhausted) are forward jobs to the
// operations destination (Config.Operations), inserted in the transaction
// of the move they report.

// HealthStore is what the breaker needs from the store; *store.Outbox
// satisfies it.
type HealthStore interface {
	DestinationHealth(ctx context.Context) ([]store.DestinationHealth, error)
	MoveDestination(ctx context.Context, m store.DestinationMove) (store.DestinationHealth, bool, int, error)
	ClaimProbe(ctx context.Context, destination string, most time.Duration) (store.DestinationHealth, bool, error)
	ConsumeProbe(ctx context.Context, destination string, id int64) (bool, error)
	EnqueueForward(ctx context.Context, args store.ForwardArgs, maxAttempts int) error
	ReleaseSnoozed(ctx context.Context, destination string, gen int64, beyond time.Duration) (int, error)
}

// The breaker's settings that are not a destination's own.
const (
	// FailingAfter is the consecutive failed attempts that make a
	// destination failing.
	FailingAfter = 3
	// DefaultParkAfter is Policy.ParkAfter's default.
	DefaultParkAfter = 10
	// DefaultProbe is Policy.Probe's default: the wait before the first
	// probe of a parked destination.
	DefaultProbe = 2 * time.Second
	// ProbeMost is the longest wait between two probes.
	ProbeMost = 10 * time.Second
	// ParkStreak is how long a destination's consecutive failures must
	// have lasted (no success) before they park it.
	ParkStreak = 5 * time.Second
	// breakerWindow is the attempts whose error rate makes a destination
	// failing (half of them failed) or healthy again (under a fifth).
	breakerWindow = 20
	// breakerRefresh is how often a replica reads every destination's
	// state, and claims the probes that are due.
	breakerRefresh = time.Second
	// parkedSnooze is how long a parked job waits before it is offered
	// again; the destination's recovery releases it sooner. sweepBeyond
	// tells a parked job's snooze from every other snooze of a forward job
	// (a mismatch's, 30s to 37.5s; the order's and the rate's, shorter).
	parkedSnooze = time.Minute
	sweepBeyond  = 45 * time.Second
)

// The types of the operator events.
const (
	EventDestinationFailing   = "destination.failing"
	EventDestinationParked    = "destination.parked"
	EventDestinationRecovered = "destination.recovered"
	EventMessageExhausted     = "message.exhausted"
)

// tally is one replica's recent attempts to one destination.
type tally struct {
	consecutive int
	// streak is when the consecutive failures began.
	streak  time.Time
	window  [breakerWindow]bool // true: failed
	n, next int
	lastErr string
	// gen is the destination's generation when the tally was last reset
	// (a move to healthy, by any replica, starts it afresh).
	gen int64
}

func (t *tally) add(failed bool, err error, now time.Time) {
	if failed {
		if t.consecutive == 0 {
			t.streak = now
		}
		t.consecutive++
		if err != nil {
			t.lastErr = err.Error()
		}
	} else {
		t.consecutive = 0
	}
	t.window[t.next] = failed
	t.next = (t.next + 1) % breakerWindow
	t.n = min(t.n+1, breakerWindow)
}

// rate is the failed share of the last breakerWindow attempts (of those
// so far, when fewer).
func (t *tally) rate() float64 {
	if t.n == 0 {
		return 0
	}
	f := 0
	for i := range t.n {
		if t.window[i] {
			f++
		}
	}
	return float64(f) / float64(t.n)
}

// breaker is a worker's view of its destinations' health and its own
// count of their attempts. It is safe for concurrent use.
type breaker struct {
	hs     HealthStore
	log    *slog.Logger
	router *Router
	// ops is the operations destination ("": none), where events go.
	ops string
	// moved, when set, is told each move this replica made (metrics).
	moved func(destination string, to store.DestinationState)

	mu      sync.Mutex
	view    map[string]store.DestinationHealth // by destination; absent: healthy
	tallies map[string]*tally
	// sweepUntil is, for a destination this replica saw come back from
	// parked, until when its late-parked jobs are swept back (tick).
	sweepUntil map[string]time.Time
	// refreshing serializes reads of the store outside the loop.
	refreshing sync.Mutex

	stop context.CancelFunc
	done chan struct{}
}

func newBreaker(hs HealthStore, router *Router, ops string, moved func(string, store.DestinationState), log *slog.Logger) *breaker {
	return &breaker{hs: hs, router: router, ops: ops, moved: moved, log: log,
		view: map[string]store.DestinationHealth{}, tallies: map[string]*tally{}, sweepUntil: map[string]time.Time{}}
}

// start reads the destinations' states every breakerRefresh and claims
// the probes that are due, until close.
func (b *breaker) start() {
	ctx, cancel := context.WithCancel(context.Background())
	b.stop, b.done = cancel, make(chan struct{})
	go func() {
		defer close(b.done)
		t := time.NewTicker(breakerRefresh)
		defer t.Stop()
		for {
			b.tick(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

func (b *breaker) close() {
	if b.stop != nil {
		b.stop()
		<-b.done
	}
}

// tick refreshes the view and claims the due probes of parked destinations
// this worker defines.
func (b *breaker) tick(ctx context.Context) {
	if err := b.refresh(ctx); err != nil {
		if ctx.Err() == nil {
			b.log.WarnContext(ctx, "forward: reading the destinations' health", slog.Any("error", err))
		}
		return
	}
	for _, h := range b.snapshot() {
		if b.router.route(h.Destination) == nil {
			continue
		}
		if h.State == store.DestinationHealthy && b.sweeping(h.Destination) {
			// Newly healthy: a job parked by a worker whose view was a
			// moment old, after the release, waits no longer.
			if n, err := b.hs.ReleaseSnoozed(ctx, h.Destination, h.Gen, sweepBeyond); err != nil && ctx.Err() == nil {
				b.log.WarnContext(ctx, "forward: releasing parked jobs", slog.String("destination", h.Destination), slog.Any("error", err))
			} else if n > 0 {
				b.log.InfoContext(ctx, "forward: released jobs parked after the destination came back", slog.String("destination", h.Destination), slog.Int("released", n))
			}
			continue
		}
		if h.State != store.DestinationParked || h.ProbeIn > 0 {
			continue
		}
		got, claimed, err := b.hs.ClaimProbe(ctx, h.Destination, ProbeMost)
		if err != nil {
			if ctx.Err() == nil {
				b.log.WarnContext(ctx, "forward: claiming a probe", slog.String("destination", h.Destination), slog.Any("error", err))
			}
			continue
		}
		if got.Destination != "" {
			b.set(got)
		}
		if claimed {
			b.log.InfoContext(ctx, "forward: probing a parked destination", slog.String("destination", h.Destination),
				slog.Int64("job_id", got.ProbeJobID))
		}
	}
}

func (b *breaker) refresh(ctx context.Context) error {
	b.refreshing.Lock()
	defer b.refreshing.Unlock()
	all, err := b.hs.DestinationHealth(ctx)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range all {
		b.keep(h)
	}
	return nil
}

// keep, under b.mu, takes h into the view unless the view holds a later
// generation (a move or claim this replica made since the read); a move
// from parked to healthy starts the sweep of late-parked jobs.
func (b *breaker) keep(h store.DestinationHealth) {
	cur, ok := b.view[h.Destination]
	if ok && cur.Gen > h.Gen {
		return
	}
	if ok && cur.State == store.DestinationParked && h.State == store.DestinationHealthy {
		b.sweepUntil[h.Destination] = time.Now().Add(parkedSnooze*5/4 + 5*time.Second)
	}
	b.view[h.Destination] = h
}

// sweeping reports whether dest's late-parked jobs are still swept back.
func (b *breaker) sweeping(dest string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	until, ok := b.sweepUntil[dest]
	if ok && time.Now().After(until) {
		delete(b.sweepUntil, dest)
		return false
	}
	return ok
}

func (b *breaker) snapshot() []store.DestinationHealth {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]store.DestinationHealth, 0, len(b.view))
	for _, h := range b.view {
		out = append(out, h)
	}
	return out
}

func (b *breaker) state(dest string) store.DestinationHealth {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.view[dest]; ok {
		return h
	}
	return store.DestinationHealth{Destination: dest, State: store.DestinationHealthy}
}

// set keeps h unless the view holds a later generation.
func (b *breaker) set(h store.DestinationHealth) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keep(h)
}

// States returns each destination's state as this replica last read it;
// a destination it never saw move is healthy.
func (b *breaker) states() map[string]store.DestinationState {
	out := map[string]store.DestinationState{}
	for _, name := range b.router.names() {
		out[name] = store.DestinationHealthy
	}
	for _, h := range b.snapshot() {
		if _, ok := out[h.Destination]; ok { // not a destination removed since
			out[h.Destination] = h.State
		}
	}
	return out
}

// admit decides whether job may be sent now. A job of a parked destination
// waits (a snooze: no attempt spent) unless it is marked as the
// destination's current probe: candidate reports that it is, and consume
// must then make it the probe before it is sent. A job marked by a move
// this replica has not seen yet (released, or chosen as a probe) makes it
// read the store again first.
func (b *breaker) admit(ctx context.Context, job *river.Job[store.ForwardArgs]) (candidate bool, err error) {
	dest := job.Args.Destination
	h := b.state(dest)
	if h.State != store.DestinationParked {
		return false, nil
	}
	mark := store.JobParkMark(job.Metadata)
	if mark.Gen > h.Gen {
		if err := b.refreshFor(ctx, dest, mark.Gen); err != nil {
			return false, err
		}
		if h = b.state(dest); h.State != store.DestinationParked {
			return false, nil
		}
	}
	if mark.Probe && mark.Gen >= h.Gen {
		return true, nil
	}
	return false, parkedWait()
}

// parkedWait is a parked job's snooze.
func parkedWait() error { return river.JobSnooze(parkedSnooze + rand.N(parkedSnooze/4)) }

// refreshFor reads the store again unless another worker's read, while
// this one waited for it, already brought dest's view to gen.
func (b *breaker) refreshFor(ctx context.Context, dest string, gen int64) error {
	b.refreshing.Lock()
	seen := b.state(dest).Gen >= gen
	b.refreshing.Unlock()
	if seen {
		return nil
	}
	return b.refresh(ctx)
}

// consume makes a candidate (admit) the destination's probe, once: of the
// replicas that run it, one sends it. When it is not (or no longer) the
// probe, the job waits as any parked job does.
func (b *breaker) consume(ctx context.Context, job *river.Job[store.ForwardArgs]) error {
	ok, err := b.hs.ConsumeProbe(ctx, job.Args.Destination, job.ID)
	if err != nil {
		return err
	}
	if !ok {
		return parkedWait()
	}
	return nil
}

// observe counts an attempt's outcome and moves the destination when it
// crosses a threshold (or, succeeding, comes back).
func (b *breaker) observe(ctx context.Context, dest string, err error, probe bool) {
	if dest == "" || errors.Is(err, ErrPermanent) || errors.Is(err, ErrNoDestination) || b.router.route(dest) == nil {
		return
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // the worker is stopping: the destination said nothing
	}
	failed := err != nil
	now := time.Now()
	h := b.state(dest)
	b.mu.Lock()
	t := b.tallies[dest]
	switch {
	case t == nil:
		t = &tally{gen: h.Gen}
		b.tallies[dest] = t
	case h.State == store.DestinationHealthy && h.Gen != t.gen:
		// The destination came back since (a probe, an operator): its
		// failures in a row start afresh, its recent error rate stays.
		t.consecutive, t.gen = 0, h.Gen
	}
	t.add(failed, err, now)
	consecutive, streak, rate, full, lastErr := t.consecutive, now.Sub(t.streak), t.rate(), t.n == breakerWindow, t.lastErr
	b.mu.Unlock()
	parkAfter := b.router.route(dest).policy.parkAfter()
	switch {
	case !failed && (h.State == store.DestinationParked || probe):
		b.move(ctx, store.DestinationMove{Destination: dest, To: store.DestinationHealthy,
			From: []store.DestinationState{store.DestinationFailing, store.DestinationParked}}, EventDestinationRecovered)
	case !failed && h.State == store.DestinationFailing && full && rate < 0.2:
		b.move(ctx, store.DestinationMove{Destination: dest, To: store.DestinationHealthy,
			From: []store.DestinationState{store.DestinationFailing}}, EventDestinationRecovered)
	case failed && h.State != store.DestinationParked && consecutive >= parkAfter && streak >= ParkStreak:
		b.move(ctx, store.DestinationMove{Destination: dest, To: store.DestinationParked, Failures: consecutive, LastError: lastErr,
			From:  []store.DestinationState{store.DestinationHealthy, store.DestinationFailing},
			Probe: b.router.route(dest).policy.probe()}, EventDestinationParked)
	case failed && h.State == store.DestinationHealthy && (consecutive >= FailingAfter || full && rate >= 0.5):
		b.move(ctx, store.DestinationMove{Destination: dest, To: store.DestinationFailing, Failures: consecutive, LastError: lastErr,
			From: []store.DestinationState{store.DestinationHealthy}}, EventDestinationFailing)
	}
}

// move makes m in the store with its operator event, and keeps the row.
func (b *breaker) move(ctx context.Context, m store.DestinationMove, event string) {
	ctx = context.WithoutCancel(ctx)
	m.Event = func(h store.DestinationHealth) *store.ForwardArgs { return b.event(event, h, nil) }
	h, moved, released, err := b.hs.MoveDestination(ctx, m)
	if err != nil {
		b.log.WarnContext(ctx, "forward: moving a destination", slog.String("destination", m.Destination),
			slog.String("to", string(m.To)), slog.Any("error", err))
		return
	}
	b.set(h)
	if !moved {
		return
	}
	level := slog.LevelWarn
	if m.To == store.DestinationHealthy {
		level = slog.LevelInfo
	}
	b.log.Log(ctx, level, "forward: destination "+string(m.To), slog.String("destination", m.Destination),
		slog.Int("failures", m.Failures), slog.String("last_error", store.LastErrorLine(m.LastError)),
		slog.Int("released", released))
	if b.moved != nil {
		b.moved(m.Destination, m.To)
	}
}

// event is the operator event typ about h (and, for message.exhausted,
// about job), as a job to the operations destination; nil without one.
func (b *breaker) event(typ string, h store.DestinationHealth, job *river.Job[store.ForwardArgs]) *store.ForwardArgs {
	return operatorEvent(b.router, b.ops, typ, h, job)
}

// OperatorEvent is the operator event typ (destination.recovered...)
// about h, as a job to the operations destination ops with its
// fingerprint; nil when ops is "". For "paylock forward resume", whose
// move is an operator's.
func (r *Router) OperatorEvent(ops, typ string, h store.DestinationHealth) *store.ForwardArgs {
	return operatorEvent(r, ops, typ, h, nil)
}

func operatorEvent(r *Router, ops, typ string, h store.DestinationHealth, job *river.Job[store.ForwardArgs]) *store.ForwardArgs {
	if ops == "" {
		return nil
	}
	op := &store.ForwardedOperatorEvent{Destination: h.Destination, State: string(h.State), Since: h.Since.UTC(),
		Failures: h.Failures, LastError: h.LastError}
	id := fmt.Sprintf("%s:%s:%d", typ, h.Destination, h.Gen)
	if job != nil {
		a := job.Args
		op.State = ""
		op.Since = time.Time{}
		op.JobID, op.MessageID, op.MessageType, op.Attempts = job.ID, a.ID, a.Type, job.Attempt
		op.Source, op.TransactionID = a.Source, a.TransactionID
		id = fmt.Sprintf("%s:%d:%d", typ, job.ID, job.Attempt)
	}
	return &store.ForwardArgs{ID: store.OperatorEventID(id), Type: typ, Destination: ops,
		Fingerprint: r.Fingerprint(ops), Operator: op}
}

// exhausted reports a job given up (its last attempt failed, or its
// destination refused it for good) to the operations destination. An
// operator event is not reported again.
func (b *breaker) exhausted(ctx context.Context, job *river.Job[store.ForwardArgs], err error) {
	if isOperatorEvent(job.Args.Type) {
		return
	}
	ev := b.event(EventMessageExhausted, store.DestinationHealth{Destination: job.Args.Destination}, job)
	if ev == nil {
		return
	}
	if err != nil {
		ev.Operator.LastError = store.LastErrorLine(err.Error())
	}
	if e := b.hs.EnqueueForward(context.WithoutCancel(ctx), *ev, 0); e != nil {
		b.log.ErrorContext(ctx, "forward: reporting an exhausted message", slog.Int64("job_id", job.ID), slog.Any("error", e))
	}
}

func isOperatorEvent(typ string) bool {
	switch typ {
	case EventDestinationFailing, EventDestinationParked, EventDestinationRecovered, EventMessageExhausted:
		return true
	}
	return false
}
