package handler

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylock/paylock/internal/ratelog"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// Locker is what the handler needs from the lock package.
type Locker interface {
	Obtain(ctx context.Context, key string, ttl time.Duration, opts ...lock.ObtainOption) (*lock.Lock, error)
}

// Recorder is what the handler needs to record payments: *store.Payments
// is one.
type Recorder interface {
	RecordPayment(ctx context.Context, p store.Payment) (store.Payment, error)
	RecordPaymentFunc(ctx context.Context, p store.Payment, fn func(ctx context.Context, tx pgx.Tx, p store.Payment) error) (store.Payment, error)
	Confirm(ctx context.Context, p store.Payment) (store.Payment, error)
	// RecordMismatch keeps a mismatching delivery as a review item (once
	// per distinct body); the delivery is answered 422 whatever it returns.
	RecordMismatch(ctx context.Context, m store.Mismatch) error
	// RecordEvent records a lifecycle event once and folds its payment's
	// state (ErrDuplicate when already recorded), with the forward jobs of
	// the change it makes; fn runs in its transaction with the change.
	RecordEvent(ctx context.Context, e store.PaymentEvent, fn func(ctx context.Context, tx pgx.Tx, c store.Change) error) (*store.Change, error)
	// EventRecorded says whether a lifecycle event is recorded: an error
	// wrapping ErrDuplicate when it is as sent, ErrMismatch when its id is
	// recorded otherwise, ErrNotFound when not.
	EventRecorded(ctx context.Context, e store.PaymentEvent) error
}

// A ChangeHook runs inside the transaction that records a lifecycle event
// (a refund, a failure, a dispute) when it changes its payment's state in a
// way that is forwarded, with the change: what it writes through tx commits
// if and only if the event does. An error rolls the event back (503, the
// PSP retries). The rules of RecordHook apply.
type ChangeHook func(ctx context.Context, tx pgx.Tx, c store.Change) error

// A RecordHook runs inside the transaction that records a payment, after
// the insert and before COMMIT, only for a newly recorded payment (never
// for a duplicate): what it writes through tx commits if and only if the
// payment does. An error rolls the payment back and the delivery is
// answered 503 with Retry-After, so the PSP retries and the retry records
// both once. A hook must not commit or roll back tx, and runs under the
// lock's lease: it is cancelled if the lease is lost.
type RecordHook func(ctx context.Context, tx pgx.Tx, p store.Payment) error

// Verifier checks a delivery's signature on the raw body bytes; it is
// satisfied by *signature.Verifier.
type Verifier interface {
	Verify(h http.Header, body []byte) (signature.Result, error)
}

// RedisPolicy says what to do when the lock service cannot be reached.
type RedisPolicy string

const (
	// Backstop records on the database constraint alone (the default): the
	// lock only saves work, so losing it costs efficiency, not correctness.
	Backstop RedisPolicy = "backstop"
	// Reject answers 503 with Retry-After and lets the PSP retry later.
	Reject RedisPolicy = "reject"
)

