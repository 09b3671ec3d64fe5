package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylock/paylock/internal/ratelog"
	"github.com/paylock/paylock/store"
)

// ExpressStore is the outbox's express lane (store.Outbox's
// ClaimExpress and the rest; see the store's outbox_express.go): the
// messages that start there rather than as River jobs.
type ExpressStore interface {
	ClaimExpress(ctx context.Context, limit int, lease time.Duration, done []int64) ([]store.ExpressMessage, error)
	DoneExpress(ctx context.Context, ids []int64) error
	HandOverExpress(ctx context.Context, hs []store.ExpressHandover) error
	ReleaseExpress(ctx context.Context, ids []int64, after time.Duration) error
	PurgeExpressSent(ctx context.Context) (int64, error)
	VacuumExpress(ctx context.Context) error
	TakeExpress(lease time.Duration, take func([]store.ExpressMessage))
}

// The express drainer's settings.
const (
	// expressPoll is the wait before claiming again when the lane was
	// empty: a message's least lag when the lane is idle.
	expressPoll = 20 * time.Millisecond
	// expressGather is the wait after a claim that found fewer rows than
	// a quarter of the places free.
	expressGather = 10 * time.Millisecond
	// expressFlush bounds how long a sent message waits for the statement
	// that deletes it (or hands it over) with the rest of its batch.
	expressFlush = 20 * time.Millisecond
	// expressRetry is the wait after the store failed to answer.
	expressRetry = time.Second
	// expressCall bounds each of the drainer's statements: an answer lost
	// on the way (a dropped connection, a proxy) must not hold it for
	// good. A claim that timed out leaves its rows leased: they come back
	// when the lease runs out.
	expressCall = 5 * time.Second
	// expressPurgeEvery is how often a drainer deletes what forward_sent
	// keeps beyond its retention (store.PurgeExpressSent).
	expressPurgeEvery = 10 * time.Minute
	// expressVacuumEvery is how often a drainer vacuums the lane
	// (store.VacuumExpress) once it deleted at least expressVacuumRows
	// rows since the last time: its claims then step over a few seconds'
	// deleted rows, not the minute's that autovacuum leaves.
	expressVacuumEvery = 2 * time.Second
	expressVacuumRows  = 256
	// expressVacuumTimeout bounds a vacuum: a lane that grew under a
	// backlog takes longer than a claim.
	expressVacuumTimeout = time.Minute
)

// RunExpress drains the express lane of es until ctx is done, then waits
// for the messages in flight and settles them; it returns nil then. It
// claims the lane's oldest messages in batches (at most Concurrency in
// flight), sends each once through its destination's sink, deletes those
// delivered in one statement per batch, and hands every other one over
// to River (a forward job), where the worker's Work takes it on:
//
//   - a message whose attempt failed (its job is due after the
//     destination's first retry step, or its Retry-After), with one
//     attempt fewer;
//   - at once, without an attempt: a message whose destination is not
//     healthy (the breaker's failing or parked), whose payment has an
//     earlier message to the destination in River not completed (order),
//     whose destination this worker defines otherwise (its fingerprint:
//     River leaves it to a replica that agrees), or whose payment is gone.
//
// A message its destination's limits hold back (Policy.Concurrency and
// Rate) is given back to the lane for the wait. While it runs, the
// drainer takes the rows that its own process's recording statements
// insert at birth (store.Outbox.TakeExpress, when es is the recording
// store's outbox): they are claimed by the statement that inserts them,
// and sent from memory without a claim; those it has no room for, or
// that waited half their lease for a place, it gives back to the lane,
// as it does all it holds when it stops. A drainer that dies
// leaves its claimed messages to the others once their lease
// (RescueAfter) runs out: they may then be sent twice, never lost. Run
// it in each process that works River's forward queue (AddTo), with the
// store's ExpressForwards on.
func (w *Worker) RunExpress(ctx context.Context, es ExpressStore) error {
	d := &drainer{w: w, es: es, slots: make(chan struct{}, w.cfg.Concurrency), freed: make(chan struct{}, 1),
		work: make(chan expressWork), log: ratelog.New(30*time.Second, 1), kick: make(chan struct{}, 1),
		stopped: make(chan struct{}), settled: make(chan struct{})}
	// A fixed set of senders, one per place, whose stacks stay grown.
	var senders sync.WaitGroup
	for range w.cfg.Concurrency {
		senders.Go(func() {
			for wk := range d.work {
				n := 1
				if wk.batch != nil {
					d.sendBatch(context.WithoutCancel(ctx), wk.sink, wk.batch)
					for _, r := range wk.releases {
						r()
					}
					n = len(wk.batch)
				} else {
					d.send(context.WithoutCancel(ctx), wk.m)
					wk.release()
				}
				for range n {
					<-d.slots
				}
				select {
				case d.freed <- struct{}{}:
				default:
				}
			}
		})
	}
	go d.settleLoop()
	vacuumed, born := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(vacuumed)
		d.vacuumLoop(ctx)
	}()
	d.births = make(chan birth, 4*w.cfg.Concurrency)
	es.TakeExpress(w.cfg.RescueAfter, d.take)
	go func() {
		defer close(born)
		d.birthLoop(ctx)
	}()
	d.claimLoop(ctx)
	es.TakeExpress(0, nil)
	<-born
	d.giveBackBirths()
	<-vacuumed
	close(d.work)
	senders.Wait()
	close(d.stopped)
	<-d.settled
	return nil
}

