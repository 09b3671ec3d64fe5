package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// Store is what the worker needs from the store package; *store.Payments
// satisfies it.
type Store interface {
	Payment(ctx context.Context, source, transactionID string) (store.Payment, error)
}

// MaxRetryAfter caps how long a receiver's Retry-After can postpone the next
// attempt.
const MaxRetryAfter = time.Hour

// Config tunes a Worker. Zero values take the defaults noted.
type Config struct {
	// Secret signs every forward (Standard Webhooks): the first of
	// PAYLOCK_FORWARD_SECRETS. Required.
	Secret      signature.Secret
	Timeout     time.Duration // one POST, answer included; default 10s
	Concurrency int           // forwards in flight at once; default 10
	// RescueAfter is how long a forward job may stay running before River
	// takes its worker for dead and runs it again; it must exceed an
	// attempt's bound (AttemptTimeout). Default 2×AttemptTimeout.
	RescueAfter time.Duration
	// Backoff, when set, is the wait after failed attempt n (1 for the
	// first); nil leaves it to River's client retry policy.
	Backoff    func(attempt int) time.Duration
	HTTPClient *http.Client // default: a client of its own, with Timeout
	Logger     *slog.Logger // default slog.Default()
	// Observe, when set, is called synchronously after each attempt (for
	// metrics). It must be quick and safe for concurrent use.
	Observe func(Event)
}

// AttemptTimeout bounds one attempt: reading the payment and one POST.
func (c Config) AttemptTimeout() time.Duration { return c.Timeout + 5*time.Second }

// Outcome is what one attempt came to.
type Outcome string

// The outcomes reported to Config.Observe.
const (
	OutcomeDelivered     Outcome = "delivered"      // the receiver answered 2xx: the job is done
	OutcomeFailedAttempt Outcome = "failed_attempt" // anything else: River runs the job again later
	OutcomeDiscarded     Outcome = "discarded"      // the last attempt failed (River discards the job), or the payment is gone (cancelled)
)

// Event reports one attempt. It holds no payload and no secret.
type Event struct {
	Outcome   Outcome
	JobID     int64
	Attempt   int
	Type      string // payment.recorded, disbursement.<status>
	WebhookID string
	Status    int // the receiver's HTTP status; 0 when none came
	Duration  time.Duration
	Err       error
}

// Worker forwards events: the River worker of store.ForwardArgs jobs.
type Worker struct {
	river.WorkerDefaults[store.ForwardArgs]

	cfg  Config
	st   Store
	http *http.Client
	log  *slog.Logger
	// retryAt holds, from Work to NextRetry, when a job whose receiver sent
	// a Retry-After is due again.
	retryAt sync.Map // job id → time.Time
}

// ErrConfig means a Worker's configuration is unusable.
var ErrConfig = errors.New("forward: invalid configuration")

// New validates cfg and returns a worker. Its errors wrap ErrConfig and name
// the bad setting.
func New(cfg Config, st Store) (w *Worker, err error) {
	defer func() {
		// Sign panics for a secret not parsed for the Standard scheme:
		// turn that into a start-up error here, once.
		if r := recover(); r != nil {
			w, err = nil, fmt.Errorf("%w: PAYLOCK_FORWARD_SECRETS: the first secret is not a Standard Webhooks (whsec_) secret", ErrConfig)
		}
	}()
	signature.Sign(signature.SchemeStandard, cfg.Secret, "probe", time.Unix(0, 0), nil)
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 10
	}
	if cfg.RescueAfter <= 0 {
		cfg.RescueAfter = 2 * cfg.AttemptTimeout()
	}
	if cfg.RescueAfter <= cfg.AttemptTimeout() {
		return nil, fmt.Errorf("%w: RescueAfter %v must exceed an attempt's bound %v (PAYLOCK_FORWARD_TIMEOUT plus 5s)", ErrConfig, cfg.RescueAfter, cfg.AttemptTimeout())
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Worker{cfg: cfg, st: st, http: hc, log: cfg.Logger}, nil
}

// AddTo registers the worker in rcfg and adds the forward queue with
// Concurrency workers, so that one River client per process works the
// forward queue beside others (the payout queue). It raises rcfg's
// JobTimeout and RescueStuckJobsAfter to at least the worker's bounds.
func (w *Worker) AddTo(rcfg *river.Config) error {
	q := store.JobQueue{Name: store.ForwardQueue, MaxWorkers: w.cfg.Concurrency,
		JobTimeout: w.cfg.AttemptTimeout(), RescueAfter: w.cfg.RescueAfter}
	if err := store.AddJobWorker(rcfg, w, q); err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	return nil
}

// Timeout bounds an attempt: see Config.AttemptTimeout.
func (w *Worker) Timeout(*river.Job[store.ForwardArgs]) time.Duration { return w.cfg.AttemptTimeout() }

// NextRetry is when River runs a job again after a failed attempt: after
// Config.Backoff, or the receiver's Retry-After when later; the zero time
// (River's policy) when neither applies.
func (w *Worker) NextRetry(job *river.Job[store.ForwardArgs]) time.Time {
	var at time.Time
	if w.cfg.Backoff != nil {
		at = time.Now().Add(w.cfg.Backoff(job.Attempt))
	}
	if ra, ok := w.retryAt.LoadAndDelete(job.ID); ok {
		if t := ra.(time.Time); t.After(at) {
			at = t
		}
	}
	return at
}