// Config tunes the webhook handler. Zero values take the defaults noted.
type Config struct {
	LockTTL          time.Duration // default 5s
	LockWait         time.Duration // default 2s; negative: do not wait
	LockPrefix       string        // default "paylock:"
	MaxBody          int64         // default 1 MiB
	ReleaseTimeout   time.Duration // default 1s
	DefaultCurrency  string        // used when a body has no currency; "" refuses such bodies
	Currencies       []string      // non-tender ISO 4217 codes to admit (XAU, XTS, ...)
	RedisUnavailable RedisPolicy   // default Backstop
	// RequestTimeout bounds one webhook delivery (default 8s), so that a
	// stalled database answers 503 with Retry-After before the PSP's own
	// timeout rather than to nobody.
	RequestTimeout time.Duration
	// FinishedTTL is how long a transaction's lock key keeps a "finished"
	// marker once its outcome is confirmed (default 10s; negative: release
	// plainly). Deliveries meeting the marker settle with a database read
	// instead of a write; the database still decides.
	FinishedTTL time.Duration
	// NoLock records on the database constraint alone, without Redis
	// (PAYLOCK_LOCK=off). It exists to measure what the lock buys; the
	// answers are the same either way.
	NoLock bool
	// Sources are the webhook endpoints served, POST /webhooks/<name>, each
	// with its own adapter and signature check. Nil serves the built-in
	// payments source alone, unsigned: see PaymentsSource.
	Sources []Source
	// MaxInFlight caps the webhook deliveries processed at once (default
	// 256): verified, locked and recorded. A delivery takes its slot once
	// its body is read; none free, it is answered 503 with Retry-After.
	MaxInFlight int
	// MaxReading caps the webhook deliveries whose body is being read
	// (default MaxInFlight); beyond it a delivery is answered 503 with
	// Retry-After before a byte of its body is read.
	MaxReading int
	// MinBodyRate is the slowest a body may arrive, in bytes per second,
	// once BodyGrace has passed (default 1 KiB/s; negative: no floor). A
	// slower body is cut and the delivery answered 408, so that slow
	// senders hold a reading slot for seconds, never a processing one.
	MinBodyRate int64
	// BodyGrace is how long a body may take before MinBodyRate applies
	// (default 2s).
	BodyGrace time.Duration
	Metrics   *Metrics     // nil records nothing
	Checks    []Check      // what GET /readyz pings
	Version   string       // reported by GET /
	Logger    *slog.Logger // default slog.Default()
	// Disbursements is the store of the loans and payouts sources.
	Disbursements Disbursements
	// Deliveries, when set, keeps every verified delivery that recorded
	// nothing (the delivery log, deliverylog.go): an ignored one is
	// answered 200 only once it is kept.
	Deliveries DeliveryLog
	// DeliveryRedact are JSON pointers (provider.Redact) of the members
	// the delivery log keeps as "[redacted]", by source name; those under
	// "" apply to every source. The provider's own (provider.Redactor)
	// apply too.
	DeliveryRedact map[string][]string
	// TracerProvider starts the spans of every delivery (the server span,
	// signature, adapt, record, confirm); nil is the global TracerProvider.
	// A noop.TracerProvider turns tracing off at no cost.
	// The lock's and the store's spans come from their own options.
	TracerProvider trace.TracerProvider
	// Propagator reads an incoming delivery's trace context (traceparent);
	// nil is the global propagator.
	Propagator propagation.TextMapPropagator
	// Notices is the fetch ledger of the payments that notifier sources'
	// webhooks name (provider.Notifier): a fetch that began after a notice
	// arrived answers it. Nil: every notice fetches.
	Notices NoticeLedger
	// FetchPacer shares each notifier source's fetch budget among the
	// replicas; nil (or while it cannot answer): each replica holds the
	// budget on its own.
	FetchPacer FetchPacer
	// FetchRate and FetchConcurrency are each notifier source's budget of
	// fetches from its provider's API: starts per second (default
	// DefaultFetchRate) and fetches at once (default
	// DefaultFetchConcurrency). Over it, a notice is answered 503 with
	// Retry-After.
	FetchRate        float64
	FetchConcurrency int
	// OnPayment, when set, runs in the recording transaction of every
	// newly recorded payment of every payment source, after the payment's
	// forward jobs (the store's) and the source's own OnRecord (see
	// RecordHook). Teams that embed paylock use it to act on a payment
	// exactly once: credit a balance, insert their own outbox row.
	OnPayment RecordHook
}

// PaymentsSource is the built-in payments source, POST /webhooks/payments:
// paylock's flat body, verified by v (nil: unsigned), locked under the
// key of paylock's first releases.
func PaymentsSource(v Verifier) Source {
	return Source{Name: "payments", Provider: PaymentsProvider, Verifier: v, LegacyLockKey: true}
}

func (c *Config) setDefaults() {
	if c.LockTTL <= 0 {
		c.LockTTL = 5 * time.Second
	}
	switch {
	case c.LockWait == 0:
		c.LockWait = 2 * time.Second
	case c.LockWait < 0:
		c.LockWait = 0
	}
	if c.LockPrefix == "" {
		c.LockPrefix = "paylock:"
	}
	if c.MaxBody <= 0 {
		c.MaxBody = 1 << 20
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 8 * time.Second
	}
	if c.FinishedTTL == 0 {
		c.FinishedTTL = 10 * time.Second
	}
	if c.ReleaseTimeout <= 0 {
		c.ReleaseTimeout = time.Second
	}
	if c.RedisUnavailable == "" {
		c.RedisUnavailable = Backstop
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 256
	}
	if c.MaxReading <= 0 {
		c.MaxReading = c.MaxInFlight
	}
	if c.MinBodyRate == 0 {
		c.MinBodyRate = 1 << 10
	}
	if c.BodyGrace <= 0 {
		c.BodyGrace = 2 * time.Second
	}
	if c.Sources == nil {
		c.Sources = []Source{PaymentsSource(nil)}
	}
	if c.FetchRate <= 0 {
		c.FetchRate = DefaultFetchRate
	}
	if c.FetchConcurrency <= 0 {
		c.FetchConcurrency = DefaultFetchConcurrency
	}
}

