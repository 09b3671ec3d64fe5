package handler

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// unit is one thing a delivery asks paylock to record: a payment, a loan
// tranche's disbursement or a payout status. Every unit of every source goes
// through the same steps (settle): lock, record under the lease, release
// with the finished marker, or answer from what is stored.
type unit interface {
	// lockKey is the Redis key that serialises work on this unit; "" means
	// the unit takes no lock (its write is a compare-and-set in the
	// database).
	lockKey() string
	// ref identifies the unit in logs: a transaction id, an idempotency
	// key, a payout id.
	ref() string
	// record writes the unit. It returns the result of a write that took
	// effect, or an error: wrapping store.ErrDuplicate when the database
	// already holds the unit as sent, store.ErrMismatch when it holds it
	// otherwise.
	record(ctx context.Context) (string, error)
	// confirm answers the unit from what is stored: a result, an error
	// wrapping store.ErrNotFound when nothing is, or store.ErrMismatch.
	confirm(ctx context.Context) (string, error)
	// answer is the 2xx JSON body of a delivery made of this unit alone.
	answer(result string) any
}

// attributed is implemented by units that add attributes of their own to
// the delivery's log line.
type attributed interface {
	logAttrs() []slog.Attr
}

// outcome is what one delivery came to, for its log line and its metrics.
type outcome struct {
	source      string
	msg         string // the log line's message: "payment webhook", ...
	requestID   string
	refs        []string // the units' refs (transaction ids, ...)
	result      string
	status      int
	lockWait    time.Duration
	lockHeld    time.Duration
	lockMode    string // "locked", "backstop" (Redis down), "off" or ""
	waited      bool   // a lock was busy at least once
	sigFailure  string // signature.Reason of a refused delivery
	secretIndex int    // which configured secret verified the delivery; -1: none
	redisDown   string // the policy applied when Redis was unreachable
	dbWrites    int    // write transactions attempted
	releaseErr  error
	backstopDup bool
	attrs       []slog.Attr // what the source adds to the log line
	err         error
	// admitted: the body passed the signature check (or the source takes
	// unsigned deliveries); body and headerID are then the delivery's, for
	// the delivery log.
	admitted bool
	body     []byte
	headerID string
	// ignoredTypes are the event types of an ignored delivery (one per
	// item the delivery log keeps; "" for an item that names none), for
	// its answer, its log line and paylock_deliveries_ignored_total.
	ignoredTypes []string
	knownTypes   map[string]bool // the source's adapter's types (source.types)
}

// result is the JSON body of a 2xx answer.
type result struct {
	Result        string `json:"result"`
	TransactionID string `json:"transaction_id,omitempty"`
	// Type is the event type of an ignored delivery, Types those of an
	// ignored batch of several types.
	Type  string   `json:"type,omitempty"`
	Types []string `json:"types,omitempty"`
}

// batchResult is the 2xx JSON body of a delivery of several units.
type batchResult struct {
	Result  string `json:"result"`
	Records []any  `json:"records"`
}

// serve is the one request wrapper of every webhook source: request id,
// bounded read, signature, adapter, per-unit lock → record → release, one
// answer, one log line, one metrics path.
func (h *Handler) serve(src *source) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		r, span := h.trace.startDelivery(r, src)
		o := outcome{source: src.name, msg: src.logMsg, requestID: requestID(r), secretIndex: -1}
		defer endDelivery(span, &o)
		w.Header().Set("X-Request-Id", o.requestID)
		ans, err := h.deliver(w, r, src, &o)
		err = h.keep(r.Context(), r, &o, err)
		switch {
		case err != nil:
			o.err = err
			p := problem.Write(w, err)
			o.status, o.result = p.Status, "error"
			if errors.Is(err, store.ErrMismatch) {
				o.result = "mismatch"
			}
		case src.ack != nil:
			o.status = http.StatusOK
			ct, body := src.ack.Acknowledge()
			w.Header().Set("Content-Type", ct)
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(body)
		default:
			o.status = http.StatusOK
			writeJSON(w, http.StatusOK, ans)
		}
		took := time.Since(start)
		h.cfg.Metrics.observe(r.Context(), o, took)
		if o.sigFailure != "" {
			// Anyone can send refused deliveries: their lines are
			// bounded per source (the metrics count every one).
			ok, held := h.refusals.Allow(src.name)
			if !ok {
				return
			}
			if held > 0 {
				o.attrs = append(o.attrs, slog.Int("refusals_not_logged", held))
			}
		}
		h.logDelivery(r.Context(), o, took)
	}
}

