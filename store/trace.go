package store

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the store's own spans.
const tracerName = "github.com/paylock/paylock/store"

// tracerProvider is Config.TracerProvider, or the global one.
func (c Config) tracerProvider() trace.TracerProvider {
	if c.TracerProvider != nil {
		return c.TracerProvider
	}
	return otel.GetTracerProvider()
}

// Attributes of the store's spans.
const (
	attrSource    = attribute.Key("paylock.source")
	attrTxID      = attribute.Key("paylock.transaction_id")
	attrResult    = attribute.Key("paylock.result")
	attrBatchSize = attribute.Key("paylock.batch.size")
)

// startRecord starts RecordPaymentFunc's span, paylock.store.record_payment:
// the insert, the hook and COMMIT of one payment (a row of a multi-row
// statement on the batched path) under the caller's span, when that one
// records (nil span otherwise).
func (s *Payments) startRecord(ctx context.Context, p Payment) (context.Context, trace.Span) {
	if parent := trace.SpanFromContext(ctx); !parent.IsRecording() {
		// Untraced (tracing off, or the request not sampled): no span,
		// no allocation. endRecord leaves the caller's span alone.
		return ctx, nil
	}
	ctx, span := s.tracer.Start(ctx, "paylock.store.record_payment",
		trace.WithAttributes(attrSource.String(p.Source), attrTxID.String(p.TransactionID)))
	return ctx, span
}

// endRecord ends a record span with the result: recorded, duplicate,
// mismatch or error.
func endRecord(span trace.Span, err error) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		result := "recorded"
		switch {
		case errors.Is(err, ErrDuplicate):
			result = "duplicate"
		case errors.Is(err, ErrMismatch):
			result = "mismatch"
		case err != nil:
			result = "error"
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attrResult.String(result))
	}
	span.End()
}

// batchSize notes on ctx's record span how many payments its statement
// carried, and links it to the batch's span when there was one.
func batchSize(ctx context.Context, n int, batch trace.SpanContext) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrBatchSize.Int(n))
	if batch.IsValid() {
		span.AddLink(trace.Link{SpanContext: batch})
	}
}

// startBatch starts the span of a multi-row statement,
// paylock.store.record_batch, under ctx (a context of the batch's own):
// a child of the first sampled row's span, linked to every sampled row's
// span. With no sampled row it starts none.
func (s *Payments) startBatch(ctx context.Context, rows []*batchReq) (context.Context, trace.Span) {
	var links []trace.Link
	var parent trace.Span
	for _, r := range rows {
		if sp := trace.SpanFromContext(r.ctx); sp.SpanContext().IsSampled() {
			if parent == nil {
				parent = sp
			}
			links = append(links, trace.Link{SpanContext: sp.SpanContext()})
		}
	}
	if parent == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := s.tracer.Start(trace.ContextWithSpan(ctx, parent), "paylock.store.record_batch",
		trace.WithLinks(links...), trace.WithAttributes(attrBatchSize.Int(len(rows))))
	sc := span.SpanContext()
	for _, r := range rows {
		r.batch = sc
	}
	return ctx, span
}
