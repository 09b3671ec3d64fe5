package payout

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylock/paylock/store"
)

// tracerName names the package's tracer (its instrumentation scope).
const tracerName = "github.com/paylock/paylock/payout"

// The spans of the package: one per payout attempt (Worker.Work, a child
// of River's "river.work/payout"), and a client span per provider call
// (Client.Create, Client.Lookup), a child of the attempt's when there is
// one, whose trace context the call's request carries (traceparent).
const (
	SpanAttempt = "paylock.payout"
	SpanCreate  = "paylock.payout.create"
	SpanLookup  = "paylock.payout.lookup"
)

// The attributes of the attempt's span.
const (
	AttrDisbursementID = attribute.Key("paylock.disbursement_id")
	AttrLoanID         = attribute.Key("paylock.loan_id")
	AttrTranche        = attribute.Key("paylock.tranche")
	AttrAttempt        = attribute.Key("paylock.attempt") // the row's attempt count (1 for the first)
	AttrOutcome        = attribute.Key("paylock.outcome") // Event.Outcome
	AttrLookup         = attribute.Key("paylock.payout.lookup")
	AttrProviderRef    = attribute.Key("paylock.provider_ref")
)

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithTracerProvider makes the client's spans with tp (nil: the global
// provider, the default).
func WithTracerProvider(tp trace.TracerProvider) ClientOption {
	return func(c *Client) {
		if tp != nil {
			c.tracer = tp.Tracer(tracerName)
		}
	}
}

// WithPropagator writes the call's trace context into its request with p
// (nil: the global propagator, the default).
func WithPropagator(p propagation.TextMapPropagator) ClientOption {
	return func(c *Client) {
		if p != nil {
			c.prop = p
		}
	}
}

// startCall starts the client span of a provider call and writes its trace
// context into hr's headers; end it with endCall.
func (c *Client) startCall(hr *http.Request, name, key string) (*http.Request, trace.Span) {
	attrs := []attribute.KeyValue{attribute.String("http.request.method", hr.Method),
		attribute.String("server.address", hr.URL.Hostname()), attribute.String("paylock.idempotency_key", key)}
	if port, err := strconv.Atoi(hr.URL.Port()); err == nil {
		attrs = append(attrs, attribute.Int("server.port", port))
	}
	ctx, span := c.tracer.Start(hr.Context(), name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	c.prop.Inject(ctx, propagation.HeaderCarrier(hr.Header))
	return hr.WithContext(ctx), span
}

// endCall notes a provider call's answer on its span and ends it.
func endCall(span trace.Span, p Payout, err error) {
	var se *StatusError
	if errors.As(err, &se) {
		span.SetAttributes(attribute.Int("http.response.status_code", se.Code))
	} else if err == nil {
		span.SetAttributes(attribute.String("paylock.payout.status", p.Status))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// startAttempt starts the span of a payout job's attempt.
func (w *Worker) startAttempt(ctx context.Context, args store.PayoutArgs) (context.Context, trace.Span) {
	return w.tracer.Start(ctx, SpanAttempt, trace.WithAttributes(AttrDisbursementID.Int64(args.DisbursementID)))
}

// endAttempt notes the attempt's outcome on its span and ends it; err is
// what Work returns to River.
func endAttempt(span trace.Span, ev Event, err error) {
	d := ev.Disbursement
	if ev.Outcome != "" { // "": the row is gone, the job cancelled
		span.SetAttributes(AttrOutcome.String(string(ev.Outcome)))
	}
	if d.ID != 0 {
		span.SetAttributes(AttrLoanID.String(d.LoanID), AttrTranche.Int(d.Tranche), AttrAttempt.Int(d.Attempts),
			AttrLookup.Bool(ev.Lookup))
	}
	if ev.ProviderRef != "" {
		span.SetAttributes(AttrProviderRef.String(ev.ProviderRef))
	}
	if ev.Err != nil {
		span.RecordError(ev.Err)
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// defaultTracing is a new Client's tracer and propagator: the global ones.
func defaultTracing(c *Client) {
	c.tracer = otel.GetTracerProvider().Tracer(tracerName)
	c.prop = otel.GetTextMapPropagator()
}