// deliver runs one delivery of src and returns its 2xx body, or an error for
// writeError. Units are settled in order; the first failure ends the
// delivery (the sender retries it whole, and the retry converges on the
// duplicates of the units already settled).
func (h *Handler) deliver(w http.ResponseWriter, r *http.Request, src *source, o *outcome) (any, error) {
	ctx := context.WithValue(r.Context(), requestIDKey{}, o.requestID)
	body, headerID, err := h.readVerified(w, r, src, o)
	if err != nil {
		return nil, err
	}
	o.admitted, o.body, o.headerID = true, body, headerID
	units, results, err := h.process(ctx, src, body, headerID, o, false)
	if err != nil {
		return nil, err
	}
	if len(units) == 0 {
		o.ignoredTypes, o.knownTypes = typesOf(src, body), src.types
		res := result{Result: "ignored"}
		if named := namedTypes(o.ignoredTypes); len(named) == 1 {
			res.Type = named[0]
		} else {
			res.Types = named
		}
		return res, nil
	}
	answers := make([]any, len(units))
	for i, u := range units {
		answers[i] = u.answer(results[i])
	}
	if len(units) == 1 {
		return answers[0], nil
	}
	return batchResult{Result: o.result, Records: answers}, nil
}

// process is what every body of src goes through once it is trusted (a
// verified delivery, or a body read from the provider's own API by Ingest):
// parse it into units, then settle each unit in order. It returns the units
// and each one's result; the first failure ends it. o.result is the
// delivery's overall result ("ignored" when the body carries no unit).
func (h *Handler) process(ctx context.Context, src *source, body []byte, headerID string, o *outcome, fromAPI bool) ([]unit, []string, error) {
	units, err := h.trace.adapt(ctx, src, body, headerID, fromAPI)
	if err != nil {
		return nil, nil, err
	}
	o.refs = make([]string, len(units))
	for i, u := range units {
		o.refs[i] = u.ref()
		if a, ok := u.(attributed); ok && len(units) == 1 {
			o.attrs = a.logAttrs()
		}
	}
	if len(units) == 0 {
		o.result = "ignored"
		return nil, nil, nil
	}
	for _, u := range units {
		// Every notice of the delivery takes its place before any is
		// settled (noticeUnit).
		if a, ok := u.(arriver); ok {
			a.arrive(ctx)
		}
	}
	results := make([]string, len(units))
	var refused error
	for i, u := range units {
		res, err := h.settle(ctx, u, o)
		if err != nil {
			if !passOver(u, err) {
				return nil, nil, err
			}
			// One payment of a batch of notices that the provider's API
			// refuses for good (unknown, an answer the rules refuse)
			// stops neither the others nor their retries: the delivery
			// is answered with its refusal once every other is settled.
			refused = cmp.Or(refused, err)
			continue
		}
		if i == 0 || res == "processed" || res == "accepted" || res == "applied" {
			o.result = res
		}
		results[i] = res
	}
	if refused != nil {
		return nil, nil, refused
	}
	return units, results, nil
}

// passOver reports whether err, u's, is a refusal for good (a 4xx without
// Retry-After) of one notice of a batch (noticeUnit.inBatch), which the
// batch's other units are settled past.
func passOver(u unit, err error) bool {
	n, ok := u.(*noticeUnit)
	if !ok || !n.inBatch {
		return false
	}
	p := problem.From(err)
	return p.Status >= 400 && p.Status < 500 && p.RetryAfter == 0
}

