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

	"github.com/paylock/paylock/store"
)

// Store is what the worker needs from the store package.
type Store interface {
	ClaimDisbursements(ctx context.Context, worker string, lease time.Duration, limit int) ([]store.Disbursement, error)
	MarkSent(ctx context.Context, id int64, worker, providerRef string, status store.DisbursementStatus) error
	RetryLater(ctx context.Context, id int64, worker string, delay time.Duration, lastErr string) error
	MarkFailed(ctx context.Context, id int64, worker, lastErr string) error
	FlagForReview(ctx context.Context, id int64, worker, reason string) error
	NextDisbursementDue(ctx context.Context) (time.Duration, bool, error)
	ListenDisbursements(ctx context.Context, wake func()) error
}

// Config tunes a Worker. Zero values take the defaults noted.
type Config struct {
	ProviderURL string        // required: the provider's base URL (http or https)
	Timeout     time.Duration // one provider call; default 10s
	// ClaimLease is how long a claimed row stays the worker's. It must
	// outlast a provider call, so that no other worker calls the provider
	// for the row while this one may still be calling; default 2×Timeout+5s.
	ClaimLease     time.Duration
	Concurrency    int           // rows processed at once; default 4
	PollInterval   time.Duration // look for due rows at least this often; default 5s
	BackoffInitial time.Duration // first retry delay (before jitter); default 1s
	BackoffCap     time.Duration // longest retry delay; default 10m
	// KeyRetention is how long the provider keeps idempotency keys. Once a
	// row's first attempt is older than KeyRetention less ClaimLease, the
	// worker only looks the payout up; it never POSTs again. Default 24h;
	// it must exceed 2×ClaimLease.
	KeyRetention time.Duration
	ID           string       // the worker's name in claimed_by; default host-pid-random
	HTTPClient   *http.Client // default: a client of its own
	Logger       *slog.Logger // default slog.Default()
	// Observe, when set, is called synchronously after each processed row
	// (for metrics). It must be quick and safe for concurrent use.
	Observe func(Event)
}

// Outcome is what processing one claimed row came to.
type Outcome string

// The outcomes reported to Config.Observe.
const (
	OutcomeSent      Outcome = "sent"       // the provider accepted the payout (or had it already)
	OutcomeAdopted   Outcome = "adopted"    // after key retention: the lookup found the payout
	OutcomeRetry     Outcome = "retry"      // temporary failure: due again after a backoff
	OutcomeFailed    Outcome = "failed"     // the provider refused: nothing was paid
	OutcomeReview    Outcome = "review"     // flagged for a person to decide
	OutcomeClaimLost Outcome = "claim_lost" // the row was no longer ours when the outcome was saved
	OutcomeError     Outcome = "error"      // the outcome could not be saved; the claim expires and the row is retried
)

// Event reports one processed row.
type Event struct {
	Outcome      Outcome
	Disbursement store.Disbursement // as claimed
	Lookup       bool               // the worker looked the payout up instead of POSTing
	ProviderRef  string
	Duration     time.Duration // of the provider call
	Err          error         // the provider's or the store's error, if any
}

