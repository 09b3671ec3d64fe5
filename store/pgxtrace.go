package store

import (
	"context"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// pgxTracing hands pgx's trace hooks to otelpgx only under a recording
// span: a query outside a traced request (River's polling, the purgers, an
// unsampled delivery) costs one context lookup, no allocation. A hook pair
// stays matched: an end sees the context its start returned, which holds
// the query's own (recording) span only when the start made one.
type pgxTracing struct{ t *otelpgx.Tracer }

var (
	_ pgx.QueryTracer       = pgxTracing{}
	_ pgx.BatchTracer       = pgxTracing{}
	_ pgx.CopyFromTracer    = pgxTracing{}
	_ pgx.PrepareTracer     = pgxTracing{}
	_ pgx.ConnectTracer     = pgxTracing{}
	_ pgxpool.AcquireTracer = pgxTracing{}
)

// pgxTracer traces the pool's queries, batches, prepares, connects and
// acquires through otelpgx (the database semantic conventions), without
// the queries' parameters (a payment's payload) nor otelpgx's metrics
// (paylock's are Prometheus's).
func pgxTracer(tp trace.TracerProvider) pgxTracing {
	return pgxTracing{otelpgx.NewTracer(otelpgx.WithTracerProvider(tp),
		otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelpgx.WithDisableConnectionDetailsInAttributes())}
}

func traced(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

func (p pgxTracing) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !traced(ctx) {
		return ctx
	}
	return p.t.TraceQueryStart(ctx, c, d)
}

func (p pgxTracing) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	if traced(ctx) {
		p.t.TraceQueryEnd(ctx, c, d)
	}
}

func (p pgxTracing) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if !traced(ctx) {
		return ctx
	}
	return p.t.TraceBatchStart(ctx, c, d)
}

func (p pgxTracing) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	if traced(ctx) {
		p.t.TraceBatchQuery(ctx, c, d)
	}
}

func (p pgxTracing) TraceBatchEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchEndData) {
	if traced(ctx) {
		p.t.TraceBatchEnd(ctx, c, d)
	}
}

func (p pgxTracing) TraceCopyFromStart(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	if !traced(ctx) {
		return ctx
	}
	return p.t.TraceCopyFromStart(ctx, c, d)
}

func (p pgxTracing) TraceCopyFromEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromEndData) {
	if traced(ctx) {
		p.t.TraceCopyFromEnd(ctx, c, d)
	}
}

func (p pgxTracing) TracePrepareStart(ctx context.Context, c *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	if !traced(ctx) {
		return ctx
	}
	return p.t.TracePrepareStart(ctx, c, d)
}

func (p pgxTracing) TracePrepareEnd(ctx context.Context, c *pgx.Conn, d pgx.TracePrepareEndData) {
	if traced(ctx) {
		p.t.TracePrepareEnd(ctx, c, d)
	}
}

func (p pgxTracing) TraceConnectStart(ctx context.Context, d pgx.TraceConnectStartData) context.Context {
	if !traced(ctx) {
		return ctx
	}
	return p.t.TraceConnectStart(ctx, d)
}

func (p pgxTracing) TraceConnectEnd(ctx context.Context, d pgx.TraceConnectEndData) {
	if traced(ctx) {
		p.t.TraceConnectEnd(ctx, d)
	}
}

func (p pgxTracing) TraceAcquireStart(ctx context.Context, pool *pgxpool.Pool, d pgxpool.TraceAcquireStartData) context.Context {
	if !traced(ctx) {
		return ctx
	}
	return p.t.TraceAcquireStart(ctx, pool, d)
}

func (p pgxTracing) TraceAcquireEnd(ctx context.Context, pool *pgxpool.Pool, d pgxpool.TraceAcquireEndData) {
	if traced(ctx) {
		p.t.TraceAcquireEnd(ctx, pool, d)
	}
}