// expressWork is a message for a sender, with its destination's place
// (pace) to give back.
type expressWork struct {
	m       store.ExpressMessage
	release func()
	// batch, when set, are the messages of one BatchSink delivery (m and
	// release are then unused; each holds a place and its release).
	batch    []store.ExpressMessage
	releases []func()
	sink     BatchSink
}

// drainer is one RunExpress.
type drainer struct {
	w  *Worker
	es ExpressStore
	// slots holds a place per message in flight; freed signals a place
	// given back; work hands a message to a sender.
	slots chan struct{}
	freed chan struct{}
	work  chan expressWork
	log   *ratelog.Limiter

	// The results waiting to be settled: done, the delivered messages,
	// which the next claim deletes (or the last flush); over, the
	// messages to hand over to River (settleLoop). kick asks for a
	// flush, stopped ends settleLoop once it flushed, settled is closed
	// then.
	mu      sync.Mutex
	done    []int64
	over    []store.ExpressHandover
	kick    chan struct{}
	stopped chan struct{}
	settled chan struct{}
	// deleted counts the rows this drainer deleted (delivered, handed
	// over) since its last vacuum.
	deleted atomic.Int64

	// births are the messages this process's recordings claimed at
	// birth (take), for birthLoop; once birthsShut is set (under
	// birthsMu), take gives them back instead.
	births     chan birth
	birthsMu   sync.Mutex
	birthsShut bool
}

// birth is a message claimed at birth, with when the drainer took it.
type birth struct {
	m  store.ExpressMessage
	at time.Time
}

// vacuumLoop vacuums the lane every expressVacuumEvery once enough rows
// were deleted, until ctx is done.
func (d *drainer) vacuumLoop(ctx context.Context) {
	t := time.NewTicker(expressVacuumEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d.deleted.Load() < expressVacuumRows {
			continue
		}
		d.deleted.Store(0)
		vctx, cancel := context.WithTimeout(ctx, expressVacuumTimeout)
		err := d.es.VacuumExpress(vctx)
		cancel()
		switch {
		case errors.Is(err, store.ErrVacuumDenied):
			d.w.log.InfoContext(ctx, "forward: the express lane is left to autovacuum: this role may not vacuum it (run paylock as the role that ran the migrations for its own vacuums)",
				slog.Any("error", err))
			return
		case err != nil && ctx.Err() == nil:
			d.warn(ctx, "vacuum", err)
		}
	}
}

// claimLoop deletes the delivered messages and claims more, in one
// statement, and dispatches what it claimed, until ctx is done.
func (d *drainer) claimLoop(ctx context.Context) {
	lease := d.w.cfg.RescueAfter
	least := max(1, cap(d.slots)/4)
	purged := time.Now()
	for ctx.Err() == nil {
		if time.Since(purged) >= expressPurgeEvery {
			purged = time.Now()
			pctx, cancel := context.WithTimeout(ctx, expressCall)
			_, err := d.es.PurgeExpressSent(pctx)
			cancel()
			if err != nil {
				d.warn(ctx, "purge", err)
			}
		}
		free := cap(d.slots) - len(d.slots)
		done := d.takeDone()
		if free < least && len(d.slots) > 0 {
			if len(done) < least {
				d.putDone(done)
				select {
				case <-d.freed:
				case <-ctx.Done():
				case <-time.After(expressPoll):
				}
				continue
			}
			free = 0 // only the deletes
		}
		cctx, cancel := context.WithTimeout(ctx, expressCall)
		ms, err := d.es.ClaimExpress(cctx, free, lease, done)
		cancel()
		if err != nil {
			d.putDone(done)
			d.warn(ctx, "claim", err)
			sleep(ctx, expressRetry)
			continue
		}
		d.deleted.Add(int64(len(done)))
		d.dispatchAll(ctx, ms)
		switch {
		case free == 0:
		case len(ms) == 0:
			sleep(ctx, expressPoll)
		case len(ms) < least:
			// A short batch: the lane is nearly drained. Let the next
			// batch gather rather than spend a statement on each few rows.
			sleep(ctx, expressGather)
		}
	}
}

