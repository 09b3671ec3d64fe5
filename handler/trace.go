package handler

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// tracerName is the instrumentation scope of the handler's spans.
const tracerName = "github.com/paylock/paylock/handler"

// Attributes of the handler's spans: the semantic conventions' HTTP ones,
// and paylock's own, which an operator filters by.
const (
	attrMethod      = attribute.Key("http.request.method")
	attrRoute       = attribute.Key("http.route")
	attrStatus      = attribute.Key("http.response.status_code")
	attrSource      = attribute.Key("paylock.source")
	attrTxID        = attribute.Key("paylock.transaction_id")
	attrTxIDs       = attribute.Key("paylock.transaction_ids")
	attrRequestID   = attribute.Key("paylock.request_id")
	attrOutcome     = attribute.Key("paylock.outcome")
	attrResult      = attribute.Key("paylock.result")
	attrLockMode    = attribute.Key("paylock.lock.mode")
	attrLockWaitMS  = attribute.Key("paylock.lock.wait_ms")
	attrEvents      = attribute.Key("paylock.events")
	attrSigResult   = attribute.Key("paylock.signature.result")
	attrSecretIndex = attribute.Key("paylock.signature.secret_index")
	attrBackstopDup = attribute.Key("paylock.backstop_duplicate")
)

// tracing is the handler's tracer and the propagator incoming deliveries
// are read with (Config.TracerProvider, Config.Propagator).
type tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	// off: the provider is OpenTelemetry's no-op one (noop.TracerProvider,
	// what paylock's commands pass when no OTEL_* variable asks for
	// tracing): a delivery starts no span at all.
	off bool
}

func newTracing(c Config) tracing {
	tp, prop := c.TracerProvider, c.Propagator
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	_, off := tp.(noop.TracerProvider)
	return tracing{tracer: tp.Tracer(tracerName), prop: prop, off: off}
}

// startDelivery starts a delivery's server span, "POST /webhooks/<source>"
// (the route, as HTTP's conventions name a server span). The span is the
// root of a trace of its own: an incoming traceparent (a PSP's, a
// gateway's, or anyone's: the webhook route is public and the span starts
// before the signature is checked) is only linked to, never continued, so
// that a sender can neither force its deliveries into the sample (a
// sampled flag under parentbased sampling) nor keep them out of it, nor
// choose the trace ids that logs and exemplars show. Baggage is not read.
func (t tracing) startDelivery(r *http.Request, src *source) (*http.Request, trace.Span) {
	if t.off {
		return r, noop.Span{}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithNewRoot()}
	remote := trace.SpanContextFromContext(t.prop.Extract(context.Background(), propagation.HeaderCarrier(r.Header)))
	if remote.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: remote}))
	}
	ctx, span := t.tracer.Start(r.Context(), src.spanName, opts...)
	if !span.SpanContext().IsValid() {
		// Tracing off: nothing for the request's context to carry (no
		// copy of the request).
		return r, span
	}
	if span.IsRecording() {
		span.SetAttributes(attrMethod.String(http.MethodPost), attrRoute.String(src.route), attrSource.String(src.name))
	}
	return r.WithContext(ctx), span
}

// endDelivery ends a delivery's span with what it came to. A 5xx is an
// error; a 4xx is the sender's (HTTP's conventions leave a server span's
// status unset then).
func endDelivery(span trace.Span, o *outcome) {
	if !span.IsRecording() {
		span.End()
		return
	}
	attrs := []attribute.KeyValue{attrStatus.Int(o.status), attrRequestID.String(o.requestID), attrOutcome.String(o.result)}
	switch len(o.refs) {
	case 0:
	case 1:
		attrs = append(attrs, attrTxID.String(o.refs[0]))
	default:
		attrs = append(attrs, attrTxIDs.StringSlice(o.refs))
	}
	if o.lockMode != "" {
		attrs = append(attrs, attrLockMode.String(o.lockMode), attrLockWaitMS.Float64(ms(o.lockWait)))
	}
	if o.backstopDup {
		attrs = append(attrs, attrBackstopDup.Bool(true))
	}
	span.SetAttributes(attrs...)
	if o.status >= 500 && o.err != nil {
		span.SetStatus(codes.Error, o.err.Error())
	}
	span.End()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// traced says whether ctx's span records: the steps' spans are started
// only under the delivery's when it does, so that an untraced delivery
// (tracing off, or not sampled) pays a context lookup per step, nothing
// more.
func traced(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// verify is the signature check, in a span of its own.
func (t tracing) verify(ctx context.Context, v Verifier, h http.Header, body []byte) (signature.Result, error) {
	if !traced(ctx) {
		return v.Verify(h, body)
	}
	_, span := t.tracer.Start(ctx, "paylock.signature")
	res, err := v.Verify(h, body)
	if span.IsRecording() {
		if err != nil {
			span.SetAttributes(attrSigResult.String(signature.Reason(err)))
		} else {
			span.SetAttributes(attrSigResult.String("ok"), attrSecretIndex.Int(res.SecretIndex))
		}
	}
	span.End()
	return res, err
}

// adapt is the source's parse of a trusted body into units, in a span of
// its own.
func (t tracing) adapt(ctx context.Context, src *source, body []byte, headerID string, fromAPI bool) ([]unit, error) {
	parse := src.parse
	if fromAPI {
		parse = src.parseAPI
	}
	if !traced(ctx) {
		return parse(body, headerID)
	}
	_, span := t.tracer.Start(ctx, "paylock.adapt")
	units, err := parse(body, headerID)
	if span.IsRecording() {
		span.SetAttributes(attrSource.String(src.name), attrEvents.Int(len(units)))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
	return units, err
}

// unitSpan starts the span of one step on u (paylock.record,
// paylock.confirm).
func (t tracing) unitSpan(ctx context.Context, name string, u unit) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(attrTxID.String(u.ref()))
	}
	return ctx, span
}

// endUnit ends a unit step's span with its result: the result of a write,
// duplicate, mismatch, not_found, or error.
func endUnit(span trace.Span, res string, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	switch {
	case errors.Is(err, store.ErrDuplicate):
		res = "duplicate"
	case errors.Is(err, store.ErrMismatch):
		res = "mismatch"
	case errors.Is(err, store.ErrNotFound):
		res = "not_found"
	case err != nil:
		res = "error"
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(attrResult.String(res))
	span.End()
}

// record is u.record in a paylock.record span.
func (t tracing) record(ctx context.Context, u unit) (string, error) {
	if !traced(ctx) {
		return u.record(ctx)
	}
	ctx, span := t.unitSpan(ctx, "paylock.record", u)
	res, err := u.record(ctx)
	endUnit(span, res, err)
	return res, err
}

// confirm is u.confirm in a paylock.confirm span.
func (t tracing) confirm(ctx context.Context, u unit) (string, error) {
	if !traced(ctx) {
		return u.confirm(ctx)
	}
	ctx, span := t.unitSpan(ctx, "paylock.confirm", u)
	res, err := u.confirm(ctx)
	endUnit(span, res, err)
	return res, err
}

// observe records v in obs, with the trace id as an exemplar when ctx's
// span is sampled (exposed on /metrics in the OpenMetrics format).
func observe(ctx context.Context, obs prometheus.Observer, v float64) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		if eo, ok := obs.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	obs.Observe(v)
}
