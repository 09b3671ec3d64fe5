package handler

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/store"
)

// problem is an RFC 9457 problem detail. Handlers return it (or wrap a
// sentinel) and writeError turns every error into one.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Field names the offending body member of a validation problem.
	Field string `json:"field,omitempty"`
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration `json:"-"`
}

func (p *problem) Error() string { return p.Title + ": " + p.Detail }

const problemBase = "https://github.com/paylock/paylock/blob/main/docs/problems.md#"

func newProblem(status int, slug, title, field, detail string) *problem {
	return &problem{Type: problemBase + slug, Title: title, Status: status, Field: field, Detail: detail}
}

func badRequest(field, detail string) error {
	return newProblem(http.StatusBadRequest, "malformed", "Malformed request body", field, detail)
}

func unprocessable(field, detail string) error {
	return newProblem(http.StatusUnprocessableEntity, "invalid", "Invalid request body", field, detail)
}

// Errors of the request path that are not another package's sentinels.
var (
	errBusy             = errors.New("handler: transaction in progress elsewhere")
	errRedisUnavailable = errors.New("handler: redis unavailable and PAYLOCK_REDIS_UNAVAILABLE=reject")
	errUnauthenticated  = errors.New("handler: signature not accepted")
	errFinished         = errors.New("handler: transaction settled moments ago")
	errOverloaded       = errors.New("handler: too many webhook deliveries in flight")
	errAdminToken       = errors.New("handler: admin token missing or wrong")
	errHook             = errors.New("handler: a record hook failed; the payment was rolled back")
	errAdminCrossOrigin = errors.New("handler: cross-origin admin request")
)

// busyError carries how long the PSP should wait before retrying.
type busyError struct{ retryAfter time.Duration }

func (e busyError) Error() string { return errBusy.Error() }
func (e busyError) Unwrap() error { return errBusy }

// toProblem maps any error of the request path to the answer the client
// gets. It is the only place that chooses a status for an error; internal
// details stay in the log.
func toProblem(err error) *problem {
	var p *problem
	if errors.As(err, &p) {
		return p
	}
	var (
		busy      busyError
		reviewErr *store.ReviewError
	)
	switch {
	case errors.Is(err, errHook):
		// Whatever the embedder's hook returned (even one of store's
		// sentinels), the payment was rolled back: the PSP must retry.
		p = newProblem(http.StatusServiceUnavailable, "unavailable", "Store unavailable", "",
			"the outcome could not be confirmed; retry later")
		p.RetryAfter = time.Second
	case errors.As(err, &busy):
		p = newProblem(http.StatusConflict, "in-progress", "Transaction in progress",
			"", "another delivery of this transaction is being processed; retry later")
		p.RetryAfter = busy.retryAfter
	case errors.Is(err, errOverloaded):
		p = newProblem(http.StatusServiceUnavailable, "overloaded", "Overloaded", "",
			"too many deliveries are being processed; retry later")
		p.RetryAfter = time.Second
	case errors.Is(err, errAdminToken):
		p = newProblem(http.StatusUnauthorized, "admin-token", "Unauthorized", "",
			"this listener needs Authorization: Bearer <PAYLOCK_ADMIN_TOKEN> (browsers: log in at /admin/login)")
	case errors.Is(err, errAdminCrossOrigin):
		p = newProblem(http.StatusForbidden, "cross-origin", "Forbidden", "",
			"a request with the admin session cookie must come from this origin")
	case errors.Is(err, errUnauthenticated):
		p = newProblem(http.StatusUnauthorized, "signature", "Signature not accepted", "",
			"the webhook signature could not be verified")
	case errors.Is(err, errDisbursementMismatch):
		p = newProblem(http.StatusUnprocessableEntity, "mismatch", "Payload mismatch", "",
			"this loan tranche is recorded with a different amount or currency, or this event_id was received for something else")
	case errors.Is(err, errUnknownPayout):
		p = newProblem(http.StatusNotFound, "unknown-payout", "Unknown payout", "payout_id",
			"no disbursement has this payout_id yet; retry later")
		p.RetryAfter = time.Second
	case errors.As(err, &reviewErr) && errors.Is(err, store.ErrReviewAction):
		p = newProblem(http.StatusBadRequest, "review-action", "Review action not allowed", "action", reviewErr.Reason)
	case errors.As(err, &reviewErr) && errors.Is(err, store.ErrReviewRefused):
		// The reason names the item, its state or the provider's answer:
		// for the operator who asked, never a driver's error text.
		p = newProblem(http.StatusConflict, "review-refused", "Resolution refused", "", reviewErr.Reason)
	case errors.Is(err, store.ErrNotFound):
		p = newProblem(http.StatusNotFound, "not-found", "Not found", "", "no such disbursement")
	case errors.Is(err, store.ErrInvalidPayload):
		p = newProblem(http.StatusUnprocessableEntity, "invalid", "Invalid request body", "",
			"the database cannot store a value in this body (a number out of range, or text it cannot encode)")
	case errors.Is(err, store.ErrMismatch):
		p = newProblem(http.StatusUnprocessableEntity, "mismatch", "Payload mismatch", "",
			"this transaction_id is already recorded with a different amount or currency")
	case errors.Is(err, errRedisUnavailable):
		p = newProblem(http.StatusServiceUnavailable, "lock-unavailable", "Lock service unavailable", "",
			"the lock service is unavailable; retry later")
		p.RetryAfter = time.Second
	case errors.Is(err, lock.ErrLeaseLost):
		p = newProblem(http.StatusServiceUnavailable, "lock-lost", "Lock lost", "",
			"the transaction lock was lost while processing; the outcome could not be confirmed; retry later")
		p.RetryAfter = time.Second
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		p = newProblem(http.StatusServiceUnavailable, "unavailable", "Store unavailable", "",
			"the outcome could not be confirmed; retry later")
		p.RetryAfter = time.Second
	default:
		p = newProblem(http.StatusInternalServerError, "internal", "Internal error", "",
			"the outcome could not be confirmed; retry later")
	}
	return p
}