// Work makes one attempt: it builds the body (reading the payment for
// payment.recorded), signs it and POSTs it. nil means delivered (2xx).
func (w *Worker) Work(ctx context.Context, job *river.Job[store.ForwardArgs]) error {
	a := job.Args
	ev := Event{JobID: job.ID, Attempt: job.Attempt, Type: a.Type, WebhookID: a.ID}
	body, err := w.body(ctx, a)
	if errors.Is(err, store.ErrNotFound) {
		ev.Outcome, ev.Err = OutcomeDiscarded, err
		w.done(ctx, a, ev)
		return river.JobCancel(err)
	}
	if err == nil {
		start := time.Now()
		ev.Status, err = w.post(ctx, job, body)
		ev.Duration = time.Since(start)
	}
	ev.Err = err
	switch {
	case err == nil:
		ev.Outcome = OutcomeDelivered
	case job.Attempt >= job.MaxAttempts:
		ev.Outcome = OutcomeDiscarded
	default:
		ev.Outcome = OutcomeFailedAttempt
	}
	w.done(ctx, a, ev)
	return err
}

// StatusError is a receiver's answer other than 2xx.
type StatusError struct {
	Status     int
	RetryAfter time.Duration // from a 429 or 503's Retry-After; 0 when none
}

func (e *StatusError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("forward: the receiver answered %d (Retry-After %s)", e.Status, e.RetryAfter)
	}
	return fmt.Sprintf("forward: the receiver answered %d", e.Status)
}

func (w *Worker) post(ctx context.Context, job *river.Job[store.ForwardArgs], body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, job.Args.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("forward: request to %s: %w", redact(job.Args.URL), err)
	}
	for k, v := range signature.Sign(signature.SchemeStandard, w.cfg.Secret, job.Args.ID, time.Now(), body) {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "paylock-forward")
	resp, err := w.http.Do(req)
	if err != nil {
		// url.Error repeats the URL, credentials and all: say it redacted.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("forward: POST %s: %w", redact(job.Args.URL), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, nil
	}
	se := &StatusError{Status: resp.StatusCode}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if d := retryAfter(resp.Header.Get("Retry-After"), time.Now()); d > 0 {
			se.RetryAfter = min(d, MaxRetryAfter)
			w.retryAt.Store(job.ID, time.Now().Add(se.RetryAfter))
		}
	}
	return resp.StatusCode, se
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(MaxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// paymentData is the data of a payment.recorded forward.
type paymentData struct {
	Source        string          `json:"source"`
	TransactionID string          `json:"transaction_id"`
	Amount        int64           `json:"amount"`
	Currency      string          `json:"currency"`
	EventID       string          `json:"event_id"`
	ReceivedAt    string          `json:"received_at"`
	Payload       json.RawMessage `json:"payload"`
}

type envelope struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// body builds what a forward job sends. Errors wrap store.ErrNotFound when
// the payment is gone.
func (w *Worker) body(ctx context.Context, a store.ForwardArgs) ([]byte, error) {
	switch {
	case a.Type == store.ForwardPaymentRecorded:
		p, err := w.st.Payment(ctx, a.Source, a.TransactionID)
		if err != nil {
			return nil, err
		}
		payload := json.RawMessage(p.Payload)
		if !json.Valid(payload) {
			payload = json.RawMessage("null")
		}
		return json.Marshal(envelope{Type: a.Type, Data: paymentData{
			Source: p.Source, TransactionID: p.TransactionID, Amount: p.Amount, Currency: p.Currency,
			EventID: p.EventID, ReceivedAt: p.ReceivedAt.UTC().Format(time.RFC3339Nano), Payload: payload,
		}})
	case strings.HasPrefix(a.Type, store.ForwardDisbursementPrefix) && a.Disbursement != nil:
		return json.Marshal(envelope{Type: a.Type, Data: a.Disbursement})
	}
	return nil, fmt.Errorf("%w: forward job of type %q without its subject", store.ErrNotFound, a.Type)
}

// done logs an attempt (never the payload, never the secret) and reports it.
func (w *Worker) done(ctx context.Context, a store.ForwardArgs, ev Event) {
	attrs := []slog.Attr{
		slog.String("outcome", string(ev.Outcome)),
		slog.Int64("job_id", ev.JobID),
		slog.Int("attempt", ev.Attempt),
		slog.String("type", ev.Type),
		slog.String("webhook_id", ev.WebhookID),
		slog.String("url", redact(a.URL)),
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
	level := slog.LevelInfo
	switch ev.Outcome {
	case OutcomeFailedAttempt:
		level = slog.LevelWarn
	case OutcomeDiscarded:
		level = slog.LevelError
	}
	w.log.LogAttrs(ctx, level, "forward attempt", attrs...)
	if w.cfg.Observe != nil {
		w.cfg.Observe(ev)
	}
}

// redact hides a URL's password.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}
