package handler

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestASendersTraceparentDoesNotChooseTheSample: the webhook route is
// public and its span starts before the signature is checked. Whatever a
// sender's traceparent says, the delivery's span is a root of paylock's
// own: under a parentbased sampler that samples none of paylock's roots, a
// "sampled" traceparent records nothing, and under one that samples them
// all, an "unsampled" one is recorded; the sender's span is a link, its
// trace id never the delivery's, and its baggage is not read.
func TestASendersTraceparentDoesNotChooseTheSample(t *testing.T) {
	t.Parallel()
	src := &source{name: "payments", route: "/webhooks/payments", spanName: "POST /webhooks/payments"}
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler
		flags   trace.TraceFlags
		record  bool
	}{
		{"SampledTraceparentUnderNeverSample", sdktrace.ParentBased(sdktrace.NeverSample()), trace.FlagsSampled, false},
		{"UnsampledTraceparentUnderAlwaysSample", sdktrace.ParentBased(sdktrace.AlwaysSample()), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tc.sampler))
			defer tp.Shutdown(context.Background())
			prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
			tr := newTracing(Config{TracerProvider: tp, Propagator: prop})
			remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: tc.flags})
			m, _ := baggage.NewMember("tenant", "attacker")
			bag, _ := baggage.New(m)
			ctx := baggage.ContextWithBaggage(trace.ContextWithRemoteSpanContext(context.Background(), remote), bag)
			r := httptest.NewRequest(http.MethodPost, "/webhooks/payments", nil)
			prop.Inject(ctx, propagation.HeaderCarrier(r.Header))

			r, span := tr.startDelivery(r, src)
			defer span.End()
			if span.IsRecording() != tc.record {
				t.Errorf("recording %v, want %v: the sender's flag chose the sample", span.IsRecording(), tc.record)
			}
			if got := trace.SpanContextFromContext(r.Context()); got.TraceID() == remote.TraceID() {
				t.Errorf("the delivery's trace id is the sender's %v", got.TraceID())
			}
			if ro, ok := span.(sdktrace.ReadOnlySpan); ok && tc.record {
				if links := ro.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != remote.SpanID() {
					t.Errorf("links %v, want one to the sender's span", links)
				}
			}
			if b := baggage.FromContext(r.Context()); b.Len() != 0 {
				t.Errorf("baggage %q read from the sender", b.String())
			}
		})
	}
}