// dispatchAll dispatches ms, those of one destination whose sink takes
// batches in one delivery.
func (d *drainer) dispatchAll(ctx context.Context, ms []store.ExpressMessage) {
	batches := map[string]*expressWork{}
	for _, m := range ms {
		if wk := d.dispatch(ctx, m); wk != nil {
			if b := batches[m.Args.Destination]; b != nil {
				b.batch, b.releases = append(b.batch, wk.m), append(b.releases, wk.release)
			} else {
				batches[m.Args.Destination] = &expressWork{batch: []store.ExpressMessage{wk.m}, releases: []func(){wk.release}, sink: wk.sink}
			}
		}
	}
	for _, b := range batches {
		d.work <- *b
	}
}

// take is the drainer's store.Outbox.TakeExpress: the messages this
// process's recordings claimed at birth, queued for birthLoop without
// waiting; those the queue has no room for, or that come once the
// drainer stops, are given back to the lane for any drainer to claim.
func (d *drainer) take(ms []store.ExpressMessage) {
	now := time.Now()
	var back []int64
	d.birthsMu.Lock()
	for _, m := range ms {
		if d.birthsShut {
			back = append(back, m.ID)
			continue
		}
		select {
		case d.births <- birth{m: m, at: now}:
		default:
			back = append(back, m.ID)
		}
	}
	d.birthsMu.Unlock()
	if len(back) > 0 {
		go d.giveBack(back)
	}
}

// birthLoop dispatches the messages claimed at birth, until ctx is done:
// those waiting together at once (a broker's batch). One that waited
// for a place over half its lease is given back rather than sent: its
// lease may run out while it is sent, and another drainer send it too.
func (d *drainer) birthLoop(ctx context.Context) {
	stale := d.w.cfg.RescueAfter / 2
	var back []int64
	for {
		var b birth
		select {
		case b = <-d.births:
		case <-ctx.Done():
			return
		}
		ms := make([]store.ExpressMessage, 0, 1+len(d.births))
	gather:
		for {
			if time.Since(b.at) > stale {
				back = append(back, b.m.ID)
			} else {
				ms = append(ms, b.m)
			}
			select {
			case b = <-d.births:
			default:
				break gather
			}
		}
		if len(back) > 0 {
			d.giveBack(back)
			back = nil
		}
		d.dispatchAll(ctx, ms)
	}
}

// giveBackBirths gives back the messages claimed at birth that the
// drainer did not dispatch, once it stops, and those that come after.
func (d *drainer) giveBackBirths() {
	d.birthsMu.Lock()
	d.birthsShut = true
	d.birthsMu.Unlock()
	var back []int64
	for {
		select {
		case b := <-d.births:
			back = append(back, b.m.ID)
		default:
			if len(back) > 0 {
				d.giveBack(back)
			}
			return
		}
	}
}

// giveBack gives messages claimed at birth back to the lane, for any
// drainer to claim at once; one it fails to give back is claimed again
// once its lease runs out.
func (d *drainer) giveBack(ids []int64) {
	ctx, cancel := context.WithTimeout(context.Background(), expressCall)
	defer cancel()
	if err := d.es.ReleaseExpress(ctx, ids, 0); err != nil {
		d.warn(ctx, "give back", err)
	}
}

// dispatch hands m to a sender, or settles it at once; a message whose
// destination's sink takes batches (BatchSink) is returned instead, its
// place taken, for the claim's batch to that destination.
func (d *drainer) dispatch(ctx context.Context, m store.ExpressMessage) *expressWork {
	w, a := d.w, m.Args
	switch {
	case a.Fingerprint != "" && w.router.Fingerprint(a.Destination) != a.Fingerprint,
		w.breaker != nil && w.breaker.state(a.Destination).State != store.DestinationHealthy,
		m.Held:
		d.handOver(store.ExpressHandover{Message: m})
		return nil
	}
	release, wait := w.pace(ctx, a.Destination)
	if release == nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), expressCall)
		defer cancel()
		if err := d.es.ReleaseExpress(rctx, []int64{m.ID}, wait); err != nil {
			d.warn(ctx, "release", err)
		}
		return nil
	}
	d.slots <- struct{}{}
	if sink, _, err := w.sinks.resolve(a); err == nil {
		if bs, ok := sink.(BatchSink); ok {
			return &expressWork{m: m, release: release, sink: bs}
		}
	}
	d.work <- expressWork{m: m, release: release}
	return nil
}

