package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/google/uuid"

	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// Locker is what the handler needs from the lock package.
type Locker interface {
	Obtain(ctx context.Context, key string, ttl time.Duration, opts ...lock.ObtainOption) (*lock.Lock, error)
	KeyTTL(ctx context.Context, key string) (time.Duration, error)
}

// Store is what the handler needs from the store package.
type Store interface {
	RecordPayment(ctx context.Context, p store.Payment) (store.Payment, error)
	Confirm(ctx context.Context, p store.Payment) (store.Payment, error)
}

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
	NoLock   bool
	Verifier Verifier     // nil accepts unsigned deliveries (PAYLOCK_ALLOW_UNSIGNED)
	Metrics  *Metrics     // nil records nothing
	Checks   []Check      // what GET /readyz pings
	Version  string       // reported by GET /
	Logger   *slog.Logger // default slog.Default()
	// Disbursements serves POST /webhooks/loans, POST /webhooks/payouts and
	// GET /disbursements/{loan_id}/{tranche}; nil leaves them out.
	Disbursements Disbursements
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
}

// Handler serves paylock's HTTP API. Build it with New.
type Handler struct {
	cfg    Config
	locker Locker
	store  Store
	rules  *inputRules
	log    *slog.Logger
	mux    *http.ServeMux
}

// New returns the HTTP handler for the webhook endpoints.
func New(cfg Config, locker Locker, st Store) *Handler {
	cfg.setDefaults()
	h := &Handler{
		cfg:    cfg,
		locker: locker,
		store:  st,
		rules:  newInputRules(cfg.DefaultCurrency, cfg.Currencies),
		log:    cfg.Logger,
		mux:    http.NewServeMux(),
	}
	h.mux.HandleFunc("POST /webhooks/payments", h.payments)
	h.mux.HandleFunc("/webhooks/payments", methodNotAllowed(http.MethodPost))
	h.mux.HandleFunc("GET /{$}", h.index)
	h.mux.HandleFunc("/{$}", methodNotAllowed(http.MethodGet))
	h.mux.HandleFunc("GET /healthz", h.healthz)
	h.mux.HandleFunc("/healthz", methodNotAllowed(http.MethodGet))
	h.mux.HandleFunc("GET /readyz", h.readyz)
	h.mux.HandleFunc("/readyz", methodNotAllowed(http.MethodGet))
	if cfg.Disbursements != nil {
		h.routeDisbursements()
	}
	h.mux.HandleFunc("/", notFound)
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	h.mux.ServeHTTP(w, r.WithContext(ctx))
}

func (h *Handler) index(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"name": "paylock", "version": h.cfg.Version})
}

// outcome is what one webhook request came to, for its log line and its
// metrics.
type outcome struct {
	requestID   string
	txID        string
	result      string
	status      int
	lockWait    time.Duration
	lockHeld    time.Duration
	lockMode    string // "locked", "backstop" (Redis down) or ""
	waited      bool   // the lock was busy at least once
	sigFailure  string // signature.Reason of a refused delivery
	secretIndex int    // which configured secret verified the delivery; -1: none
	redisDown   string // the policy applied when Redis was unreachable
	dbWrites    int    // write transactions attempted
	obtainedAt  time.Time
	releaseErr  error
	backstopDup bool
	err         error
}

func (h *Handler) payments(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	o := outcome{requestID: requestID(r), secretIndex: -1}
	w.Header().Set("X-Request-Id", o.requestID)
	res, err := h.payment(w, r, &o)
	if err != nil {
		o.err = err
		p := writeError(w, err)
		o.status, o.result = p.Status, "error"
		if errors.Is(err, store.ErrMismatch) {
			o.result = "mismatch"
		}
	} else {
		o.status, o.result = http.StatusOK, res.Result
		writeJSON(w, http.StatusOK, res)
	}
	took := time.Since(start)
	h.cfg.Metrics.observe("payments", o, took)
	h.logRequest(r.Context(), o, took)
}

