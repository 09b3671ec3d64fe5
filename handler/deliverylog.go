package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/store"
)

// DeliveryLog keeps the verified deliveries that recorded nothing (the
// delivery log): *store.Deliveries is one.
type DeliveryLog interface {
	// Keep adds d to the log, or counts it on the row of the same body;
	// store.ErrDeliveryLogFull when the source's cap is reached.
	Keep(ctx context.Context, d store.Delivery) (int64, error)
}

// keptHeaders are the request headers the delivery log keeps: an
// allowlist, so that a signature, a secret, a cookie or a header that no
// one thought of is never stored.
var keptHeaders = []string{
	"Content-Type", "Content-Length", "User-Agent", "X-Request-Id", "X-Forwarded-For", "Traceparent",
	"Webhook-Id", "Webhook-Timestamp", "Svix-Id", "Svix-Timestamp", "Stripe-Version",
}

// keepable says what the delivery log keeps of a delivery that came to
// err (nil: answered 2xx) after o: the outcome and the problem, and false
// for what it does not keep. Only a delivery whose body passed the
// signature check is kept, and only when it recorded nothing: a body that
// carried nothing the source records (ignored), or a refusal that retrying
// as it is cannot change (a 4xx without Retry-After: the adapter's or the
// rules' refusal, a mismatch). A busy lock, a store outage or a 401 is
// never kept.
func keepable(o *outcome, err error) (store.DeliveryOutcome, *problem.Problem, bool) {
	if !o.admitted {
		return "", nil, false
	}
	if err == nil {
		return store.DeliveryIgnored, nil, o.result == "ignored"
	}
	p := problem.From(err)
	switch {
	case p.Status < 400 || p.Status >= 500 || p.Status == http.StatusUnauthorized || p.RetryAfter > 0:
		return "", nil, false
	case errors.Is(err, store.ErrMismatch), errors.Is(err, problem.ErrDisbursementMismatch):
		return store.DeliveryMismatch, p, true
	}
	return store.DeliveryRefused, p, true
}

// keptBy returns what the delivery log keeps of source s's deliveries:
// its adapter a's Keeper (nil: the body whole), and the pointers redacted
// before a body is kept: its provider p's defaults (p and a may be nil),
// then Config.DeliveryRedact's for every source and for s.
func (h *Handler) keptBy(s Source, p provider.Provider, a provider.Adapter) (provider.Keeper, []string) {
	var redact []string
	if r, ok := p.(provider.Redactor); ok {
		redact = append(redact, r.Redacted()...)
	}
	redact = append(redact, h.cfg.DeliveryRedact[""]...)
	redact = append(redact, h.cfg.DeliveryRedact[s.Name]...)
	k, _ := a.(provider.Keeper)
	return k, redact
}

// keptOf is what the delivery log keeps of src's verified body: the
// provider's Keeper's rows (Adyen: each signed item alone, re-serialised
// and keyed by its signed fields), else the body whole, typed by its
// top-level "type" (Stripe's), each redacted by src's pointers.
func keptOf(src *source, body []byte) []provider.Kept {
	var kept []provider.Kept
	if src != nil && src.keeper != nil {
		kept = src.keeper.Kept(body)
	} else {
		kept = []provider.Kept{{Body: body, EventType: typeOf(body)}}
	}
	if src != nil {
		for i := range kept {
			kept[i].Body = provider.Redact(kept[i].Body, src.redact)
		}
	}
	return kept
}

// keep adds the delivery o came to (err) to the delivery log when it is
// one the log keeps (keptOf: one row or more), and returns the error to
// answer with: err, or for an ignored delivery that could not be kept
// (the database failed), the keeping's error, so that the sender retries
// rather than the delivery being lost. A delivery over its source's cap
// is dropped and counted (paylock_delivery_log_dropped_total); its answer
// is unchanged.
func (h *Handler) keep(ctx context.Context, r *http.Request, o *outcome, err error) error {
	if h.cfg.Deliveries == nil {
		return err
	}
	outcome, p, ok := keepable(o, err)
	if !ok {
		return err
	}
	if src := h.sources[o.source]; src != nil && src.signsNothing && err != nil {
		// Anyone can send a source that signs nothing (Mollie's) what it
		// refuses: kept, it would fill the log and crowd out the
		// deliveries worth keeping. Its refusals are logged and counted.
		return err
	}
	headers := keptHeadersOf(r.Header)
	// The answer waits for the rows, within the delivery's own deadline;
	// a client that hung up does not stop it.
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.ReleaseTimeout+time.Second)
	defer cancel()
	var kerr error
	for _, k := range keptOf(h.sources[o.source], o.body) {
		eventID := k.EventID
		if eventID == "" {
			eventID = eventIDOf(k.Body, o.headerID)
		}
		d := store.Delivery{Source: o.source, EventID: eventID, EventType: k.EventType, SignatureID: o.headerID,
			Outcome: outcome, Status: http.StatusOK, Key: k.Key, Body: k.Body, Headers: headers, RequestID: o.requestID}
		if p != nil {
			d.Status, d.ProblemType, d.ProblemDetail = p.Status, p.Type, p.Detail
		}
		_, e := h.cfg.Deliveries.Keep(kctx, d)
		switch {
		case e == nil:
		case errors.Is(e, store.ErrDeliveryLogFull):
			h.cfg.Metrics.deliveryDropped(o.source, "cap")
		default:
			kerr = e
		}
	}
	if kerr == nil {
		return err
	}
	h.cfg.Metrics.deliveryDropped(o.source, "error")
	h.log.ErrorContext(ctx, "keeping a delivery in the delivery log failed", slog.String("source", o.source),
		slog.String("request_id", o.requestID), slog.String("outcome", string(outcome)), slog.Any("error", kerr))
	if err == nil {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, kerr)
	}
	return err
}

// typesOf are the event types of src's verified body, one per row the
// delivery log keeps of it (keptOf), unredacted: "" for one that names
// none.
func typesOf(src *source, body []byte) []string {
	if src == nil || src.keeper == nil {
		return []string{typeOf(body)}
	}
	kept := src.keeper.Kept(body)
	out := make([]string, len(kept))
	for i, k := range kept {
		out[i] = k.EventType
	}
	return out
}

// namedTypes are the distinct non-empty types of types, in order.
func namedTypes(types []string) []string {
	var out []string
	for _, t := range types {
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// typeOf is the body's top-level "type" string (a Stripe event's), ""
// when it has none.
func typeOf(body []byte) string {
	var top struct {
		Type json.RawMessage `json:"type"`
	}
	var s string
	if json.Unmarshal(body, &top) != nil || json.Unmarshal(top.Type, &s) != nil {
		return ""
	}
	return s
}

// keptHeadersOf returns the allowlisted headers of hdr.
func keptHeadersOf(hdr http.Header) map[string][]string {
	out := make(map[string][]string, len(keptHeaders))
	for _, k := range keptHeaders {
		if v := hdr.Values(k); len(v) > 0 {
			out[k] = v
		}
	}
	return out
}

// eventIDOf is the provider's event id of a kept delivery: the signature
// headers' id when they carry one, else the body's top-level "id" or
// "event_id" string (Stripe's, paylock's), else "".
func eventIDOf(body []byte, headerID string) string {
	if headerID != "" {
		return headerID
	}
	var top struct {
		ID      json.RawMessage `json:"id"`
		EventID json.RawMessage `json:"event_id"`
	}
	if json.Unmarshal(body, &top) != nil {
		return ""
	}
	for _, raw := range []json.RawMessage{top.ID, top.EventID} {
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" && len(s) <= 255 {
			return s
		}
	}
	return ""
}
