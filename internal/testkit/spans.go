package testkit

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Spans records the spans of the code under test: pass Provider as its
// TracerProvider option.
type Spans struct {
	Provider *sdktrace.TracerProvider
	rec      *tracetest.SpanRecorder
}

// NewSpans returns a recorder of every span (sampled always), shut down
// when the test ends.
func NewSpans(t testing.TB) *Spans {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &Spans{Provider: tp, rec: rec}
}

// Ended returns the spans ended so far.
func (s *Spans) Ended() []sdktrace.ReadOnlySpan { return s.rec.Ended() }

// Wait waits until a span called name has ended and returns the first.
func (s *Spans) Wait(t testing.TB, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	Eventually(t, 15*time.Second, "a span "+name+" ended", func(context.Context) error {
		if found = s.Named(name); found == nil {
			return fmt.Errorf("spans ended: %v", s.Names())
		}
		return nil
	})
	return found
}

// Named returns the first ended span called name, or nil.
func (s *Spans) Named(name string) sdktrace.ReadOnlySpan {
	for _, sp := range s.rec.Ended() {
		if sp.Name() == name {
			return sp
		}
	}
	return nil
}

// ByID returns the ended span of id, or nil.
func (s *Spans) ByID(id trace.SpanID) sdktrace.ReadOnlySpan {
	for _, sp := range s.rec.Ended() {
		if sp.SpanContext().SpanID() == id {
			return sp
		}
	}
	return nil
}

// Names returns the names of the spans ended so far, for failure messages.
func (s *Spans) Names() []string {
	var out []string
	for _, sp := range s.rec.Ended() {
		out = append(out, sp.Name())
	}
	return out
}

// WantChild fails the test unless child's parent is parent.
func WantChild(t testing.TB, parent, child sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("span %s is not a child of %s", child.Name(), parent.Name())
	}
}

// WantAttrs fails the test unless span has every attribute of want.
func WantAttrs(t testing.TB, span sdktrace.ReadOnlySpan, want ...attribute.KeyValue) {
	t.Helper()
	for _, kv := range want {
		if !slices.Contains(span.Attributes(), kv) {
			t.Errorf("span %s: no attribute %s=%v (has %v)", span.Name(), kv.Key, kv.Value.Emit(), span.Attributes())
		}
	}
}