// requestID is the caller's X-Request-Id when it is a plain token (a load
// balancer's), else a fresh one: the value goes into logs and headers.
func requestID(r *http.Request) string {
	id := r.Header.Get("X-Request-Id")
	if id == "" || len(id) > 128 || strings.ContainsFunc(id, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:", c))
	}) {
		return uuid.NewString()
	}
	return id
}

func (h *Handler) logRequest(ctx context.Context, o outcome, took time.Duration) {
	level := logLevelFor(o.status)
	if o.result == "mismatch" {
		level = slog.LevelError
	}
	attrs := []slog.Attr{
		slog.String("request_id", o.requestID),
		slog.String("transaction_id", o.txID),
		slog.String("outcome", o.result),
		slog.Int("status", o.status),
		slog.Duration("duration", took),
		slog.Duration("lock_wait", o.lockWait),
		slog.Duration("lock_hold", o.lockHeld),
	}
	if o.lockMode != "" {
		attrs = append(attrs, slog.String("lock_mode", o.lockMode))
	}
	if o.sigFailure != "" {
		attrs = append(attrs, slog.String("signature_failure", o.sigFailure))
	}
	if o.backstopDup {
		attrs = append(attrs, slog.Bool("backstop_duplicate", true))
	}
	if o.err != nil && o.status >= 500 || o.result == "mismatch" {
		attrs = append(attrs, slog.String("error", o.err.Error()))
	}
	h.log.LogAttrs(ctx, level, "payment webhook", attrs...)
}

// readVerified reads at most MaxBody bytes, verifies the delivery's
// signature on those raw bytes, and checks the body is JSON. It returns the
// body and the delivery's id from the signature headers ("" when they carry
// none).
func (h *Handler) readVerified(w http.ResponseWriter, r *http.Request, o *outcome) ([]byte, string, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, "", newProblem(http.StatusRequestEntityTooLarge, "too-large", "Body too large", "",
				fmt.Sprintf("the body exceeds %d bytes", h.cfg.MaxBody))
		}
		return nil, "", badRequest("", "could not read the body")
	}
	var id string
	if h.cfg.Verifier != nil {
		res, err := h.cfg.Verifier.Verify(r.Header, body)
		if err != nil {
			o.sigFailure = signature.Reason(err)
			// The precise reason goes to the log; the caller learns only
			// that the signature was not accepted.
			return nil, "", fmt.Errorf("%w: %w", errUnauthenticated, err)
		}
		id = res.ID
		h.log.DebugContext(r.Context(), "signature verified", slog.Int("secret_index", res.SecretIndex))
		o.secretIndex = res.SecretIndex
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, "", newProblem(http.StatusUnsupportedMediaType, "media-type", "Unsupported media type", "",
			"Content-Type must be application/json")
	}
	return body, id, nil
}

// payment runs one payment webhook: read, decode, validate, lock, record,
// release. It returns the 2xx answer, or an error for writeError.
func (h *Handler) payment(w http.ResponseWriter, r *http.Request, o *outcome) (result, error) {
	ctx := r.Context()
	body, eventID, err := h.readVerified(w, r, o)
	if err != nil {
		return result{}, err
	}
	in, err := h.rules.decodePayment(body)
	if err != nil {
		return result{}, err
	}
	o.txID = in.TransactionID
	if eventID == "" {
		eventID = in.EventID
	}
	p := store.Payment{TransactionID: in.TransactionID, Amount: in.Amount, Currency: in.Currency, Payload: body, EventID: eventID}
	key := h.cfg.LockPrefix + "payment:" + in.TransactionID

	if h.cfg.NoLock {
		o.lockMode = "off"
		return h.settleRecord(ctx, nil, p, o)
	}
	lk, err := h.obtain(ctx, key, o)
	var busy busyError
	if errors.As(err, &busy) {
		// The holder did not finish within LockWait. If it (or an earlier
		// delivery) recorded the payment, this delivery is a duplicate;
		// otherwise one more try, then 409.
		if res, err := h.confirm(ctx, p); !errors.Is(err, store.ErrNotFound) {
			return res, err
		}
		lk, err = h.obtainOnce(ctx, key, o)
	}
	if errors.Is(err, errFinished) {
		// Another delivery settled this transaction moments ago: a read
		// confirms it. Should the database not have it (a restore, say),
		// the database decides, without the lock.
		if res, err := h.confirm(ctx, p); !errors.Is(err, store.ErrNotFound) {
			return res, err
		}
		lk, err = nil, nil
	}
	if err != nil {
		return result{}, err
	}
	if lk != nil && o.waited {
		// The lock was busy and is ours now: its holder most likely recorded
		// the payment. A read settles that without a write attempt.
		if res, err := h.confirm(ctx, p); !errors.Is(err, store.ErrNotFound) {
			h.release(ctx, lk, o, err == nil)
			return res, err
		}
	}
	return h.settleRecord(ctx, lk, p, o)
}