// readVerified checks the signature headers, reads at most MaxBody bytes,
// verifies the signature on those raw bytes, and checks the body is JSON.
// It returns the body and the delivery's id from the signature headers (""
// when they carry none).
func (h *Handler) readVerified(w http.ResponseWriter, r *http.Request, src *source, o *outcome) ([]byte, string, error) {
	refuse := func(err error) ([]byte, string, error) {
		o.sigFailure = signature.Reason(err)
		if errors.Is(err, signature.ErrTooLarge) {
			// Too many items to verify: the sender must split the batch,
			// not retry it as it is.
			return nil, "", problem.New(http.StatusRequestEntityTooLarge, "too-large", "Body too large", "",
				"the delivery holds more items than one delivery may carry")
		}
		// The precise reason goes to the log; the caller learns only that
		// the signature was not accepted.
		return nil, "", fmt.Errorf("%w: %w", problem.ErrUnauthenticated, err)
	}
	if src.basicAuth != nil && !basicAuthOK(r, src.basicAuth) {
		o.sigFailure = "basic_auth"
		return nil, "", fmt.Errorf("%w: basic authentication missing or wrong", problem.ErrUnauthenticated)
	}
	if pc, ok := src.verifier.(prechecker); ok {
		// Missing, malformed or stale signature headers are refused before
		// a byte of the body is read.
		if err := pc.Precheck(r.Header); err != nil {
			return refuse(err)
		}
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return nil, "", err
	}
	if err := admissionOf(r.Context()).run(); err != nil {
		return nil, "", err
	}
	var id string
	if src.verifier != nil {
		res, err := h.trace.verify(r.Context(), src.verifier, r.Header, body)
		if err != nil {
			return refuse(err)
		}
		id = res.ID
		o.secretIndex = res.SecretIndex
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !slices.Contains(src.mediaTypes, mt) {
		return nil, "", problem.New(http.StatusUnsupportedMediaType, "media-type", "Unsupported media type", "",
			"Content-Type must be "+strings.Join(src.mediaTypes, " or "))
	}
	return body, id, nil
}

// readBody reads at most MaxBody bytes of r's body, at MinBodyRate or
// faster, and gives the delivery's reading slot back.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	defer admissionOf(r.Context()).bodyRead()
	br, clear := h.bodyReader(w, r, time.Now())
	body, err := io.ReadAll(http.MaxBytesReader(w, io.NopCloser(br), h.cfg.MaxBody))
	clear()
	if err == nil {
		return body, nil
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, problem.New(http.StatusRequestEntityTooLarge, "too-large", "Body too large", "",
			fmt.Sprintf("the body exceeds %d bytes", h.cfg.MaxBody))
	case errors.Is(err, errBodyDeadline):
		w.Header().Set("Connection", "close")
		return nil, fmt.Errorf("%w: %w", problem.ErrSlowBody, err)
	}
	return nil, payload.Malformed("", "could not read the body")
}

// basicAuthOK reports whether r carries the basic authentication want
// ("user:password"), compared in constant time.
func basicAuthOK(r *http.Request, want []byte) bool {
	user, pass, ok := r.BasicAuth()
	return ok && subtle.ConstantTimeCompare([]byte(user+":"+pass), want) == 1
}

// prechecker is implemented by verifiers that can refuse a delivery from its
// headers alone (*signature.Verifier).
type prechecker interface {
	Precheck(h http.Header) error
}