// Handler serves paylock's public HTTP API: the webhook sources, health and
// readiness. Build it with New.
type Handler struct {
	cfg      Config
	locker   Locker
	store    Recorder
	rules    *payload.Rules
	log      *slog.Logger
	mux      *http.ServeMux
	inflight chan struct{}    // a slot per webhook delivery being processed
	reading  chan struct{}    // a slot per webhook delivery whose body is being read
	lastShed atomic.Int64     // when a delivery was last shed (Unix ns); 0: never
	refusals *ratelog.Limiter // bounds the log lines of refused signatures, per source
	fetchLog *ratelog.Limiter // bounds the warnings of a fetch pacer that cannot answer, per source
	sources  map[string]*source
	trace    tracing
	waitOpts []lock.ObtainOption // obtain's, when it waits (waitOptions)
}

// New returns the HTTP handler for cfg's sources. It returns an error for a
// source that cannot be served: a bad name, a provider that is not
// registered, settings its provider refuses (wrapping its
// *provider.SettingError), a name served twice, or a loans or payouts
// source without Config.Disbursements.
func New(cfg Config, locker Locker, st Recorder) (*Handler, error) {
	cfg.setDefaults()
	h := &Handler{
		cfg:      cfg,
		locker:   locker,
		store:    st,
		rules:    payload.NewRules(cfg.DefaultCurrency, cfg.Currencies),
		log:      cfg.Logger,
		mux:      http.NewServeMux(),
		inflight: make(chan struct{}, cfg.MaxInFlight),
		reading:  make(chan struct{}, cfg.MaxReading),
		refusals: ratelog.New(refusalLogEvery, refusalLogBurst),
		fetchLog: ratelog.New(fetchPaceLogEvery, 1),
		sources:  make(map[string]*source, len(cfg.Sources)),
		trace:    newTracing(cfg),
		waitOpts: waitOptions(cfg.LockWait),
	}
	names := make([]string, 0, len(cfg.Sources))
	for _, s := range cfg.Sources {
		if slices.Contains(names, s.Name) {
			return nil, fmt.Errorf("handler: source %q is configured twice", s.Name)
		}
		src, err := h.build(s)
		if err != nil {
			return nil, err
		}
		names = append(names, s.Name)
		h.sources[s.Name] = src
		h.mux.HandleFunc("POST /webhooks/"+s.Name, h.serve(src))
		h.mux.HandleFunc("/webhooks/"+s.Name, problem.MethodNotAllowed(http.MethodPost))
	}
	h.cfg.Metrics.sources(names)
	h.mux.HandleFunc("GET /{$}", h.index)
	h.mux.HandleFunc("/{$}", problem.MethodNotAllowed(http.MethodGet))
	h.mux.HandleFunc("GET /healthz", h.healthz)
	h.mux.HandleFunc("/healthz", problem.MethodNotAllowed(http.MethodGet))
	h.mux.HandleFunc("GET /readyz", h.readyz)
	h.mux.HandleFunc("/readyz", problem.MethodNotAllowed(http.MethodGet))
	h.mux.HandleFunc("/", problem.NotFound)
	return h, nil
}

// Refused signatures are logged at most refusalLogBurst at once, then one
// per refusalLogEvery, per source; the next line written says how many
// were not (refusals_not_logged).
const (
	refusalLogBurst = 10
	refusalLogEvery = time.Second
)

// ServeHTTP bounds every request by RequestTimeout and admits webhook
// deliveries in two stages (see admission.go): MaxReading bodies read at
// once, each at MinBodyRate or faster, then MaxInFlight processed at once.
// A delivery beyond the reading cap is answered 503 with Retry-After before
// a byte of its body is read, so that slow or hostile senders cannot make
// the replica hold unbounded bodies nor starve the signed deliveries.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/webhooks/") {
		a, ar, ok := h.admitReading(r)
		if !ok {
			w.Header().Set("Connection", "close")
			problem.Write(w, problem.ErrOverloaded)
			return
		}
		defer a.done()
		r = ar
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	h.mux.ServeHTTP(w, r.WithContext(ctx))
}

func (h *Handler) index(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"name": "paylock", "version": h.cfg.Version})
}