// settleRecord records p (under lk, when not nil) and turns the store's
// verdict into the answer.
func (h *Handler) settleRecord(ctx context.Context, lk *lock.Lock, p store.Payment, o *outcome) (result, error) {
	_, err := h.record(ctx, lk, p, o)
	switch {
	case err == nil:
		return result{Result: "processed", TransactionID: p.TransactionID}, nil
	case errors.Is(err, store.ErrDuplicate):
		return result{Result: "duplicate", TransactionID: p.TransactionID}, nil
	default:
		return result{}, err
	}
}

// confirm answers a delivery from the stored payment: duplicate, or an
// error wrapping store.ErrMismatch, store.ErrNotFound or a failure.
func (h *Handler) confirm(ctx context.Context, p store.Payment) (result, error) {
	_, err := h.store.Confirm(ctx, p)
	if errors.Is(err, store.ErrDuplicate) {
		return result{Result: "duplicate", TransactionID: p.TransactionID}, nil
	}
	return result{}, err
}

// record writes p under lk's lease (or, with lk nil, on the database
// constraint alone) and releases lk once the outcome is decided.
func (h *Handler) record(ctx context.Context, lk *lock.Lock, p store.Payment, o *outcome) (store.Payment, error) {
	o.dbWrites++
	if lk == nil {
		stored, err := h.store.RecordPayment(ctx, p)
		if errors.Is(err, store.ErrDuplicate) && !h.cfg.NoLock {
			o.backstopDup = true
		}
		return stored, err
	}
	leaseCtx, stopLease := lk.KeepAlive(ctx)
	stored, err := h.store.RecordPayment(leaseCtx, p)
	leaseErr := context.Cause(leaseCtx)
	stopLease()
	lost := errors.Is(leaseErr, lock.ErrLeaseLost)
	if err != nil && lost && !errors.Is(err, store.ErrDuplicate) && !errors.Is(err, store.ErrMismatch) {
		err = fmt.Errorf("%w: %w", leaseErr, err)
	}

	settled := err == nil || errors.Is(err, store.ErrDuplicate)
	if h.release(ctx, lk, o, settled) {
		lost = true
	}
	if lost && errors.Is(err, store.ErrDuplicate) {
		// The lock was not exclusive for the whole request: the database
		// constraint caught what the lock let through.
		o.backstopDup = true
	}
	return stored, err
}

