package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paylock/paylock/internal/pace"
	"github.com/paylock/paylock/internal/ratelog"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// Store is what the worker needs from the store package; *store.Payments
// satisfies it.
type Store interface {
	Payment(ctx context.Context, source, transactionID string) (store.Payment, error)
	// ForwardsBefore says what precedes a forward of a payment to its
	// destination: earlier versions unfinished, or given up (ordering,
	// order.go).
	ForwardsBefore(ctx context.Context, jobID int64, a store.ForwardArgs) (store.EarlierForwards, error)
}

// capped is a Store whose reads in flight at once are at most cap(sem)
// (Config.Reads).
type capped struct {
	Store
	sem chan struct{}
}

func (c capped) Payment(ctx context.Context, source, transactionID string) (store.Payment, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return store.Payment{}, context.Cause(ctx)
	}
	defer func() { <-c.sem }()
	return c.Store.Payment(ctx, source, transactionID)
}

func (c capped) ForwardsBefore(ctx context.Context, jobID int64, a store.ForwardArgs) (store.EarlierForwards, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return store.EarlierForwards{}, context.Cause(ctx)
	}
	defer func() { <-c.sem }()
	return c.Store.ForwardsBefore(ctx, jobID, a)
}

// Config tunes a Worker. Zero values take the defaults noted.
type Config struct {
	// Secret signs every forward (Standard Webhooks): the first of
	// PAYLOCK_FORWARD_SECRETS. Required when a destination takes signed
	// messages only, an http(s) one (NeedsSignature: its sink's
	// Capabilities.Signs); without it, messages go unsigned to the others,
	// brokers.
	Secret signature.Secret
	// OtherSecrets are the rest of PAYLOCK_FORWARD_SECRETS, in order: each
	// adds its own v1 entry to webhook-signature after Secret's, so a
	// receiver still holding an older secret accepts forwards during a
	// rotation. Ignored without Secret.
	OtherSecrets []signature.Secret
	// Destinations are the forward destinations, by name (see
	// Destinations); each is opened once, by New, with its URL's sink.
	Destinations Destinations
	// Policies are the destinations' routing and delivery settings, by
	// name (a destination without one takes the zero Policy): its own
	// secrets, headers, timeout and retry schedule, and its fingerprint
	// (routing.go). Every name must be one of Destinations'.
	Policies map[string]Policy
	// Mismatch, when set, is called (for metrics) each time a job is left
	// to another replica because its destination's fingerprint is not
	// this worker's (paylock_forward_destination_mismatch_total). It
	// must be quick and safe for concurrent use.
	Mismatch    func(destination string)
	Timeout     time.Duration // one delivery, answer included; default 10s
	Concurrency int           // forwards in flight at once; default DefaultConcurrency
	// Reads, when positive and below Concurrency, caps the payment reads
	// (Store.Payment) in flight at once: the workers share the database
	// pool with the webhook intake, and when the database slows down,
	// Concurrency workers reading at once could hold every connection the
	// intake needs. 0: no cap beyond Concurrency.
	Reads int
	// RescueAfter is how long a forward job may stay running before River
	// takes its worker for dead and runs it again; it must exceed an
	// attempt's bound (AttemptTimeout). Default 2×AttemptTimeout.
	RescueAfter time.Duration
	// Backoff, when set, is the wait after failed attempt n (1 for the
	// first); nil leaves it to River's client retry policy.
	Backoff func(attempt int) time.Duration
	// TLS, when set, configures the sinks' TLS connections (SinkConfig.TLS).
	TLS    *tls.Config
	Logger *slog.Logger // default slog.Default()
	// Observe, when set, is called synchronously after each attempt (for
	// metrics). It must be quick and safe for concurrent use.
	Observe func(Event)
	// Unsigned, when set, lists the members of a source's stored payload
	// that its signature did not cover (provider.PartlySigned); a
	// payment.recorded forward names them in data.unauthenticated.
	Unsigned func(source string, payload []byte) []string
	// Verified, when set, returns a source's stored payload as a forward
	// carries it: the verified content only, without the provider's
	// signature material (provider.SignatureBearer: Adyen's
	// additionalData.hmacSignature). Nil forwards payloads as stored.
	Verified func(source string, payload []byte) []byte
	// TracerProvider makes each attempt's span (trace.go); nil: the
	// global provider (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
	// Health, when set, keeps the destinations' health (breaker.go): a
	// destination whose attempts keep failing is parked, its jobs kept
	// waiting without spending attempts until a probe succeeds. Nil: no
	// breaker (every job is tried on its schedule).
	Health HealthStore
	// Operations, when set, is the destination (one of Destinations) that
	// receives the operator events: destination.failing,
	// destination.parked, destination.recovered, message.exhausted.
	Operations string
	// Moved, when set, is called each time this worker moves a
	// destination to another state (for metrics). It must be quick and
	// safe for concurrent use.
	Moved func(destination string, to store.DestinationState)
	// Propagator writes the attempt's trace context into the message's
	// headers (traceparent); nil: the global propagator
	// (otel.GetTextMapPropagator).
	Propagator propagation.TextMapPropagator
	// Pacer, when set, enforces each destination's Policy.Concurrency and
	// Policy.Rate across every replica sharing it (*lock.Pacer, on the
	// lock's Redis); nil: each replica paces on its own. When it cannot
	// answer, this replica paces on its own until it can, and
	// PaceFallback (when set, for metrics) is called.
	Pacer        Pacer
	PaceFallback func(destination string)
}