// settle brings one unit to a confirmed outcome: it takes the unit's lock
// (waiting up to LockWait while another delivery holds it), records the
// unit under the lock's lease and releases it, or answers from what is
// stored when another delivery settled the unit first.
func (h *Handler) settle(ctx context.Context, u unit, o *outcome) (string, error) {
	key := u.lockKey()
	if key == "" {
		return h.write(ctx, nil, u, o)
	}
	if h.cfg.NoLock {
		o.lockMode = "off"
		return h.write(ctx, nil, u, o)
	}
	lk, waited, err := h.obtain(ctx, key, o, true)
	var busy problem.Busy
	if errors.As(err, &busy) {
		// The holder did not finish within LockWait. If it (or an earlier
		// delivery) recorded the unit, this delivery is a duplicate;
		// otherwise one more try, then 409.
		if res, err := h.trace.confirm(ctx, u); !errors.Is(err, store.ErrNotFound) {
			return res, err
		}
		lk, _, err = h.obtain(ctx, key, o, false)
	}
	if errors.Is(err, errFinished) {
		// Another delivery settled this unit moments ago: a read confirms
		// it. Should the database not have it (a restore, say), the
		// database decides, without the lock.
		if res, err := h.trace.confirm(ctx, u); !errors.Is(err, store.ErrNotFound) {
			return res, err
		}
		lk, err = nil, nil
	}
	if err != nil {
		return "", err
	}
	if lk != nil && waited {
		// The lock was busy and is ours now: its holder most likely
		// recorded the unit. A read settles that without a write attempt.
		if res, err := h.trace.confirm(ctx, u); !errors.Is(err, store.ErrNotFound) {
			h.release(ctx, lk, u, o, err == nil)
			return res, err
		}
	}
	return h.write(ctx, lk, u, o)
}

// write records u under lk's lease (or, with lk nil, on the database
// constraints alone) and releases lk once the outcome is decided, leaving
// the finished marker when it is settled.
func (h *Handler) write(ctx context.Context, lk *held, u unit, o *outcome) (string, error) {
	o.dbWrites++
	if lk == nil {
		rctx := ctx
		if u.lockKey() != "" && !h.cfg.NoLock {
			// No lock guards this unit (Redis unreachable, or a finished
			// marker the database did not confirm): its other deliveries
			// are likely writing it at this moment. Recorded by a
			// statement of its own, its wait on their row lock holds up
			// no other payment's batch.
			rctx = store.Alone(ctx)
		}
		res, err := h.trace.record(rctx, u)
		if errors.Is(err, store.ErrDuplicate) && u.lockKey() != "" && !h.cfg.NoLock {
			// Redis was down, or the marker said "finished" and the read
			// found nothing: the constraint caught what no lock guarded.
			o.backstopDup = true
		}
		return settled(res, err)
	}
	leaseCtx, stopLease := lk.KeepAlive(ctx)
	// The lease gates what is sent and committed; a statement already sent
	// is interrupted only by ctx (store.WithLease): cutting an autocommit
	// insert short when the lease ends would turn its outcome unknown.
	res, err := h.trace.record(store.WithLease(ctx, leaseCtx), u)
	leaseErr := context.Cause(leaseCtx)
	stopLease()
	lost := errors.Is(leaseErr, lock.ErrLeaseLost)
	if err != nil && lost && !errors.Is(err, store.ErrDuplicate) && !errors.Is(err, store.ErrMismatch) {
		err = fmt.Errorf("%w: %w", leaseErr, err)
	}
	done := err == nil || errors.Is(err, store.ErrDuplicate)
	if h.release(ctx, lk, u, o, done) {
		lost = true
	}
	if lost && errors.Is(err, store.ErrDuplicate) {
		// The lock was not exclusive for the whole request: the database
		// constraint caught what the lock let through.
		o.backstopDup = true
	}
	return settled(res, err)
}

// settled turns a record's duplicate into the "duplicate" result.
func settled(res string, err error) (string, error) {
	if errors.Is(err, store.ErrDuplicate) {
		return "duplicate", nil
	}
	return res, err
}

