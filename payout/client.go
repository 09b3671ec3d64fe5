package payout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Errors of the provider client. Compare them with errors.Is; the client
// wraps them in a *StatusError when the provider answered.
var (
	// ErrTemporary means the call may or may not have reached the provider
	// and must be retried later with the same idempotency key: a timeout, a
	// connection error, a 408, 409 (the same key is in flight), 425, 429 or
	// 5xx, or a 2xx whose body could not be understood.
	ErrTemporary = errors.New("payout: provider unavailable; retry with the same key")

	// ErrRefused means the provider answered another 4xx: it refused the
	// request, so nothing was paid.
	ErrRefused = errors.New("payout: provider refused the request")

	// ErrNotFound means a lookup found no payout for the idempotency key.
	ErrNotFound = errors.New("payout: no payout for the idempotency key")
)

// StatusError is a provider answer that is not a success.
type StatusError struct {
	Code       int           // the HTTP status
	Detail     string        // the start of the answer's body
	RetryAfter time.Duration // from a Retry-After header in seconds; 0 if none
	kind       error         // ErrTemporary, ErrRefused or ErrNotFound
}

func (e *StatusError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%v: provider answered %d", e.kind, e.Code)
	}
	return fmt.Sprintf("%v: provider answered %d: %s", e.kind, e.Code, e.Detail)
}

func (e *StatusError) Unwrap() error { return e.kind }

// Request is the body of a payout creation. It is the same, byte for byte,
// on every attempt of a disbursement.
type Request struct {
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Reference string `json:"reference"`
}

// Payout is the provider's view of a payout.
type Payout struct {
	ID     string `json:"id"`
	Status string `json:"status"` // pending, paid or failed
}

// maxAnswer bounds how much of an answer the client reads.
const maxAnswer = 64 << 10

// Client calls the payout provider's API. It is safe for concurrent use.
// Bound every call with the context: the client sets no timeout itself.
type Client struct {
	base   string
	hc     *http.Client
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// NewClient returns a client for the provider at baseURL (its /v1/payouts
// endpoints), using hc, or http.DefaultClient when hc is nil. Each call is
// a client span (SpanCreate, SpanLookup) of the global TracerProvider, its
// trace context sent as traceparent by the global propagator, unless opts
// say otherwise.
func NewClient(baseURL string, hc *http.Client, opts ...ClientOption) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: hc}
	defaultTracing(c)
	for _, o := range opts {
		o(c)
	}
	return c
}

// Create asks the provider for a payout under key, the Idempotency-Key: the
// provider creates at most one payout per key, and answers a repeated call
// with the first call's answer. Errors wrap ErrTemporary (retry later with
// the same key) or ErrRefused (nothing was paid).
func (c *Client) Create(ctx context.Context, key string, req Request) (Payout, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Payout{}, fmt.Errorf("payout: encode request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/payouts", bytes.NewReader(body))
	if err != nil {
		return Payout{}, fmt.Errorf("payout: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Idempotency-Key", key)
	hr, span := c.startCall(hr, SpanCreate, key)
	p, err := c.do(hr)
	endCall(span, p, err)
	return p, err
}

// Lookup finds the payout created under key, without creating one. Errors
// wrap ErrNotFound (the provider has none), ErrTemporary or ErrRefused.
func (c *Client) Lookup(ctx context.Context, key string) (Payout, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet,
		c.base+"/v1/payouts?idempotency_key="+url.QueryEscape(key), nil)
	if err != nil {
		return Payout{}, fmt.Errorf("payout: %w", err)
	}
	hr, span := c.startCall(hr, SpanLookup, key)
	p, err := c.do(hr)
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusNotFound {
		se.kind = ErrNotFound
	}
	endCall(span, p, err)
	return p, err
}

func (c *Client) do(hr *http.Request) (Payout, error) {
	hr.Header.Set("Accept", "application/json")
	res, err := c.hc.Do(hr)
	if err != nil {
		return Payout{}, fmt.Errorf("%w: %w", ErrTemporary, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return Payout{}, fmt.Errorf("%w: reading the answer: %w", ErrTemporary, err)
	}
	if res.StatusCode == http.StatusOK || res.StatusCode == http.StatusCreated {
		var p Payout
		if err := json.Unmarshal(raw, &p); err != nil || p.ID == "" || !knownStatus(p.Status) {
			return Payout{}, &StatusError{Code: res.StatusCode, Detail: "unexpected answer: " + snippet(raw), kind: ErrTemporary}
		}
		return p, nil
	}
	se := &StatusError{Code: res.StatusCode, Detail: snippet(raw), RetryAfter: retryAfter(res.Header), kind: ErrTemporary}
	if refused(res.StatusCode) {
		se.kind = ErrRefused
	}
	return Payout{}, se
}

// refused reports whether a status means the provider will not do this
// request, however often it is retried.
func refused(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return code >= 400 && code < 500
}

func knownStatus(s string) bool { return s == "pending" || s == "paid" || s == "failed" }

func retryAfter(h http.Header) time.Duration {
	secs, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(secs) * time.Second
}

func snippet(b []byte) string {
	const limit = 200
	s := strings.TrimSpace(string(b))
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return s
}