// Pacer shares destinations' limits among the replicas: Acquire takes a
// place for one delivery to name (one of concurrency places, leased for
// lease; one of rate starts per second), or says how long to wait.
// *lock.Pacer satisfies it.
type Pacer interface {
	Acquire(ctx context.Context, name string, concurrency int, rate float64, lease time.Duration) (release func(), wait time.Duration, err error)
}

// DefaultConcurrency is Config.Concurrency's default, and FetchCooldown
// the forward queue's least wait between two fetches of due jobs. River
// fetches at most MaxWorkers jobs per cooldown, so MaxWorkers/FetchCooldown
// caps the drain rate: with River's default cooldown, 100ms, 10 workers
// drained about 100 forwards/s whatever the intake; at 10ms, 10 workers
// still fell behind a replica at full speed (issue #20; make bench's forward
// lag rows). DefaultConcurrency is a ceiling, not a constant load: forwards
// in flight are the intake times a forward's latency.
const (
	DefaultConcurrency = 64
	FetchCooldown      = 10 * time.Millisecond
)

// AttemptTimeout bounds one attempt: reading the payment and one delivery.
func (c Config) AttemptTimeout() time.Duration { return c.Timeout + 5*time.Second }

// Outcome is what one attempt came to.
type Outcome string

// The outcomes reported to Config.Observe.
const (
	OutcomeDelivered     Outcome = "delivered"      // the destination took it (2xx, an ack): the job is done
	OutcomeFailedAttempt Outcome = "failed_attempt" // anything else: River runs the job again later
	OutcomeDiscarded     Outcome = "discarded"      // the last attempt failed (River discards the job), the destination refused it for good, or the payment is gone (cancelled)
)

// Event reports one attempt. It holds no payload, no URL and no secret.
type Event struct {
	Outcome     Outcome
	JobID       int64
	Attempt     int
	Type        string // payment.recorded, disbursement.<status>
	WebhookID   string
	Destination string // the destination's name; LegacyDestination for an older job's own URL
	Status      int    // the destination's refusal (an HTTP status); 0 when none came
	Duration    time.Duration
	// Lag, for a delivered attempt, is the time from the job's creation
	// (River's created_at, set in the transaction that recorded its event)
	// to the destination's success.
	Lag time.Duration
	Err error
}

// Worker forwards events: the River worker of store.ForwardArgs jobs.
type Worker struct {
	river.WorkerDefaults[store.ForwardArgs]

	cfg   Config
	st    Store
	log   *slog.Logger
	sinks *sinkSet
	// router holds each destination's policy and fingerprint.
	router *Router
	// limits hold the destinations' Concurrency and Rate, by name; a
	// destination without either has none.
	limits map[string]*pace.Local
	// paceLog bounds the pacer fallback's log lines (pace).
	paceLog *ratelog.Limiter
	// tracer and prop trace attempts (trace.go).
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	// untraced: the TracerProvider is a no-op one (tracing off), so an
	// attempt's span is not even started (startAttempt).
	untraced bool
	// signer signs with the worker's own secrets (PAYLOCK_FORWARD_SECRETS);
	// nil when it has none. A destination with its own has its route's.
	signer *signature.StandardSigner
	// breaker keeps the destinations' health; nil without Config.Health.
	breaker *breaker
	// retryAt holds, from Work to NextRetry, when a job whose destination
	// asked for a delay (DeliveryError.RetryAfter) is due again.
	retryAt sync.Map // job id → time.Time
}