// Worker pays out pending disbursements: it claims due rows, calls the
// provider with each row's fixed idempotency key, and records the outcome
// through guarded updates. Several workers may run against one database.
type Worker struct {
	cfg    Config
	st     Store
	client *Client
	log    *slog.Logger
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
	if cfg.ClaimLease <= 0 {
		cfg.ClaimLease = 2*cfg.Timeout + 5*time.Second
	}
	if cfg.ClaimLease <= cfg.Timeout {
		return nil, fmt.Errorf("payout: ClaimLease %v must exceed the provider timeout %v (PAYLOCK_PAYOUT_TIMEOUT)", cfg.ClaimLease, cfg.Timeout)
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
	if cfg.KeyRetention <= 2*cfg.ClaimLease {
		return nil, fmt.Errorf("payout: KeyRetention (PAYLOCK_PROVIDER_KEY_RETENTION) %v must exceed twice the claim lease %v", cfg.KeyRetention, cfg.ClaimLease)
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
	return &Worker{
		cfg:    cfg,
		st:     st,
		client: NewClient(cfg.ProviderURL, cfg.HTTPClient),
		log:    cfg.Logger.With(slog.String("worker", cfg.ID)),
	}, nil
}

func defaultID() string {
	host, _ := os.Hostname()
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// ID returns the worker's name, as written to claimed_by.
func (w *Worker) ID() string { return w.cfg.ID }

// Run processes due rows until ctx is done, then stops claiming, lets the
// rows in hand finish (each provider call is bounded by Config.Timeout) and
// returns nil. It wakes on a notification of a new disbursement (LISTEN, on
// a connection of its own, reconnected with backoff), when a row it knows of
// becomes due, and at least every PollInterval, the fallback when
// notifications are lost.
func (w *Worker) Run(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	notify := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	listenCtx, stopListening := context.WithCancel(ctx)
	wg.Go(func() { w.listen(listenCtx, notify) })
	defer func() {
		stopListening()
		wg.Wait()
	}()

	w.log.InfoContext(ctx, "payout worker started", slog.String("provider", w.cfg.ProviderURL),
		slog.Int("concurrency", w.cfg.Concurrency), slog.Duration("claim_lease", w.cfg.ClaimLease))
	done := make(chan struct{}, w.cfg.Concurrency)
	inflight := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	for ctx.Err() == nil {
		wait := w.cfg.PollInterval
		if free := w.cfg.Concurrency - inflight; free > 0 {
			rows, err := w.st.ClaimDisbursements(ctx, w.cfg.ID, w.cfg.ClaimLease, free)
			if err != nil && ctx.Err() == nil {
				w.log.WarnContext(ctx, "claiming disbursements failed; trying again later", slog.Any("error", err))
			}
			for _, d := range rows {
				inflight++
				wg.Go(func() {
					w.process(ctx, d)
					done <- struct{}{}
				})
			}
			if err == nil && len(rows) < free {
				wait = w.untilDue(ctx, wait)
			} else if err == nil {
				wait = 0 // there may be more; claim again once a slot frees
			}
		}
		if inflight == w.cfg.Concurrency {
			wait = w.cfg.PollInterval // every slot busy: a finished row wakes us
		}
		timer.Reset(wait) // Go 1.23 timers: no stale tick survives a Reset
		select {
		case <-ctx.Done():
		case <-wake:
		case <-done:
			inflight--
		case <-timer.C:
		}
	}
	w.log.InfoContext(ctx, "payout worker stopping: finishing the rows in hand", slog.Int("in_flight", inflight))
	return nil
}

// untilDue shortens wait to when the next pending row becomes claimable.
func (w *Worker) untilDue(ctx context.Context, wait time.Duration) time.Duration {
	due, ok, err := w.st.NextDisbursementDue(ctx)
	if err != nil || !ok {
		return wait
	}
	// Not below 10ms: a row due now but skipped is being claimed by another
	// worker, whose claim will show in a moment.
	return min(wait, max(due, 10*time.Millisecond))
}

// listen keeps a LISTEN connection open, reconnecting with backoff.
func (w *Worker) listen(ctx context.Context, notify func()) {
	bo := &backoff.ExponentialBackOff{
		InitialInterval:     500 * time.Millisecond,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         30 * time.Second,
	}
	bo.Reset()
	for {
		start := time.Now()
		err := w.st.ListenDisbursements(ctx, notify)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			bo.Reset()
		}
		w.log.WarnContext(ctx, "listening for new disbursements failed; polling until it is back",
			slog.Any("error", err), slog.Duration("poll", w.cfg.PollInterval))
		t := time.NewTimer(bo.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// process makes one attempt for a claimed row and records its outcome. The
// call and the update run to completion even when ctx ends: abandoning them
// would be safe (the next attempt uses the same key) but would waste the
// attempt.
func (w *Worker) process(ctx context.Context, d store.Disbursement) {
	ctx = context.WithoutCancel(ctx)
	var ev Event
	// The provider forgets keys after KeyRetention, counted from its first
	// sight of the key, which is after first_attempt_at. A POST sent now
	// reaches it within the claim lease; so from KeyRetention-ClaimLease on,
	// a POST might no longer be recognised as a retry.
	if d.Attempts > 1 && d.SinceFirstAttempt >= w.cfg.KeyRetention-w.cfg.ClaimLease {
		ev = w.lookup(ctx, d)
	} else {
		ev = w.create(ctx, d)
	}
	ev.Disbursement = d
	w.report(ctx, ev)
	if w.cfg.Observe != nil {
		w.cfg.Observe(ev)
	}
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
		return w.save(ctx, ev, w.st.MarkSent(ctx, d.ID, w.cfg.ID, p.ID, statusOf(p)))
	case errors.Is(err, ErrRefused):
		ev.Outcome = OutcomeFailed
		return w.save(ctx, ev, w.st.MarkFailed(ctx, d.ID, w.cfg.ID, err.Error()))
	default: // ErrTemporary, or anything unforeseen: the same key makes a retry safe
		ev.Outcome = OutcomeRetry
		return w.save(ctx, ev, w.st.RetryLater(ctx, d.ID, w.cfg.ID, w.delay(d.Attempts, err), err.Error()))
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
		return w.save(ctx, ev, w.st.MarkSent(ctx, d.ID, w.cfg.ID, p.ID, statusOf(p)))
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrRefused):
		ev.Outcome = OutcomeReview
		reason := fmt.Sprintf("first attempt %s ago, past the provider's key retention (%s); lookup of key %s: %v; not sending it again",
			d.SinceFirstAttempt.Round(time.Second), w.cfg.KeyRetention, d.IdempotencyKey, err)
		return w.save(ctx, ev, w.st.FlagForReview(ctx, d.ID, w.cfg.ID, reason))
	default:
		ev.Outcome = OutcomeRetry
		return w.save(ctx, ev, w.st.RetryLater(ctx, d.ID, w.cfg.ID, w.delay(d.Attempts, err), "lookup: "+err.Error()))
	}
}

// save notes the store's answer to an outcome update.
func (w *Worker) save(ctx context.Context, ev Event, err error) Event {
	switch {
	case err == nil:
	case errors.Is(err, store.ErrClaimLost):
		ev.Outcome, ev.Err = OutcomeClaimLost, err
	default:
		ev.Outcome, ev.Err = OutcomeError, err
	}
	return ev
}

func (w *Worker) report(ctx context.Context, ev Event) {
	d := ev.Disbursement
	attrs := []slog.Attr{
		slog.String("outcome", string(ev.Outcome)),
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
	case OutcomeRetry, OutcomeClaimLost:
		level = slog.LevelWarn
	case OutcomeFailed, OutcomeReview, OutcomeError:
		level = slog.LevelError
	}
	w.log.LogAttrs(ctx, level, "payout attempt", attrs...)
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