// release lets lk go under a context of its own: a client that hung up must
// not leave the lock held for a whole TTL. Whatever Redis says now, the
// answer stays the outcome the database decided. It reports whether the lock
// had already expired, vanished or changed owner (ErrNotHeld): the lock was
// not exclusive for the whole request. With settled (the database
// confirmed the outcome) the key keeps a finished marker for FinishedTTL.
func (h *Handler) release(ctx context.Context, lk *lock.Lock, o *outcome, settled bool) (expired bool) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.ReleaseTimeout)
	if settled && h.cfg.FinishedTTL > 0 {
		o.releaseErr = lk.Finish(rctx, h.cfg.FinishedTTL)
	} else {
		o.releaseErr = lk.Release(rctx)
	}
	cancel()
	o.lockHeld = time.Since(o.obtainedAt)
	switch {
	case errors.Is(o.releaseErr, lock.ErrNotHeld) && time.Now().Before(lk.Deadline()):
		h.log.WarnContext(ctx, "lock lost before its TTL ran out: Redis lost the key (failover, flush, eviction) or a release was retried",
			slog.String("transaction_id", o.txID), slog.Duration("held", o.lockHeld), slog.Duration("ttl", h.cfg.LockTTL))
		return true
	case errors.Is(o.releaseErr, lock.ErrNotHeld):
		h.log.WarnContext(ctx, "lock expired before release: PAYLOCK_LOCK_TTL is too short for this request",
			slog.String("transaction_id", o.txID), slog.Duration("held", o.lockHeld), slog.Duration("ttl", h.cfg.LockTTL))
		return true
	case o.releaseErr != nil:
		h.log.WarnContext(ctx, "lock release failed; the lock expires with its TTL",
			slog.String("transaction_id", o.txID), slog.Any("error", o.releaseErr))
	}
	return false
}

// obtain takes key, waiting up to LockWait (polling with backoff and
// jitter) while another request holds it. It returns a nil lock and nil
// error when Redis is unreachable and the policy is Backstop, and a
// busyError when the key is still held after the wait.
func (h *Handler) obtain(ctx context.Context, key string, o *outcome) (*lock.Lock, error) {
	start := time.Now()
	defer func() { o.lockWait = time.Since(start) }()
	deadline := start.Add(h.cfg.LockWait)
	// Randomized exponential backoff: replicas waiting on one key do not poll
	// in step.
	bo := &backoff.ExponentialBackOff{
		InitialInterval:     10 * time.Millisecond,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         250 * time.Millisecond,
	}
	bo.Reset()
	for {
		lk, busy, err := h.tryObtain(ctx, key, o)
		if !busy {
			return lk, err
		}
		o.waited = true
		left := time.Until(deadline)
		if left <= 0 {
			return nil, busyError{}
		}
		t := time.NewTimer(min(bo.NextBackOff(), left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// obtainOnce makes one attempt at key. A busy key is a busyError carrying
// the holder's remaining TTL, for Retry-After.
func (h *Handler) obtainOnce(ctx context.Context, key string, o *outcome) (*lock.Lock, error) {
	lk, busy, err := h.tryObtain(ctx, key, o)
	if !busy {
		return lk, err
	}
	ttl, err := h.locker.KeyTTL(ctx, key)
	if err != nil || ttl <= 0 {
		ttl = h.cfg.LockTTL
	}
	return nil, busyError{retryAfter: ttl}
}

// tryObtain makes one attempt at key and reports whether it was busy. It
// returns a nil lock and nil error when Redis is unreachable and the policy
// is Backstop.
func (h *Handler) tryObtain(ctx context.Context, key string, o *outcome) (lk *lock.Lock, busy bool, err error) {
	lk, err = h.locker.Obtain(ctx, key, h.cfg.LockTTL)
	switch {
	case err == nil:
		o.lockMode = "locked"
		o.obtainedAt = time.Now()
		return lk, false, nil
	case errors.Is(err, lock.ErrNotObtained):
		return nil, true, err
	case errors.Is(err, lock.ErrFinished):
		return nil, false, errFinished
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case h.cfg.RedisUnavailable == Reject:
		o.redisDown = string(Reject)
		h.log.WarnContext(ctx, "redis unavailable: rejecting (PAYLOCK_REDIS_UNAVAILABLE=reject)", slog.Any("error", err))
		return nil, false, fmt.Errorf("%w: %w", errRedisUnavailable, err)
	default:
		o.lockMode, o.redisDown = "backstop", string(Backstop)
		h.log.WarnContext(ctx, "redis unavailable: recording on the database constraint alone (PAYLOCK_REDIS_UNAVAILABLE=backstop)", slog.Any("error", err))
		return nil, false, nil
	}
}