// attempt is one message's attempt in the lane, between prepare and
// finish.
type attempt struct {
	m    store.ExpressMessage
	ctx  context.Context
	span trace.Span
	ev   Event
	msg  Message
	sink Sink
}

// send makes m's one attempt in the lane and notes its outcome.
func (d *drainer) send(ctx context.Context, m store.ExpressMessage) {
	ctx, cancel := context.WithTimeout(ctx, d.w.cfg.AttemptTimeout())
	defer cancel()
	at, err := d.prepare(ctx, m)
	if at == nil {
		return
	}
	if err == nil {
		start := time.Now()
		err = at.sink.Deliver(at.ctx, at.msg)
		at.ev.Duration = time.Since(start)
	}
	d.finish(at, err)
}

// sendBatch makes the attempts of ms, all to one destination whose sink
// takes a batch (BatchSink), in one DeliverBatch: a broker's publish of
// them all, each with its own outcome.
func (d *drainer) sendBatch(ctx context.Context, bs BatchSink, ms []store.ExpressMessage) {
	ctx, cancel := context.WithTimeout(ctx, d.w.cfg.AttemptTimeout())
	defer cancel()
	ats := make([]*attempt, 0, len(ms))
	msgs := make([]Message, 0, len(ms))
	for _, m := range ms {
		at, err := d.prepare(ctx, m)
		switch {
		case at == nil:
		case err != nil:
			d.finish(at, err)
		default:
			ats, msgs = append(ats, at), append(msgs, at.msg)
		}
	}
	if len(ats) == 0 {
		return
	}
	start := time.Now()
	errs := bs.DeliverBatch(ctx, msgs)
	took := time.Since(start)
	for i, at := range ats {
		at.ev.Duration = took
		var err error
		if i < len(errs) {
			err = errs[i]
		} else {
			err = fmt.Errorf("forward: the batch answered %d outcomes for %d messages", len(errs), len(msgs))
		}
		d.finish(at, err)
	}
}

// prepare starts m's attempt: its span, its message, its sink. A nil
// attempt means m was settled already (its payment is gone: handed over
// to River, which gives it up where every given-up job is seen); an
// error with an attempt, that it fails (finish it).
func (d *drainer) prepare(ctx context.Context, m store.ExpressMessage) (*attempt, error) {
	w, a := d.w, m.Args
	var opts []trace.SpanStartOption
	if len(m.Trace) > 0 {
		// As River's work span links to its job's delivery: a link, not a
		// parent (the attempt may come long after).
		from := propagation.TraceContext{}.Extract(context.Background(), m.Trace)
		if sc := trace.SpanContextFromContext(from); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	at := &attempt{m: m, ev: Event{Attempt: 1, Type: a.Type, WebhookID: a.ID, Destination: a.Destination}}
	at.ctx, at.span = w.startAttempt(ctx, a, 1, opts...)
	var msg Message
	var err error
	if m.Body != nil {
		msg = w.sealed(a, m.Body, time.Now()) // as its payment's recording rendered it
	} else {
		msg, err = w.message(at.ctx, a, time.Now())
	}
	if errors.Is(err, store.ErrNotFound) {
		at.ev.Outcome, at.ev.Err = OutcomeFailedAttempt, err
		endAttempt(at.span, at.ev)
		d.handOver(store.ExpressHandover{Message: m})
		return nil, nil
	}
	if err != nil {
		return at, err
	}
	w.injectTrace(at.ctx, &msg)
	at.msg = msg
	at.sink, at.ev.Destination, err = w.sinks.resolve(a)
	return at, err
}

// finish notes at's outcome, err: delivered (deleted by the next claim),
// or handed over to River.
func (d *drainer) finish(at *attempt, err error) {
	w, a, m := d.w, at.m.Args, at.m
	defer func() { endAttempt(at.span, at.ev) }()
	var retryAfter time.Duration
	var de *DeliveryError
	if errors.As(err, &de) {
		at.ev.Status, retryAfter = de.Status, de.RetryAfter
	}
	if w.breaker != nil && at.sink != nil {
		w.breaker.observe(at.ctx, a.Destination, err, false)
	}
	at.ev.Err = err
	if err == nil {
		at.ev.Outcome, at.ev.Lag = OutcomeDelivered, time.Since(m.CreatedAt)
		w.done(at.ctx, a, at.ev)
		d.delivered(m.ID)
		return
	}
	at.ev.Outcome = OutcomeFailedAttempt
	w.done(at.ctx, a, at.ev)
	h := store.ExpressHandover{Message: m, At: w.firstRetry(a.Destination, retryAfter), Attempted: true}
	if errors.Is(err, ErrPermanent) {
		// Its job gives it up at once, without sending it again (Work).
		h.At, h.Refused = time.Time{}, err.Error()
	}
	d.handOver(h)
}

// firstRetry is when a message whose first attempt failed is due again:
// after its destination's first retry step, or Config.Backoff(1), or
// River's default policy's (1s); or its RetryAfter when later.
func (w *Worker) firstRetry(dest string, retryAfter time.Duration) time.Time {
	now := time.Now()
	at := now.Add(time.Second)
	if rt := w.router.route(dest); rt != nil && len(rt.policy.Retry) > 0 {
		at = now.Add(rt.policy.Retry[0])
	} else if w.cfg.Backoff != nil {
		at = now.Add(w.cfg.Backoff(1))
	}
	if retryAfter > 0 {
		if t := now.Add(min(retryAfter, MaxRetryAfter)); t.After(at) {
			at = t
		}
	}
	return at
}

func (d *drainer) delivered(id int64) {
	d.mu.Lock()
	d.done = append(d.done, id)
	d.mu.Unlock()
}

// takeDone takes the delivered messages not yet deleted.
func (d *drainer) takeDone() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	done := d.done
	d.done = nil
	return done
}

