package lock

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the lock's spans.
const tracerName = "github.com/paylock/paylock/lock"

// WithTracerProvider makes the Locker start its spans (paylock.lock.obtain,
// paylock.lock.release) with tp's tracer, each under the caller's span when
// that one records (a call outside a traced request starts none); the
// default is the global TracerProvider (otel.GetTracerProvider). The Redis commands underneath
// are traced by the client's own hook (redisotel), when its builder
// installs one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(l *Locker) { l.tracer = tp.Tracer(tracerName) }
}

func defaultTracer() trace.Tracer { return otel.GetTracerProvider().Tracer(tracerName) }

// traced says whether ctx's span records: the lock's spans are children
// only, so that an untraced caller pays a context lookup, nothing more.
func traced(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// Span attributes of the lock's spans.
const (
	attrKey      = attribute.Key("paylock.lock.key")
	attrOutcome  = attribute.Key("paylock.lock.outcome")
	attrAttempts = attribute.Key("paylock.lock.attempts")
	attrWaitMS   = attribute.Key("paylock.lock.wait_ms")
	attrOp       = attribute.Key("paylock.lock.op")
)

// obtainTraced is Obtain's span around obtain: its outcome (obtained,
// busy, finished, error), attempts and the whole wait in milliseconds.
func (l *Locker) obtainTraced(ctx context.Context, key string, obtain func(context.Context) (*Lock, error)) (*Lock, error) {
	if !traced(ctx) {
		return obtain(ctx)
	}
	ctx, span := l.tracer.Start(ctx, "paylock.lock.obtain")
	start := time.Now()
	lk, err := obtain(ctx)
	var busy *BusyError
	outcome, attempts := "obtained", 0
	switch {
	case err == nil:
		attempts = lk.attempts
	case errors.As(err, &busy):
		outcome, attempts = "busy", busy.Attempts
	case errors.Is(err, ErrFinished):
		outcome = "finished"
	default:
		outcome = "error"
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(attrKey.String(key), attrOutcome.String(outcome), attrAttempts.Int(attempts),
		attrWaitMS.Float64(float64(time.Since(start))/float64(time.Millisecond)))
	span.End()
	return lk, err
}

// endTraced is Release's and Finish's span: paylock.lock.release with the
// op (release, finish) and the outcome (released, expired, lost, error).
func (lk *Lock) endTraced(ctx context.Context, op string, end func(context.Context) error) error {
	if !traced(ctx) {
		return end(ctx)
	}
	ctx, span := lk.locker.tracer.Start(ctx, "paylock.lock.release")
	err := end(ctx)
	outcome := "released"
	switch {
	case errors.Is(err, ErrNotHeld):
		outcome = "not_held"
	case err != nil:
		outcome = "error"
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(attrKey.String(lk.key), attrOp.String(op), attrOutcome.String(outcome))
	span.End()
	return err
}