// release lets lk go under a context of its own: a client that hung up must
// not leave the lock held for a whole TTL. Whatever Redis says now, the
// answer stays the outcome the database decided. It reports whether the lock
// had already expired, vanished or changed owner (ErrNotHeld): the lock was
// not exclusive for the whole request. With done (the database confirmed
// the outcome) the key keeps a finished marker for FinishedTTL.
func (h *Handler) release(ctx context.Context, lk *held, u unit, o *outcome, done bool) (expired bool) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.ReleaseTimeout)
	if _, ok := u.(unsettled); ok {
		done = false
	}
	if done && h.cfg.FinishedTTL > 0 {
		o.releaseErr = lk.Finish(rctx, h.cfg.FinishedTTL)
	} else {
		o.releaseErr = lk.Release(rctx)
	}
	cancel()
	held := time.Since(lk.at)
	o.lockHeld += held
	switch {
	case errors.Is(o.releaseErr, lock.ErrNotHeld) && time.Now().Before(lk.Deadline()):
		h.log.WarnContext(ctx, "lock lost before its TTL ran out: Redis lost the key (failover, flush, eviction) or a release was retried",
			slog.String("source", o.source), slog.String("ref", u.ref()), slog.Duration("held", held), slog.Duration("ttl", h.cfg.LockTTL))
		return true
	case errors.Is(o.releaseErr, lock.ErrNotHeld):
		h.log.WarnContext(ctx, "lock expired before release: PAYLOCK_LOCK_TTL is too short for this request",
			slog.String("source", o.source), slog.String("ref", u.ref()), slog.Duration("held", held), slog.Duration("ttl", h.cfg.LockTTL))
		return true
	case o.releaseErr != nil:
		h.log.WarnContext(ctx, "lock release failed; the lock expires with its TTL",
			slog.String("source", o.source), slog.String("ref", u.ref()), slog.Any("error", o.releaseErr))
	}
	return false
}

// An unsettled unit's outcome is no lasting fact of its lock key (a
// notice: a later one may announce a new state), so its release leaves no
// finished marker: the deliveries waiting on the lock take it in turn, and
// the fetch ledger answers each (noticeUnit).
type unsettled interface {
	unsettled()
}

// requestIDKey is the context key of the delivery's request id (what
// deliver puts in the context its units record under).
type requestIDKey struct{}

// requestIDFrom returns the delivery's request id, "" outside a delivery.
func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
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

// logAttrsMax is how many attributes logDelivery adds at most.
const logAttrsMax = 15

// logDelivery writes the one line of a delivery: info for 2xx, warn for 4xx
// refusals, error for a mismatch or a 5xx. It never carries the body or a
// secret.
func (h *Handler) logDelivery(ctx context.Context, o outcome, took time.Duration) {
	level := logLevelFor(o.status)
	if o.result == "mismatch" {
		level = slog.LevelError
	}
	// One record, sized once: the source's own attributes and at most
	// logAttrsMax of the line's.
	attrs := make([]slog.Attr, 0, len(o.attrs)+logAttrsMax)
	attrs = append(attrs, o.attrs...)
	attrs = append(attrs,
		slog.String("source", o.source),
		slog.String("request_id", o.requestID),
	)
	switch len(o.refs) {
	case 0:
	case 1:
		attrs = append(attrs, slog.String("transaction_id", o.refs[0]))
	default:
		attrs = append(attrs, slog.Any("transaction_ids", o.refs))
	}
	attrs = append(attrs,
		slog.String("outcome", o.result),
		slog.Int("status", o.status),
		slog.Duration("duration", took),
	)
	if o.lockMode != "" {
		attrs = append(attrs, slog.String("lock_mode", o.lockMode),
			slog.Duration("lock_wait", o.lockWait), slog.Duration("lock_hold", o.lockHeld))
	}
	if o.secretIndex >= 0 {
		attrs = append(attrs, slog.Int("secret_index", o.secretIndex))
	}
	switch named := namedTypes(o.ignoredTypes); len(named) {
	case 0:
	case 1:
		attrs = append(attrs, slog.String("event_type", named[0]))
	default:
		attrs = append(attrs, slog.Any("event_types", named))
	}
	if o.sigFailure != "" {
		attrs = append(attrs, slog.String("signature_failure", o.sigFailure))
	}
	if o.backstopDup {
		attrs = append(attrs, slog.Bool("backstop_duplicate", true))
	}
	if o.err != nil && (o.status >= 500 || o.result == "mismatch") {
		attrs = append(attrs, slog.String("error", o.err.Error()))
	}
	h.log.LogAttrs(ctx, level, o.msg, attrs...)
}