// ErrConfig means a Worker's configuration is unusable.
var ErrConfig = errors.New("forward: invalid configuration")

// New validates cfg, opens a sink for each of cfg.Destinations and returns
// a worker; Close closes the sinks. Its errors wrap ErrConfig and name the
// bad setting.
func New(cfg Config, st Store) (*Worker, error) {
	if err := checkSigning(cfg.Secret, cfg.OtherSecrets, cfg.Destinations, cfg.Policies); err != nil {
		return nil, err
	}
	router, err := NewRouter(cfg.Destinations, cfg.Policies, signs(cfg.Secret))
	if err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	// An attempt's bound (AttemptTimeout) is the longest destination's.
	base := cfg.Timeout
	for _, p := range cfg.Policies {
		cfg.Timeout = max(cfg.Timeout, p.Timeout)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.RescueAfter <= 0 {
		cfg.RescueAfter = 2 * cfg.AttemptTimeout()
	}
	if cfg.RescueAfter <= cfg.AttemptTimeout() {
		return nil, fmt.Errorf("%w: RescueAfter %v must exceed an attempt's bound %v (PAYLOCK_FORWARD_TIMEOUT plus 5s)", ErrConfig, cfg.RescueAfter, cfg.AttemptTimeout())
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	sinks, err := openSinks(cfg.Destinations, cfg.Policies, SinkConfig{Timeout: base, TLS: cfg.TLS, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	sinks.signed = signs(cfg.Secret)
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.Propagator == nil {
		cfg.Propagator = otel.GetTextMapPropagator()
	}
	if cfg.Reads > 0 && cfg.Reads < cfg.Concurrency {
		st = capped{Store: st, sem: make(chan struct{}, cfg.Reads)}
	}
	limits := map[string]*pace.Local{}
	for name, p := range cfg.Policies {
		if l := pace.NewLocal(p.Concurrency, p.Rate); l != nil {
			limits[name] = l
		}
	}
	if cfg.Operations != "" {
		if err := router.Check([]string{cfg.Operations}); err != nil {
			sinks.close()
			return nil, fmt.Errorf("%w: the operations destination: %w", ErrConfig, err)
		}
	}
	w := &Worker{cfg: cfg, st: st, log: cfg.Logger, sinks: sinks, router: router, limits: limits, paceLog: ratelog.New(paceLogEvery, 1),
		tracer: cfg.TracerProvider.Tracer(tracerName), prop: cfg.Propagator}
	_, w.untraced = cfg.TracerProvider.(noop.TracerProvider)
	if signs(cfg.Secret) {
		if w.signer, err = signature.NewStandardSigner(append([]signature.Secret{cfg.Secret}, cfg.OtherSecrets...)); err != nil {
			sinks.close()
			return nil, fmt.Errorf("%w: PAYLOCK_FORWARD_SECRETS: %w", ErrConfig, err)
		}
	}
	if cfg.Health != nil {
		w.breaker = newBreaker(cfg.Health, router, cfg.Operations, cfg.Moved, cfg.Logger)
		w.breaker.start()
	} else if cfg.Operations != "" {
		sinks.close()
		return nil, fmt.Errorf("%w: an operations destination needs the destinations' health (Config.Health)", ErrConfig)
	}
	return w, nil
}

// DestinationStates returns each destination's health as this worker last
// read it (every second): healthy, failing or parked. Without a breaker
// (Config.Health), every destination is healthy.
func (w *Worker) DestinationStates() map[string]store.DestinationState {
	if w.breaker == nil {
		out := map[string]store.DestinationState{}
		for _, name := range w.router.names() {
			out[name] = store.DestinationHealthy
		}
		return out
	}
	return w.breaker.states()
}

// checkSecret turns signature.Sign's panic on a secret not parsed for the
// Standard scheme into a start-up error, once.
func checkSecret(secret signature.Secret, nth string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: PAYLOCK_FORWARD_SECRETS: the %s secret is not a Standard Webhooks (whsec_) secret", ErrConfig, nth)
		}
	}()
	signature.Sign(signature.SchemeStandard, secret, "probe", time.Unix(0, 0), nil)
	return nil
}

// Close closes the worker's sinks. Call it once River has stopped working
// the forward queue.
func (w *Worker) Close() error {
	if w.breaker != nil {
		w.breaker.close()
	}
	return w.sinks.close()
}

// AddTo registers the worker in rcfg and adds the forward queue with
// Concurrency workers, so that one River client per process works the
// forward queue beside others (the payout queue). It raises rcfg's
// JobTimeout and RescueStuckJobsAfter to at least the worker's bounds.
func (w *Worker) AddTo(rcfg *river.Config) error {
	q := store.JobQueue{Name: store.ForwardQueue, MaxWorkers: w.cfg.Concurrency, FetchCooldown: FetchCooldown,
		JobTimeout: w.cfg.AttemptTimeout(), RescueAfter: w.cfg.RescueAfter}
	if err := store.AddJobWorker(rcfg, w, q); err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	return nil
}

// Timeout bounds an attempt: see Config.AttemptTimeout.
func (w *Worker) Timeout(*river.Job[store.ForwardArgs]) time.Duration { return w.cfg.AttemptTimeout() }

// NextRetry is when River runs a job again after a failed attempt: after
// its destination's retry schedule (Policy.Retry, the last step
// repeating), or else Config.Backoff; or the destination's RetryAfter when
// later; the zero time (River's policy) when none applies.
func (w *Worker) NextRetry(job *river.Job[store.ForwardArgs]) time.Time {
	var at time.Time
	if rt := w.router.route(job.Args.Destination); rt != nil && len(rt.policy.Retry) > 0 {
		steps := rt.policy.Retry
		at = time.Now().Add(steps[min(max(job.Attempt, 1), len(steps))-1])
	} else if w.cfg.Backoff != nil {
		at = time.Now().Add(w.cfg.Backoff(job.Attempt))
	}
	if ra, ok := w.retryAt.LoadAndDelete(job.ID); ok {
		if t := ra.(time.Time); t.After(at) {
			at = t
		}
	}
	return at
}

// Work makes one attempt: it builds the message (reading the payment for
// payment.recorded) and hands it to the sink of the job's destination. nil
// means delivered; a refusal for good, or a subject that is gone, cancels
// the job. The attempt is a span (trace.go) whose trace context the
// message carries in its headers.
//
// Before that, a payment's message waits for the earlier versions of the
// same payment to the same destination (inOrder, order.go): it is snoozed
// (no attempt spent) while one is unfinished, and held (cancelled, as
// given up) when one was given up.
func (w *Worker) Work(ctx context.Context, job *river.Job[store.ForwardArgs]) error {
	a := job.Args
	if refused := store.JobExpressRefusal(job.Metadata); refused != "" {
		return w.refusedInLane(ctx, job, refused)
	}
	if err := w.agrees(ctx, job); err != nil {
		return err
	}
	probe, err := w.admit(ctx, job)
	if err != nil {
		return err
	}
	if err := w.inOrder(ctx, job); err != nil {
		return err
	}
	release, wait := w.pace(ctx, a.Destination)
	if release == nil {
		return river.JobSnooze(wait)
	}
	defer release()
	if probe {
		// The parked destination's probe, now that nothing else holds it
		// back: one replica sends it, and no other probe is claimed while
		// it runs.
		if err := w.breaker.consume(ctx, job); err != nil {
			return w.healthUnknown(ctx, job, err)
		}
	}
	ctx, span := w.startAttempt(ctx, a, job.Attempt)
	ev := Event{JobID: job.ID, Attempt: job.Attempt, Type: a.Type, WebhookID: a.ID, Destination: a.Destination}
	defer func() { endAttempt(span, ev) }()
	m, err := w.message(ctx, a, time.Now())
	if errors.Is(err, store.ErrNotFound) {
		ev.Outcome, ev.Err = OutcomeDiscarded, err
		w.done(ctx, a, ev)
		return river.JobCancel(err)
	}
	if err == nil {
		w.injectTrace(ctx, &m)
		err = w.deliver(ctx, job, m, &ev)
		if w.breaker != nil {
			w.breaker.observe(ctx, a.Destination, err, probe)
		}
	}
	ev.Err = err
	switch {
	case err == nil:
		ev.Outcome = OutcomeDelivered
		ev.Lag = time.Since(job.CreatedAt)
	case errors.Is(err, ErrPermanent):
		ev.Outcome = OutcomeDiscarded
		w.done(ctx, a, ev)
		if w.breaker != nil {
			w.breaker.exhausted(ctx, job, err)
		}
		return river.JobCancel(err)
	case probe:
		// A failed probe spends no attempt: the destination is still
		// parked, and its oldest message must not run out of attempts
		// while it is.
		ev.Outcome = OutcomeFailedAttempt
		w.done(ctx, a, ev)
		return parkedWait()
	case job.Attempt >= job.MaxAttempts:
		ev.Outcome = OutcomeDiscarded
		if w.breaker != nil {
			w.breaker.exhausted(ctx, job, err)
		}
	default:
		ev.Outcome = OutcomeFailedAttempt
	}
	w.done(ctx, a, ev)
	return err
}

// refusedInLane gives up job, whose attempt in the express lane its
// destination refused for good, as River would have given it up after
// that attempt: without sending it again (express.go).
func (w *Worker) refusedInLane(ctx context.Context, job *river.Job[store.ForwardArgs], refused string) error {
	a := job.Args
	err := fmt.Errorf("%w: %s", ErrPermanent, refused)
	w.done(ctx, a, Event{JobID: job.ID, Attempt: job.Attempt, Type: a.Type, WebhookID: a.ID, Destination: a.Target(),
		Outcome: OutcomeDiscarded, Err: err})
	if w.breaker != nil {
		w.breaker.exhausted(ctx, job, err)
	}
	return river.JobCancel(err)
}

// pace takes a place for one delivery to dest under its concurrency and
// rate (Policy): across the replicas through Config.Pacer, or in this
// replica alone without one, or while the pacer cannot answer (logged at
// most every paceLogEvery per destination, and counted). It returns the
// function that gives the place back, or how long to wait.
func (w *Worker) pace(ctx context.Context, dest string) (release func(), wait time.Duration) {
	l := w.limits[dest]
	if l == nil || w.cfg.Pacer == nil {
		return l.Admit(time.Now())
	}
	p := w.router.route(dest).policy
	release, wait, err := w.cfg.Pacer.Acquire(ctx, dest, p.Concurrency, p.Rate, w.cfg.AttemptTimeout())
	if err == nil {
		return release, wait
	}
	if w.cfg.PaceFallback != nil {
		w.cfg.PaceFallback(dest)
	}
	if ok, suppressed := w.paceLog.Allow(dest); ok {
		w.log.WarnContext(ctx, "forward: the destination's limits are paced by this replica alone: the shared pacer cannot answer",
			slog.String("destination", dest), slog.Int("suppressed", suppressed), slog.Any("error", err))
	}
	return l.Admit(time.Now())
}

// paceLogEvery bounds how often a destination's pacer fallback is logged.
const paceLogEvery = 30 * time.Second

// admit asks the breaker whether job may be sent now (breaker.admit): a
// job of a parked destination is snoozed unless it is a probe candidate
// (probe), which Work makes the probe (breaker.consume) just before it
// is sent. When the
// store cannot say, the job waits a little (a snooze) rather than spend an
// attempt.
func (w *Worker) admit(ctx context.Context, job *river.Job[store.ForwardArgs]) (probe bool, err error) {
	if w.breaker == nil {
		return false, nil
	}
	probe, err = w.breaker.admit(ctx, job)
	if err != nil {
		return false, w.healthUnknown(ctx, job, err)
	}
	return probe, nil
}

// healthUnknown passes a snooze on; any other error (the store could not
// say) makes the job wait a little rather than spend an attempt.
func (w *Worker) healthUnknown(ctx context.Context, job *river.Job[store.ForwardArgs], err error) error {
	var snooze *river.JobSnoozeError
	if errors.As(err, &snooze) {
		return err
	}
	w.log.WarnContext(ctx, "forward: the destination's health is unknown; the job waits", slog.Int64("job_id", job.ID),
		slog.String("destination", job.Args.Destination), slog.Any("error", err))
	return river.JobSnooze(breakerRefresh + rand.N(breakerRefresh))
}

// deliver hands m to the sink of the job's destination, and notes in ev
// (and for NextRetry) what a refusal said.
func (w *Worker) deliver(ctx context.Context, job *river.Job[store.ForwardArgs], m Message, ev *Event) error {
	sink, name, err := w.sinks.resolve(job.Args)
	ev.Destination = name
	if err != nil {
		return err
	}
	start := time.Now()
	err = sink.Deliver(ctx, m)
	ev.Duration = time.Since(start)
	var de *DeliveryError
	if errors.As(err, &de) {
		ev.Status = de.Status
		if de.RetryAfter > 0 {
			w.retryAt.Store(job.ID, time.Now().Add(min(de.RetryAfter, MaxRetryAfter)))
		}
	}
	return err
}

// done logs an attempt (never the payload, the URL or the secret) and
// reports it.
func (w *Worker) done(ctx context.Context, a store.ForwardArgs, ev Event) {
	// A delivered attempt logs at debug (PAYLOCK_LOG_LEVEL=debug): it is
	// counted (paylock_forward_total{outcome}) and traced, and a line per
	// message sent would cost a busy replica more than the send's own
	// bookkeeping; a failed attempt warns, a message given up is an error.
	level := slog.LevelDebug
	switch ev.Outcome {
	case OutcomeFailedAttempt:
		level = slog.LevelWarn
	case OutcomeDiscarded:
		level = slog.LevelError
	}
	if w.log.Enabled(ctx, level) {
		w.logAttempt(ctx, level, a, ev)
	}
	if w.cfg.Observe != nil {
		w.cfg.Observe(ev)
	}
}

// logAttempt logs an attempt's outcome ("forward attempt").
func (w *Worker) logAttempt(ctx context.Context, level slog.Level, a store.ForwardArgs, ev Event) {
	attrs := []slog.Attr{
		slog.String("outcome", string(ev.Outcome)),
		slog.Int64("job_id", ev.JobID),
		slog.Int("attempt", ev.Attempt),
		slog.String("type", ev.Type),
		slog.String("webhook_id", ev.WebhookID),
		slog.String("destination", ev.Destination),
		slog.Duration("duration", ev.Duration),
	}
	if a.TransactionID != "" {
		attrs = append(attrs, slog.String("source", a.Source), slog.String("transaction_id", a.TransactionID))
	}
	if a.Disbursement != nil {
		attrs = append(attrs, slog.String("loan_id", a.Disbursement.LoanID), slog.Int("tranche", a.Disbursement.Tranche))
	}
	if ev.Status != 0 {
		attrs = append(attrs, slog.Int("status", ev.Status))
	}
	if ev.Err != nil {
		attrs = append(attrs, slog.String("error", ev.Err.Error()))
	}
	w.log.LogAttrs(ctx, level, "forward attempt", attrs...)
}

// mismatchSnooze is how long a job whose destination this worker defines
// otherwise waits before it is offered again (to any replica).
const mismatchSnooze = 30 * time.Second

// agrees returns nil when this worker may send job: it carries no
// fingerprint (a job of an older paylock), or its destination's
// fingerprint is this worker's. Otherwise the job is snoozed, without an
// attempt, for a replica that agrees: it is never sent elsewhere. The
// mismatch is logged and counted (Config.Mismatch).
func (w *Worker) agrees(ctx context.Context, job *river.Job[store.ForwardArgs]) error {
	a := job.Args
	if a.Fingerprint == "" {
		return nil
	}
	mine := w.router.Fingerprint(a.Destination)
	if mine == a.Fingerprint {
		return nil
	}
	why := "this replica defines the destination otherwise"
	if mine == "" {
		why = "this replica has no such destination"
	}
	w.log.WarnContext(ctx, "forward left to another replica: destination mismatch", slog.Int64("job_id", job.ID),
		slog.String("webhook_id", a.ID), slog.String("destination", a.Destination), slog.String("reason", why),
		slog.String("job_fingerprint", a.Fingerprint), slog.String("fingerprint", mine))
	if w.cfg.Mismatch != nil {
		w.cfg.Mismatch(a.Destination)
	}
	return river.JobSnooze(mismatchSnooze + rand.N(mismatchSnooze/4))
}
