package payout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylock/paylock/store"
)

// Store is what the worker needs from the store package; *store.Disbursements
// satisfies it.
type Store interface {
	BeginAttempt(ctx context.Context, id int64) (store.Disbursement, error)
	MarkSent(ctx context.Context, id int64, providerRef string, status store.DisbursementStatus) error
	NoteRetry(ctx context.Context, id int64, delay time.Duration, lastErr string) error
	MarkFailed(ctx context.Context, id int64, lastErr string) error
	FlagForReview(ctx context.Context, id int64, reason string) error
}

// Config tunes a Worker. Zero values take the defaults noted.
type Config struct {
	ProviderURL string        // required: the provider's base URL (http or https)
	Timeout     time.Duration // one provider call; default 10s
	// RescueAfter is how long a payout job may stay running before River
	// takes its worker for dead and runs it again (its rescuer). It must
	// outlast an attempt, up to two provider calls (AttemptTimeout), so that
	// a live attempt is not doubled; default 2×AttemptTimeout.
	RescueAfter    time.Duration
	Concurrency    int           // jobs worked at once; default 4
	PollInterval   time.Duration // River's FetchPollInterval: look for due jobs at least this often; default 5s
	BackoffInitial time.Duration // first retry delay (before jitter); default 1s
	BackoffCap     time.Duration // longest retry delay; default 10m
	// KeyRetention is how long the provider keeps idempotency keys. Once a
	// row's first attempt is older than KeyRetention less RescueAfter, the
	// worker only looks the payout up; it never POSTs again. Default 24h;
	// it must exceed 2×RescueAfter.
	KeyRetention time.Duration
	ID           string       // the River client's id; default host-pid-random
	HTTPClient   *http.Client // default: a client of its own
	Logger       *slog.Logger // default slog.Default()
	// Observe, when set, is called synchronously after each attempt (for
	// metrics). It must be quick and safe for concurrent use.
	Observe func(Event)
	// TracerProvider makes the attempts' and the provider calls' spans
	// (trace.go); nil: the global provider (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
	// Propagator writes a provider call's trace context into its request
	// (traceparent); nil: the global propagator.
	Propagator propagation.TextMapPropagator
}

// AttemptTimeout bounds one attempt: up to two provider calls (a POST, and
// a lookup when a retry is refused) and the store's updates.
func (c Config) AttemptTimeout() time.Duration { return 2*c.Timeout + 5*time.Second }

// Outcome is what one attempt came to.
type Outcome string

// The outcomes reported to Config.Observe.
const (
	OutcomeSent       Outcome = "sent"        // the provider accepted the payout (or had it already)
	OutcomeAdopted    Outcome = "adopted"     // a lookup by the key found the payout (after key retention, or a refused retry)
	OutcomeRetry      Outcome = "retry"       // temporary failure: River runs the job again after a backoff
	OutcomeFailed     Outcome = "failed"      // the provider refused: nothing was paid
	OutcomeReview     Outcome = "review"      // flagged for a person to decide
	OutcomeNotPending Outcome = "not_pending" // the row was no longer pending (or flagged): nothing to do
	OutcomeError      Outcome = "error"       // the store failed; River runs the job again, with the same key
)

// Event reports one attempt.
type Event struct {
	Outcome      Outcome
	Disbursement store.Disbursement // as the attempt began
	Lookup       bool               // the worker looked the payout up (instead of, or after, POSTing)
	ProviderRef  string
	Duration     time.Duration // of the provider calls
	Err          error         // the provider's or the store's error, if any
}

// Worker pays out disbursements: the River worker of store.PayoutArgs jobs.
// Each attempt calls the provider with the row's fixed idempotency key and
// records the outcome through updates guarded on status = 'pending'. Run
// (or AddTo, into a process's one River client) works the payout queue;
// several workers may run against one database.
type Worker struct {
	river.WorkerDefaults[store.PayoutArgs]

	cfg    Config
	st     Store
	client *Client
	log    *slog.Logger
	tracer trace.Tracer
	// retryAt holds, from Work to NextRetry, when a job that failed
	// temporarily is due again (jitter and Retry-After included).
	retryAt sync.Map // job id → time.Time
}

