package store

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing of River's jobs: every River client of the store (the
// insert-only one and the working one StartJobs starts) carries otelriver's
// middleware with trace propagation. A job inserted inside a span (a
// delivery's) gets that span's W3C traceparent in its metadata, and the
// span that works it ("river.work/<kind>") is linked to it: a link, not a
// parent, since a job may run long after, or several times.
//
// A batch of payments (payments_batch.go) inserts the jobs of several
// deliveries in one InsertManyTx, under the batch writer's ctx, while
// each job belongs to its own delivery's trace. insertForward therefore
// notes each collected job's own trace context under rowTraceKey in its
// metadata (withRowTrace), and rowTraceMiddleware, inside otelriver's,
// puts it back as the job's traceparent: each job links to its delivery,
// whatever span the batch writer's ctx holds.

// rowTraceKey holds a job's own trace context in its metadata between
// withRowTrace and rowTraceMiddleware; it never reaches the database.
const rowTraceKey = "paylock_row_trace"

// tracingOff reports whether tp is OpenTelemetry's no-op provider: what
// the cli passes when no OTEL_* variable asks for tracing.
func tracingOff(tp trace.TracerProvider) bool {
	_, off := tp.(noop.TracerProvider)
	return off
}

// jobMiddleware is the middleware of every River client of the store:
// otelriver's (spans and trace propagation, over tp; nil: the global
// provider), then rowTraceMiddleware; none at all with tracing off, whose
// cost on each job inserted and worked would buy nothing.
func jobMiddleware(tp trace.TracerProvider) []rivertype.Middleware {
	if tracingOff(tp) {
		return nil
	}
	return []rivertype.Middleware{
		otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
			EnableTracePropagation:      true,
			EnableWorkSpanJobKindSuffix: true,
			TracerProvider:              tp,
		}),
		&rowTraceMiddleware{},
	}
}

// traceJobs adds jobMiddleware to cfg unless cfg has otelriver's already
// (a cfg started twice by RunJobs, or set up by its caller).
func traceJobs(cfg *river.Config, tp trace.TracerProvider) {
	if tracingOff(tp) {
		return
	}
	for _, m := range cfg.Middleware {
		if _, ok := m.(*otelriver.Middleware); ok {
			return
		}
	}
	cfg.Middleware = append(cfg.Middleware, jobMiddleware(tp)...)
}

// withRowTrace returns opts (a copy; a new one when nil) whose metadata
// notes ctx's trace context under rowTraceKey, for a job collected into a
// batch's InsertManyTx; an empty note without a span in ctx, so that the
// job gets no other row's trace context from the batch's ctx either.
// Only with the middleware installed (tracing on): rowTraceMiddleware
// removes the note before the job is stored.
func withRowTrace(ctx context.Context, opts *river.InsertOpts) *river.InsertOpts {
	carrier := propagation.MapCarrier{}
	// The format otelriver reads back on work.
	propagation.TraceContext{}.Inject(ctx, carrier)
	meta := map[string]any{}
	if opts != nil && len(opts.Metadata) > 0 {
		if err := json.Unmarshal(opts.Metadata, &meta); err != nil {
			return opts // not an object: River will refuse it anyway
		}
	}
	meta[rowTraceKey] = map[string]string(carrier)
	raw, err := json.Marshal(meta)
	if err != nil {
		return opts
	}
	out := river.InsertOpts{}
	if opts != nil {
		out = *opts
	}
	out.Metadata = raw
	return &out
}

// rowTraceMiddleware moves a job's own trace context, noted by
// withRowTrace, to the top of its metadata (traceparent, tracestate),
// over what otelriver injected from the inserting ctx.
type rowTraceMiddleware struct{ river.MiddlewareDefaults }

func (*rowTraceMiddleware) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams,
	doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	for _, p := range params {
		p.Metadata = restoreRowTrace(p.Metadata)
	}
	return doInner(ctx)
}

// restoreRowTrace returns metadata with rowTraceKey's entries at its top
// level and rowTraceKey removed; metadata without it is returned as is.
func restoreRowTrace(metadata []byte) []byte {
	if !bytes.Contains(metadata, []byte(rowTraceKey)) {
		return metadata
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &meta); err != nil {
		return metadata
	}
	var carrier map[string]string
	if err := json.Unmarshal(meta[rowTraceKey], &carrier); err != nil {
		return metadata
	}
	delete(meta, rowTraceKey)
	// What otelriver injected is the batch writer's context, not the
	// job's: none of it stays.
	for _, k := range (propagation.TraceContext{}).Fields() {
		delete(meta, k)
	}
	for k, v := range carrier {
		meta[k], _ = json.Marshal(v) // a string always marshals
	}
	raw, err := json.Marshal(meta)
	if err != nil {
		return metadata
	}
	return raw
}
