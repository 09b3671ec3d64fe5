// Package problem is the one seam between paylock's errors and the answers
// its HTTP listeners send: RFC 9457 problem details
// (application/problem+json).
//
// From is the only function that chooses a status for an error, for the
// webhook pipeline (package handler) and the admin listener (package admin)
// alike. It knows the sentinels of the packages below (store, lock,
// payload) and the errors of the HTTP surfaces themselves, declared here so
// that both listeners can return them. Internal details stay in the log:
// an answer never carries an error's text unless it is a reason written
// for the client (a payload.Error's detail, a review refusal's reason).
package problem

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/store"
)

// Problem is an RFC 9457 problem detail. A *Problem is itself an error, so
// that a handler can return the exact answer it wants; From passes it
// through unchanged.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Field names the offending body member of a validation problem.
	Field string `json:"field,omitempty"`
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration `json:"-"`
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// Base prefixes every problem type: each slug is a heading of
// docs/problems.md.
const Base = "https://github.com/paylock/paylock/blob/main/docs/problems.md#"

// New returns a problem of type Base+slug.
func New(status int, slug, title, field, detail string) *Problem {
	return &Problem{Type: Base + slug, Title: title, Status: status, Field: field, Detail: detail}
}

// Errors of the HTTP surfaces that are not another package's sentinels.
var (
	// ErrBusy: another delivery holds the transaction's lock (see Busy).
	ErrBusy = errors.New("handler: transaction in progress elsewhere")
	// ErrRedisUnavailable: Redis is down and the policy is reject.
	ErrRedisUnavailable = errors.New("handler: redis unavailable and PAYLOCK_REDIS_UNAVAILABLE=reject")
	// ErrUnauthenticated: a delivery's signature was not accepted.
	ErrUnauthenticated = errors.New("handler: signature not accepted")
	// ErrOverloaded: too many deliveries in flight.
	ErrOverloaded = errors.New("handler: too many webhook deliveries in flight")
	// ErrSlowBody: a delivery's body arrived slower than the floor
	// (PAYLOCK_MIN_BODY_RATE) and its read was cut.
	ErrSlowBody = errors.New("handler: body arrived too slowly")
	// ErrProviderAPI: the provider's API did not answer a fetch of a
	// payment a webhook named (a network error, a 5xx, a refused key):
	// nothing was recorded, and the provider retries the webhook.
	ErrProviderAPI = errors.New("handler: the provider's API did not answer")
	// ErrUnknownPayment: the provider's API knows no payment of the id a
	// webhook named.
	ErrUnknownPayment = errors.New("handler: the provider's API knows no such payment")
	// ErrHook: an in-transaction hook failed and the record rolled back.
	ErrHook = errors.New("handler: a record hook failed; the payment was rolled back")
	// ErrDisbursementMismatch: a loan event contradicts the stored tranche.
	ErrDisbursementMismatch = errors.New("handler: event contradicts the recorded disbursement")
	// ErrUnknownPayout: no disbursement has the payout id (yet).
	ErrUnknownPayout = errors.New("handler: no disbursement has this payout id")
	// ErrAdminToken: the admin listener's token or session is missing or wrong.
	ErrAdminToken = errors.New("admin: token missing or wrong")
	// ErrAdminHost: an admin request naming a Host the listener does not
	// answer for (PAYLOCK_ADMIN_HOSTS).
	ErrAdminHost = errors.New("admin: host not allowed")
	// ErrAdminCrossOrigin: an unsafe admin request from another origin.
	ErrAdminCrossOrigin = errors.New("admin: cross-origin request")
)

// Busy is ErrBusy with how long the sender should wait before retrying.
type Busy struct{ RetryAfter time.Duration }

func (e Busy) Error() string { return ErrBusy.Error() }
func (e Busy) Unwrap() error { return ErrBusy }

// unavailable is the answer of every outcome the database could not
// confirm: the sender retries and the retry converges.
func unavailable(slug, title, detail string) *Problem {
	p := New(http.StatusServiceUnavailable, slug, title, "", detail)
	p.RetryAfter = time.Second
	return p
}

// From maps any error to the answer the client gets. It is the only place
// that chooses a status for an error; internal details stay in the log.
func From(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	if p := fromPayload(err); p != nil {
		return p
	}
	if p := fromHTTP(err); p != nil {
		return p
	}
	if p := fromStore(err); p != nil {
		return p
	}
	return New(http.StatusInternalServerError, "internal", "Internal error", "",
		"the outcome could not be confirmed; retry later")
}

// fromPayload answers a refused body: 400 malformed, 422 invalid.
func fromPayload(err error) *Problem {
	var pe *payload.Error
	if !errors.As(err, &pe) {
		return nil
	}
	if errors.Is(pe.Kind, payload.ErrMalformed) {
		return New(http.StatusBadRequest, "malformed", "Malformed request body", pe.Field, pe.Detail)
	}
	return New(http.StatusUnprocessableEntity, "invalid", "Invalid request body", pe.Field, pe.Detail)
}