// writeError answers err as application/problem+json.
func writeError(w http.ResponseWriter, err error) *problem {
	p := toProblem(err)
	if p.RetryAfter > 0 {
		secs := int(math.Ceil(p.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	switch {
	case p.Status == http.StatusUnauthorized && errors.Is(err, errAdminToken):
		w.Header().Set("WWW-Authenticate", `Bearer realm="paylock admin"`)
	case p.Status == http.StatusUnauthorized:
		// RFC 9110 asks a 401 to name a challenge: here, a signed delivery.
		w.Header().Set("WWW-Authenticate", `Signature realm="paylock webhooks"`)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
	return p
}

// Header values shared by every answer; net/http only reads them.
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	if r, ok := v.(result); ok {
		// The answer of nearly every delivery, written as json.Encoder
		// would write it, without reflection.
		if b, ok := r.appendJSON(make([]byte, 0, 64+len(r.TransactionID))); ok {
			w.WriteHeader(status)
			_, _ = w.Write(b)
			return
		}
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// appendJSON appends r as json.Encoder encodes it, newline included; ok is
// false when a value holds a byte the encoder would escape (then the
// encoder writes it).
func (r result) appendJSON(b []byte) ([]byte, bool) {
	if !plainJSONText(r.Result) || !plainJSONText(r.TransactionID) {
		return nil, false
	}
	b = append(b, `{"result":"`...)
	b = append(b, r.Result...)
	if r.TransactionID != "" {
		b = append(b, `","transaction_id":"`...)
		b = append(b, r.TransactionID...)
	}
	return append(b, "\"}\n"...), true
}

// plainJSONText reports whether s is printable ASCII that encoding/json
// writes as is between quotes (no quote, backslash or HTML character).
func plainJSONText(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < ' ' || c > '~', c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// logLevelFor is the level a request's summary line is logged at.
func logLevelFor(status int) slog.Level {
	switch {
	case status == http.StatusUnprocessableEntity:
		return slog.LevelWarn
	case status >= 500:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// methodNotAllowed answers 405 as problem+json (the ServeMux's own 405 is
// plain text), naming the allowed method.
func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, newProblem(http.StatusMethodNotAllowed, "method", "Method not allowed", "",
			r.Method+" is not allowed here; use "+allow))
	}
}

// notFound answers 404 as problem+json.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, newProblem(http.StatusNotFound, "not-found", "Not found", "", "no such endpoint"))
}
