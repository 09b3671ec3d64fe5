package store

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracedSetup is setup with a TracerProvider recording every span.
func tracedSetup(t *testing.T) (*bundle, *sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return setup(t, func(c *Config) { c.TracerProvider = tp }), tp, rec
}

// forwardJobTrace returns the trace context the forward job of tx carries
// in its metadata, as otelriver reads it back on work.
func forwardJobTrace(t *testing.T, b *bundle, tx string) trace.SpanContext {
	t.Helper()
	var meta []byte
	err := b.admin.QueryRow(context.Background(),
		"SELECT metadata FROM river_job WHERE kind = $1 AND args->>'transaction_id' = $2", ForwardArgs{}.Kind(), tx).Scan(&meta)
	if err != nil {
		t.Fatalf("the forward job of %s: %v", tx, err)
	}
	if strings.Contains(string(meta), rowTraceKey) {
		t.Errorf("the job's metadata still holds %s: %s", rowTraceKey, meta)
	}
	var m map[string]any
	if err := json.Unmarshal(meta, &m); err != nil {
		t.Fatal(err)
	}
	carrier := propagation.MapCarrier{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			carrier[k] = s
		}
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}

func TestForwardJobInsertedInsideASpanCarriesItsTraceContext(t *testing.T) {
	t.Parallel()
	b, tp, rec := tracedSetup(t)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "delivery")
	if _, err := b.store.Payments().RecordPaymentForwarded(ctx, newPayment("tx_traced"), "default"); err != nil {
		t.Fatal(err)
	}
	parent.End()
	got := forwardJobTrace(t, b, "tx_traced")
	if !got.IsValid() || got.TraceID() != parent.SpanContext().TraceID() {
		t.Fatalf("the job's traceparent is in trace %v, want the delivery's %v", got.TraceID(), parent.SpanContext().TraceID())
	}
	// The job's traceparent names otelriver's insert span, a child of the
	// payment's record span, itself the delivery's child.
	var insert, record sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "river.insert_many":
			insert = s
		case "paylock.store.record_payment":
			record = s
		}
	}
	if insert == nil || record == nil || insert.Parent().SpanID() != record.SpanContext().SpanID() ||
		record.Parent().SpanID() != parent.SpanContext().SpanID() || insert.SpanContext().SpanID() != got.SpanID() {
		t.Errorf("want a river.insert_many span under the record's under the delivery's, named by the job's traceparent %v; spans: %v", got.SpanID(), names(rec.Ended()))
	}
}

func TestForwardJobsOfABatchCarryEachTheirOwnDeliverysTraceContext(t *testing.T) {
	t.Parallel()
	b, tp, _ := tracedSetup(t)
	ps := b.store.Payments()
	if ps.batch == nil {
		t.Fatal("the store does not batch: Config.BatchMax must default above 1 for this test")
	}
	tracer := tp.Tracer("test")
	hook := b.store.Outbox().ForwardRecordHook("default")
	var items []batchItem
	spans := map[string]trace.SpanContext{}
	for _, tx := range []string{"tx_a", "tx_b", "tx_c"} {
		ctx, span := tracer.Start(context.Background(), "delivery "+tx)
		defer span.End()
		spans[tx] = span.SpanContext()
		items = append(items, batchItem{ctx: ctx, p: newPayment(tx), fn: hook})
	}
	for _, o := range recordAsBatch(ps, items) {
		if o.err != nil {
			t.Fatal(o.err)
		}
	}
	for tx, want := range spans {
		if got := forwardJobTrace(t, b, tx); got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() {
			t.Errorf("the job of %s names span %v/%v, want its delivery's %v/%v", tx, got.TraceID(), got.SpanID(), want.TraceID(), want.SpanID())
		}
	}
}

// The batch writer's ctx may hold a span of its own (a span of the batch's
// statement): each job still names its own delivery.
func TestRowTraceWinsOverTheBatchWritersSpan(t *testing.T) {
	t.Parallel()
	b, tp, _ := tracedSetup(t)
	tracer := tp.Tracer("test")
	ctx := context.Background()
	tx, err := b.store.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var params []river.InsertManyParams
	spans := map[string]trace.SpanContext{}
	for _, id := range []string{"tx_x", "tx_y", "tx_none"} {
		rctx := ctx
		if id != "tx_none" { // tx_none: a row whose ctx has no span
			var span trace.Span
			rctx, span = tracer.Start(ctx, "delivery "+id)
			span.End()
			spans[id] = span.SpanContext()
		}
		opts := withRowTrace(rctx, &river.InsertOpts{Metadata: []byte(`{"kept":"yes"}`)})
		params = append(params, river.InsertManyParams{Args: ForwardArgs{ID: id, Type: ForwardPaymentRecorded,
			Destination: "default", Source: DefaultSource, TransactionID: id}, InsertOpts: opts})
	}
	bctx, batch := tracer.Start(ctx, "batch")
	defer batch.End()
	if _, err := b.store.jobs.InsertManyTx(bctx, tx, params); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "SELECT args->>'transaction_id', metadata FROM river_job")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		var meta map[string]any
		if err := rows.Scan(&id, &meta); err != nil {
			t.Fatal(err)
		}
		n++
		if id == "tx_none" {
			// Not the batch writer's trace context either.
			if meta["traceparent"] != nil || meta["kept"] != "yes" || meta[rowTraceKey] != nil {
				t.Errorf("job %s (no span): metadata %v, want no traceparent, kept=yes and no %s", id, meta, rowTraceKey)
			}
			continue
		}
		want := spans[id]
		tp := "00-" + want.TraceID().String() + "-" + want.SpanID().String() + "-01"
		if meta["traceparent"] != tp || meta["kept"] != "yes" || meta[rowTraceKey] != nil {
			t.Errorf("job %s: metadata %v, want traceparent %s, kept=yes and no %s", id, meta, tp, rowTraceKey)
		}
	}
	if n != len(spans)+1 {
		t.Errorf("%d jobs, want %d", n, len(spans))
	}
}

// TestTracingOffAddsNoJobMiddleware: with the no-op provider (the cli's
// when no OTEL_* variable asks for tracing) River's clients carry no
// tracing middleware, whose work on every job would buy nothing, and
// metadata without a row note passes through untouched.
func TestTracingOffAddsNoJobMiddleware(t *testing.T) {
	t.Parallel()
	if m := jobMiddleware(noop.NewTracerProvider()); m != nil {
		t.Errorf("middleware %v with tracing off, want none", m)
	}
	var cfg river.Config
	traceJobs(&cfg, noop.NewTracerProvider())
	if cfg.Middleware != nil {
		t.Errorf("traceJobs added %v with tracing off", cfg.Middleware)
	}
	if got := restoreRowTrace([]byte(`{"a":1}`)); string(got) != `{"a":1}` {
		t.Errorf("restoreRowTrace without the key changed the metadata to %s", got)
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}