// fromHTTP answers the errors declared here.
func fromHTTP(err error) *Problem {
	var busy Busy
	switch {
	case errors.Is(err, ErrHook):
		// Whatever the embedder's hook returned (even one of store's
		// sentinels), the payment was rolled back: the PSP must retry.
		return unavailable("unavailable", "Store unavailable", "the outcome could not be confirmed; retry later")
	case errors.As(err, &busy):
		p := New(http.StatusConflict, "in-progress", "Transaction in progress",
			"", "another delivery of this transaction is being processed; retry later")
		p.RetryAfter = busy.RetryAfter
		return p
	case errors.Is(err, ErrOverloaded):
		return unavailable("overloaded", "Overloaded", "too many deliveries are being processed; retry later")
	case errors.Is(err, ErrSlowBody):
		return New(http.StatusRequestTimeout, "slow-body", "Request body too slow", "",
			"the body arrived slower than this server accepts; send it again at once")
	case errors.Is(err, ErrAdminToken):
		return New(http.StatusUnauthorized, "admin-token", "Unauthorized", "",
			"this listener needs Authorization: Bearer <PAYLOCK_ADMIN_TOKEN> (browsers: log in at /admin/login)")
	case errors.Is(err, ErrAdminHost):
		return New(http.StatusForbidden, "admin-host", "Forbidden", "",
			"this listener answers only for loopback names, IP addresses and PAYLOCK_ADMIN_HOSTS")
	case errors.Is(err, ErrAdminCrossOrigin):
		return New(http.StatusForbidden, "cross-origin", "Forbidden", "",
			"a request that changes something must come from this listener's own origin")
	case errors.Is(err, ErrUnauthenticated):
		return New(http.StatusUnauthorized, "signature", "Signature not accepted", "",
			"the webhook signature could not be verified")
	case errors.Is(err, ErrDisbursementMismatch):
		return New(http.StatusUnprocessableEntity, "mismatch", "Payload mismatch", "",
			"this loan tranche is recorded with a different amount or currency, or this event_id was received for something else")
	case errors.Is(err, ErrUnknownPayment):
		return New(http.StatusUnprocessableEntity, "unknown-payment", "Unknown payment", "id",
			"the provider's API knows no payment of this id for this source's key; nothing was recorded")
	case errors.Is(err, ErrProviderAPI):
		p := New(http.StatusServiceUnavailable, "provider-unavailable", "Provider API unavailable", "",
			"the provider's API did not answer the fetch of this payment; nothing was recorded; retry later")
		p.RetryAfter = 5 * time.Second
		return p
	case errors.Is(err, ErrUnknownPayout):
		p := New(http.StatusNotFound, "unknown-payout", "Unknown payout", "payout_id",
			"no disbursement has this payout_id yet; retry later")
		p.RetryAfter = time.Second
		return p
	}
	return nil
}

// fromStore answers the store's sentinels, and the outcomes that could not
// be confirmed (a lost lock or lease, an unreachable database, a deadline).
func fromStore(err error) *Problem {
	var reviewErr *store.ReviewError
	var orderErr *store.OrderFieldError
	switch {
	case errors.As(err, &reviewErr) && errors.Is(err, store.ErrReviewAction):
		return New(http.StatusBadRequest, "review-action", "Review action not allowed", "action", reviewErr.Reason)
	case errors.As(err, &reviewErr) && errors.Is(err, store.ErrReviewRefused):
		// The reason names the item, its state or the provider's answer:
		// for the operator who asked, never a driver's error text.
		return New(http.StatusConflict, "review-refused", "Resolution refused", "", reviewErr.Reason)
	case errors.Is(err, store.ErrOrderConflict):
		return New(http.StatusConflict, "order-conflict", "Order registered otherwise", "",
			"this order_id is registered with another amount, currency or expires_at; nothing changed")
	case errors.As(err, &orderErr):
		return New(http.StatusBadRequest, "malformed", "Malformed request", orderErr.Field, orderErr.Reason)
	case errors.Is(err, store.ErrNotFound):
		return New(http.StatusNotFound, "not-found", "Not found", "", "no such disbursement")
	case errors.Is(err, store.ErrInvalidPayload):
		return New(http.StatusUnprocessableEntity, "invalid", "Invalid request body", "",
			"the database cannot store a value in this body (a number out of range, or text it cannot encode)")
	case errors.Is(err, store.ErrMismatch):
		return New(http.StatusUnprocessableEntity, "mismatch", "Payload mismatch", "",
			"this transaction_id is already recorded with a different amount or currency")
	case errors.Is(err, ErrRedisUnavailable):
		return unavailable("lock-unavailable", "Lock service unavailable", "the lock service is unavailable; retry later")
	case errors.Is(err, lock.ErrLeaseLost):
		return unavailable("lock-lost", "Lock lost",
			"the transaction lock was lost while processing; the outcome could not be confirmed; retry later")
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return unavailable("unavailable", "Store unavailable", "the outcome could not be confirmed; retry later")
	}
	return nil
}

// Write answers err as application/problem+json and returns the problem
// it sent.
func Write(w http.ResponseWriter, err error) *Problem {
	p := From(err)
	if p.RetryAfter > 0 {
		secs := int(math.Ceil(p.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	switch {
	case p.Status == http.StatusUnauthorized && errors.Is(err, ErrAdminToken):
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

// MethodNotAllowed answers 405 as problem+json (the ServeMux's own 405 is
// plain text), naming the allowed method.
func MethodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		Write(w, New(http.StatusMethodNotAllowed, "method", "Method not allowed", "",
			r.Method+" is not allowed here; use "+allow))
	}
}

// NotFound answers 404 as problem+json.
func NotFound(w http.ResponseWriter, r *http.Request) {
	Write(w, New(http.StatusNotFound, "not-found", "Not found", "", "no such endpoint"))
}
