package forward

import (
	"context"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paylock/paylock/store"
)

// tracerName names the forward worker's tracer (its instrumentation scope).
const tracerName = "github.com/paylock/paylock/forward"

// SpanName is the name of an attempt's span: "paylock.forward <destination>".
const SpanName = "paylock.forward"

// The attributes of an attempt's span (besides http.response.status_code,
// which the http sink sets).
const (
	AttrDestination   = attribute.Key("paylock.destination")    // the destination's name
	AttrSink          = attribute.Key("paylock.sink")           // its URL's scheme: http, https, nats, kafka
	AttrType          = attribute.Key("paylock.forward.type")   // payment.recorded, disbursement.<status>...
	AttrWebhookID     = attribute.Key("paylock.webhook_id")     // the message's webhook-id
	AttrSource        = attribute.Key("paylock.source")         // a payment's source
	AttrTransactionID = attribute.Key("paylock.transaction_id") // a payment's transaction id
	AttrAttempt       = attribute.Key("paylock.attempt")        // River's attempt number, from 1
	AttrOutcome       = attribute.Key("paylock.outcome")        // delivered, failed_attempt, discarded
	AttrStatus        = attribute.Key("paylock.forward.status") // a refusal's status (Event.Status), when one came
)

// startAttempt starts the span of one attempt of job a, a child of ctx's
// (the job's, otelriver's "river.work/forward"): a client span toward an
// http(s) receiver, a producer span toward a broker.
// Untraced (a no-op TracerProvider: tracing off), it returns ctx and a
// no-op span at once, without building the span's attributes.
func (w *Worker) startAttempt(ctx context.Context, a store.ForwardArgs, attempt int, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if w.untraced {
		return ctx, noop.Span{}
	}
	dest := a.Destination
	if dest == "" {
		dest = LegacyDestination
	}
	sink := w.sinkKind(a)
	kind := trace.SpanKindProducer
	if sink == "http" || sink == "https" {
		kind = trace.SpanKindClient
	}
	attrs := []attribute.KeyValue{AttrDestination.String(dest), AttrSink.String(sink), AttrType.String(a.Type),
		AttrWebhookID.String(a.ID), AttrAttempt.Int(attempt)}
	if a.TransactionID != "" {
		attrs = append(attrs, AttrSource.String(a.Source), AttrTransactionID.String(a.TransactionID))
	}
	return w.tracer.Start(ctx, SpanName+" "+dest, append([]trace.SpanStartOption{trace.WithSpanKind(kind), trace.WithAttributes(attrs...)}, opts...)...)
}

// endAttempt notes the attempt's outcome on its span and ends it.
func endAttempt(span trace.Span, ev Event) {
	span.SetAttributes(AttrOutcome.String(string(ev.Outcome)))
	if ev.Status != 0 {
		span.SetAttributes(AttrStatus.Int(ev.Status))
	}
	if ev.Err != nil {
		span.RecordError(ev.Err)
		span.SetStatus(codes.Error, ev.Err.Error())
	}
	span.End()
}

// sinkKind is the scheme of a's destination URL ("" when unknown).
func (w *Worker) sinkKind(a store.ForwardArgs) string {
	raw := a.URL
	if a.Destination != "" {
		raw = w.cfg.Destinations[a.Destination]
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Scheme)
}

// injectTrace adds ctx's trace context (traceparent, tracestate: the
// attempt's span) to m's headers, which every sink sends.
func (w *Worker) injectTrace(ctx context.Context, m *Message) {
	w.prop.Inject(ctx, propagation.MapCarrier(m.Header))
}