// putDone puts back delivered messages whose delete failed.
func (d *drainer) putDone(done []int64) {
	d.mu.Lock()
	d.done = append(d.done, done...)
	d.mu.Unlock()
}

func (d *drainer) handOver(h store.ExpressHandover) {
	d.mu.Lock()
	d.over = append(d.over, h)
	d.mu.Unlock()
	d.flushSoon()
}

func (d *drainer) flushSoon() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// settleLoop hands the messages that were not delivered over to River,
// a transaction per flush, every expressFlush or when kicked, until the
// drainer stops; its last flush deletes the delivered messages too, and
// is tried until it succeeds or for a minute. A flush that fails is tried
// again: its messages stay claimed meanwhile, and a lease that runs out
// before it succeeds lets another drainer send them again.
func (d *drainer) settleLoop() {
	defer close(d.settled)
	tick := time.NewTicker(expressFlush)
	defer tick.Stop()
	ctx := context.Background()
	for {
		select {
		case <-tick.C:
		case <-d.kick:
		case <-d.stopped:
			deadline := time.Now().Add(time.Minute)
			for !d.flush(ctx, true) && time.Now().Before(deadline) {
				time.Sleep(expressRetry)
			}
			return
		}
		if !d.flush(ctx, false) {
			time.Sleep(expressRetry)
		}
	}
}

// flush settles what waits (the delivered messages too when last), and
// reports whether nothing is left.
func (d *drainer) flush(ctx context.Context, last bool) bool {
	d.mu.Lock()
	over := d.over
	d.over = nil
	d.mu.Unlock()
	var done []int64
	if last {
		done = d.takeDone()
	}
	if len(done) == 0 && len(over) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, expressCall)
	defer cancel()
	ok := true
	if err := d.es.DoneExpress(ctx, done); err != nil {
		d.warn(ctx, "complete", err)
		ok = false
		d.putDone(done)
	}
	if err := d.es.HandOverExpress(ctx, over); err != nil {
		d.warn(ctx, "hand over", err)
		ok = false
		d.mu.Lock()
		d.over = append(d.over, over...)
		d.mu.Unlock()
	}
	if ok {
		d.deleted.Add(int64(len(done) + len(over)))
	}
	return ok
}

// warn logs a failure of the store, at most every 30s per step.
func (d *drainer) warn(ctx context.Context, step string, err error) {
	if ok, suppressed := d.log.Allow(step); ok {
		d.w.log.WarnContext(ctx, "forward: the express lane's store failed; its messages wait (claimed ones until their lease runs out)",
			slog.String("step", step), slog.Int("suppressed", suppressed), slog.Any("error", err))
	}
}

// sleep waits for dur or until ctx is done.
func sleep(ctx context.Context, dur time.Duration) {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