// New validates cfg and returns a worker. Its errors name the bad setting.
func New(cfg Config, st Store) (*Worker, error) {
	u, err := url.Parse(cfg.ProviderURL)
	if cfg.ProviderURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("payout: ProviderURL (PAYLOCK_PAYOUT_URL) %q is not an http(s) URL", cfg.ProviderURL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.RescueAfter <= 0 {
		cfg.RescueAfter = 2 * cfg.AttemptTimeout()
	}
	if cfg.RescueAfter <= cfg.AttemptTimeout() {
		return nil, fmt.Errorf("payout: RescueAfter %v must exceed an attempt's bound %v (twice PAYLOCK_PAYOUT_TIMEOUT, plus 5s)", cfg.RescueAfter, cfg.AttemptTimeout())
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 5 * time.Second
	}
	if cfg.BackoffInitial <= 0 {
		cfg.BackoffInitial = time.Second
	}
	if cfg.BackoffCap <= 0 {
		cfg.BackoffCap = 10 * time.Minute
	}
	if cfg.BackoffCap < cfg.BackoffInitial {
		cfg.BackoffCap = cfg.BackoffInitial
	}
	if cfg.KeyRetention <= 0 {
		cfg.KeyRetention = 24 * time.Hour
	}
	if cfg.KeyRetention <= 2*cfg.RescueAfter {
		return nil, fmt.Errorf("payout: KeyRetention (PAYLOCK_PROVIDER_KEY_RETENTION) %v must exceed twice RescueAfter %v", cfg.KeyRetention, cfg.RescueAfter)
	}
	if cfg.ID == "" {
		cfg.ID = defaultID()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	return &Worker{
		cfg:    cfg,
		st:     st,
		client: NewClient(cfg.ProviderURL, cfg.HTTPClient, WithTracerProvider(cfg.TracerProvider), WithPropagator(cfg.Propagator)),
		log:    cfg.Logger.With(slog.String("worker", cfg.ID)),
		tracer: cfg.TracerProvider.Tracer(tracerName),
	}, nil
}

func defaultID() string {
	host, _ := os.Hostname()
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// ID returns the worker's name, its River client's id.
func (w *Worker) ID() string { return w.cfg.ID }

// RiverConfig is the River client configuration Run starts: the payout
// queue with Concurrency workers, polling every PollInterval, attempts
// bounded by AttemptTimeout and rescued after RescueAfter.
func (w *Worker) RiverConfig() (*river.Config, error) {
	rcfg := &river.Config{
		ID:                w.cfg.ID,
		Logger:            w.cfg.Logger,
		FetchPollInterval: w.cfg.PollInterval,
		FetchCooldown:     min(w.cfg.PollInterval, 100*time.Millisecond),
	}
	if err := w.AddTo(rcfg); err != nil {
		return nil, err
	}
	return rcfg, nil
}

// AddTo registers the worker in rcfg and adds the payout queue with
// Concurrency workers, so that one River client per process can work the
// payout queue beside others (the forward queue). It raises rcfg's
// JobTimeout and RescueStuckJobsAfter to at least AttemptTimeout and
// RescueAfter; polling and the client's id are rcfg's.
func (w *Worker) AddTo(rcfg *river.Config) error {
	q := store.JobQueue{Name: store.PayoutQueue, MaxWorkers: w.cfg.Concurrency,
		JobTimeout: w.cfg.AttemptTimeout(), RescueAfter: w.cfg.RescueAfter}
	if err := store.AddJobWorker(rcfg, w, q); err != nil {
		return fmt.Errorf("payout: %w", err)
	}
	return nil
}

// Jobs runs a River client until its context is done: *store.Store is
// one (store.Store.RunJobs, paylock's one start/stop loop of River).
type Jobs interface {
	RunJobs(ctx context.Context, cfg *river.Config, logger *slog.Logger, started func()) error
}

// Run works payout jobs through jobs (the worker's RiverConfig) until ctx
// is done, then stops fetching, lets the jobs in hand finish (each provider
// call is bounded by Config.Timeout) and returns nil. While the database
// cannot be reached at start, it tries again with backoff; once started,
// River reconnects by itself. River wakes it on a new job (LISTEN, unless
// the store is behind a pooler in transaction mode) and polls at least
// every PollInterval.
func (w *Worker) Run(ctx context.Context, jobs Jobs) error {
	rcfg, err := w.RiverConfig()
	if err != nil {
		return err
	}
	return jobs.RunJobs(ctx, rcfg, w.log, func() {
		w.log.InfoContext(ctx, "payout worker started", slog.String("provider", w.cfg.ProviderURL),
			slog.Int("concurrency", w.cfg.Concurrency), slog.Duration("rescue_after", w.cfg.RescueAfter))
	})
}

// Timeout bounds an attempt: see Config.AttemptTimeout.
func (w *Worker) Timeout(*river.Job[store.PayoutArgs]) time.Duration { return w.cfg.AttemptTimeout() }

// NextRetry is when River runs a job again after Work returned an error:
// the delay Work chose (see delay), or the plain backoff when Work failed
// before choosing one.
func (w *Worker) NextRetry(job *river.Job[store.PayoutArgs]) time.Time {
	if at, ok := w.retryAt.LoadAndDelete(job.ID); ok {
		return at.(time.Time)
	}
	return time.Now().Add(w.delay(job.Attempt, nil))
}

// Work makes one attempt of a disbursement's payout. It returns nil when
// the job is done (sent, failed, flagged for review, or the row no longer
// pending), and an error for River to retry the job later, with the same
// key. The call and the update run to completion even when ctx ends:
// abandoning them would be safe (the next attempt uses the same key) but
// would waste the attempt. The attempt is a span (SpanAttempt), the
// provider calls its children.
func (w *Worker) Work(ctx context.Context, job *river.Job[store.PayoutArgs]) (err error) {
	ctx, span := w.startAttempt(ctx, job.Args)
	var ev Event
	defer func() {
		// Ended even when the attempt panics (River recovers the job):
		// that attempt's span is the one an operator looks for.
		if r := recover(); r != nil {
			endAttempt(span, Event{Outcome: OutcomeError}, fmt.Errorf("payout attempt panicked: %v", r))
			panic(r)
		}
		endAttempt(span, ev, err)
	}()
	ev, err = w.work(ctx, job)
	return err
}

// work is Work's attempt; it returns what the attempt came to (logged and
// observed already) and what Work returns to River.
func (w *Worker) work(ctx context.Context, job *river.Job[store.PayoutArgs]) (Event, error) {
	ctx = context.WithoutCancel(ctx)
	d, err := w.st.BeginAttempt(ctx, job.Args.DisbursementID)
	switch {
	case errors.Is(err, store.ErrNotPending):
		ev := Event{Outcome: OutcomeNotPending, Disbursement: d, Err: err}
		w.done(ctx, ev)
		return ev, nil
	case errors.Is(err, store.ErrNotFound):
		// No row, now or ever: the job outlived it (a restore, a purge).
		return Event{Err: err}, river.JobCancel(err)
	case err != nil:
		return Event{Outcome: OutcomeError, Err: err}, err
	}
	var ev Event
	// The provider forgets keys after KeyRetention, counted from its first
	// sight of the key, which is after first_attempt_at. A POST sent now
	// reaches it within RescueAfter; so from KeyRetention-RescueAfter on, a
	// POST might no longer be recognised as a retry.
	if d.Attempts > 1 && d.SinceFirstAttempt >= w.cfg.KeyRetention-w.cfg.RescueAfter {
		ev = w.lookup(ctx, d)
	} else {
		ev = w.create(ctx, d)
	}
	ev.Disbursement = d
	if ev.Outcome == OutcomeRetry && job.Attempt >= job.MaxAttempts {
		// The last attempt River allows: a person decides rather than River
		// discarding the job while the row stays pending.
		reason := fmt.Sprintf("still unpaid after %d attempts; last error: %v", job.Attempt, ev.Err)
		ev.Outcome = OutcomeReview
		ev = w.save(ev, w.st.FlagForReview(ctx, d.ID, reason))
	}
	w.done(ctx, ev)
	switch ev.Outcome {
	case OutcomeRetry:
		delay := w.delay(job.Attempt, ev.Err)
		if err := w.st.NoteRetry(ctx, d.ID, delay, lastError(ev)); err != nil && !errors.Is(err, store.ErrNotPending) {
			w.log.WarnContext(ctx, "noting the retry failed", slog.Int64("disbursement_id", d.ID), slog.Any("error", err))
		}
		w.retryAt.Store(job.ID, time.Now().Add(delay))
		return ev, ev.Err
	case OutcomeError:
		return ev, ev.Err
	}
	return ev, nil
}

func lastError(ev Event) string {
	if ev.Lookup {
		return "lookup: " + ev.Err.Error()
	}
	return ev.Err.Error()
}

func (w *Worker) create(ctx context.Context, d store.Disbursement) Event {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	start := time.Now()
	p, err := w.client.Create(cctx, d.IdempotencyKey, Request{Amount: d.Amount, Currency: d.Currency, Reference: d.Reference()})
	cancel()
	ev := Event{Duration: time.Since(start), Err: err}
	switch {
	case err == nil:
		ev.Outcome, ev.ProviderRef = OutcomeSent, p.ID
		return w.save(ev, w.st.MarkSent(ctx, d.ID, p.ID, statusOf(p)))
	case errors.Is(err, ErrRefused) && d.Attempts > 1:
		return w.confirmRefusal(ctx, d, ev)
	case errors.Is(err, ErrRefused):
		ev.Outcome = OutcomeFailed
		return w.save(ev, w.st.MarkFailed(ctx, d.ID, err.Error()))
	default: // ErrTemporary, or anything unforeseen: the same key makes a retry safe
		ev.Outcome = OutcomeRetry
		return ev
	}
}

// confirmRefusal decides a 4xx that follows an earlier attempt of the row.
// That attempt's outcome was unknown (else the row would not be pending):
// the provider may have created the payout and the answer been lost, and a
// 4xx now (a 403 after a key rotation, a 404 from a gateway during a
// deploy) says nothing about it. Only a lookup by the key can: a payout is
// adopted; none means the refusal stands; a lookup that is refused too
// leaves the row to a person, and one that fails for now is retried.
func (w *Worker) confirmRefusal(ctx context.Context, d store.Disbursement, ev Event) Event {
	refusal := ev.Err
	cctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	start := time.Now()
	p, err := w.client.Lookup(cctx, d.IdempotencyKey)
	cancel()
	ev.Lookup, ev.Duration = true, ev.Duration+time.Since(start)
	switch {
	case err == nil:
		ev.Outcome, ev.ProviderRef, ev.Err = OutcomeAdopted, p.ID, nil
		return w.save(ev, w.st.MarkSent(ctx, d.ID, p.ID, statusOf(p)))
	case errors.Is(err, ErrNotFound):
		ev.Outcome = OutcomeFailed
		return w.save(ev, w.st.MarkFailed(ctx, d.ID, fmt.Sprintf("%v (attempt %d; a lookup of key %s found no payout)", refusal, d.Attempts, d.IdempotencyKey)))
	case errors.Is(err, ErrRefused):
		ev.Outcome, ev.Err = OutcomeReview, fmt.Errorf("%w; lookup: %w", refusal, err)
		reason := fmt.Sprintf("attempt %d was refused (%v) after an attempt whose outcome is unknown, and the lookup of key %s was refused too (%v): the provider may hold the payout; not marking it failed",
			d.Attempts, refusal, d.IdempotencyKey, err)
		return w.save(ev, w.st.FlagForReview(ctx, d.ID, reason))
	default:
		ev.Outcome, ev.Err = OutcomeRetry, fmt.Errorf("%w; lookup: %w", refusal, err)
		return ev
	}
}

// lookup settles a row whose key the provider may have forgotten: adopt the
// payout it has under the key, or flag the row for review. Never a POST.
func (w *Worker) lookup(ctx context.Context, d store.Disbursement) Event {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	start := time.Now()
	p, err := w.client.Lookup(cctx, d.IdempotencyKey)
	cancel()
	ev := Event{Lookup: true, Duration: time.Since(start), Err: err}
	switch {
	case err == nil:
		ev.Outcome, ev.ProviderRef = OutcomeAdopted, p.ID
		return w.save(ev, w.st.MarkSent(ctx, d.ID, p.ID, statusOf(p)))
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrRefused):
		ev.Outcome = OutcomeReview
		reason := fmt.Sprintf("first attempt %s ago, past the provider's key retention (%s); lookup of key %s: %v; not sending it again",
			d.SinceFirstAttempt.Round(time.Second), w.cfg.KeyRetention, d.IdempotencyKey, err)
		return w.save(ev, w.st.FlagForReview(ctx, d.ID, reason))
	default:
		ev.Outcome = OutcomeRetry
		return ev
	}
}

// save notes the store's answer to an outcome update.
func (w *Worker) save(ev Event, err error) Event {
	switch {
	case err == nil:
	case errors.Is(err, store.ErrNotPending):
		ev.Outcome, ev.Err = OutcomeNotPending, err
	default:
		ev.Outcome, ev.Err = OutcomeError, err
	}
	return ev
}

// done logs an attempt and reports it to Config.Observe.
func (w *Worker) done(ctx context.Context, ev Event) {
	d := ev.Disbursement
	attrs := []slog.Attr{
		slog.String("outcome", string(ev.Outcome)),
		slog.Int64("disbursement_id", d.ID),
		slog.String("loan_id", d.LoanID),
		slog.Int("tranche", d.Tranche),
		slog.String("idempotency_key", d.IdempotencyKey),
		slog.Int("attempt", d.Attempts),
		slog.Duration("provider_call", ev.Duration),
	}
	if ev.Lookup {
		attrs = append(attrs, slog.Bool("lookup", true))
	}
	if ev.ProviderRef != "" {
		attrs = append(attrs, slog.String("provider_ref", ev.ProviderRef))
	}
	if ev.Err != nil {
		attrs = append(attrs, slog.String("error", ev.Err.Error()))
	}
	level := slog.LevelInfo
	switch ev.Outcome {
	case OutcomeRetry, OutcomeNotPending:
		level = slog.LevelWarn
	case OutcomeFailed, OutcomeReview, OutcomeError:
		level = slog.LevelError
	}
	w.log.LogAttrs(ctx, level, "payout attempt", attrs...)
	if w.cfg.Observe != nil {
		w.cfg.Observe(ev)
	}
}

// delay is the wait before attempt n+1: exponential from BackoffInitial,
// doubling, with ±50% jitter so that workers do not retry in step, capped at
// BackoffCap, and at least what a Retry-After asked for.
func (w *Worker) delay(attempts int, err error) time.Duration {
	bo := &backoff.ExponentialBackOff{
		InitialInterval:     w.cfg.BackoffInitial,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         w.cfg.BackoffCap,
	}
	bo.Reset()
	var d time.Duration
	for range min(max(attempts, 1), 64) {
		d = bo.NextBackOff()
	}
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > d {
		d = se.RetryAfter
	}
	return min(d, w.cfg.BackoffCap)
}

func statusOf(p Payout) store.DisbursementStatus {
	switch p.Status {
	case "paid":
		return store.StatusPaid
	case "failed":
		return store.StatusFailed
	}
	return store.StatusSent
}
