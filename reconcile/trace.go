package reconcile

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the package's tracer (its instrumentation scope).
const tracerName = "github.com/paylock/paylock/reconcile"

// The spans of a run: one per Payments.Run (the pipeline's spans of each
// event it records are its children) and one per Disbursements.Run, with
// the report's counts as attributes.
const (
	SpanPayments      = "paylock.reconcile.payments"
	SpanDisbursements = "paylock.reconcile.disbursements"
)

// The attributes of a run's span.
const (
	AttrSource          = attribute.Key("paylock.source")
	AttrSince           = attribute.Key("paylock.reconcile.since")
	AttrDryRun          = attribute.Key("paylock.reconcile.dry_run")
	AttrSeen            = attribute.Key("paylock.reconcile.seen")
	AttrAlreadyRecorded = attribute.Key("paylock.reconcile.already_recorded")
	AttrRecordedNow     = attribute.Key("paylock.reconcile.recorded_now")
	AttrIgnored         = attribute.Key("paylock.reconcile.ignored")
	AttrMismatched      = attribute.Key("paylock.reconcile.mismatched")
	AttrErrors          = attribute.Key("paylock.reconcile.errors")
	AttrPending         = attribute.Key("paylock.reconcile.pending")
	AttrSent            = attribute.Key("paylock.reconcile.sent")
	AttrFailed          = attribute.Key("paylock.reconcile.failed")
	AttrDifferences     = attribute.Key("paylock.reconcile.differences")
)

// startRun starts a run's span with tp's tracer (nil: the global provider).
func startRun(ctx context.Context, tp trace.TracerProvider, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName).Start(ctx, name, trace.WithAttributes(attrs...))
}

// endRun notes a run's error on its span and ends it.
func endRun(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (p Payments) startSpan(ctx context.Context, since time.Time) (context.Context, trace.Span) {
	return startRun(ctx, p.TracerProvider, SpanPayments, AttrSource.String(p.Source),
		AttrSince.String(since.UTC().Format(time.RFC3339)), AttrDryRun.Bool(p.DryRun))
}

func (r Report) attributes() []attribute.KeyValue {
	return []attribute.KeyValue{AttrSeen.Int(r.Seen), AttrAlreadyRecorded.Int(r.AlreadyRecorded),
		AttrRecordedNow.Int(r.RecordedNow), AttrIgnored.Int(r.Ignored), AttrMismatched.Int(len(r.Mismatched)),
		AttrErrors.Int(len(r.Errors))}
}

func (r DisbursementReport) attributes() []attribute.KeyValue {
	return []attribute.KeyValue{AttrPending.Int(r.Pending), AttrSent.Int(r.Sent), AttrFailed.Int(r.Failed),
		AttrDifferences.Int(len(r.Diffs))}
}
