package forward_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/store"
)

// The forwarded path, traced: a payment recorded inside a delivery's span
// → River's span of its forward job, linked to that delivery → one span
// per attempt, child of the job's → the receiver gets the attempt's
// traceparent, and its signature still verifies.
func TestAForwardIsTracedFromTheDeliveryThatRecordedItToTheReceiver(t *testing.T) {
	t.Parallel()
	spans := testkit.NewSpans(t)
	rc := receiver(t, 503) // then 2xx
	b := setupTraced(t, 25, rc.URL+"/paylock", spans)

	ctx, delivery := spans.Provider.Tracer("test").Start(context.Background(), "delivery")
	if _, err := b.store.Payments().RecordPaymentForwarded(ctx, payment("tx-traced"), forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	delivery.End()
	attempts := rc.WaitAttempts(t, 2)
	testkit.WaitFor(t, 15*time.Second, "two attempt spans", func() bool { return len(attemptSpans(spans)) == 2 })

	got := attemptSpans(spans)
	for i, s := range got {
		n := i + 1
		work := spans.ByID(s.Parent().SpanID())
		if work == nil || work.Name() != "river.work/"+(store.ForwardArgs{}).Kind() {
			t.Fatalf("attempt %d's span is not a child of River's span of the job", n)
		}
		if links := work.Links(); len(links) != 1 || links[0].SpanContext.TraceID() != delivery.SpanContext().TraceID() {
			t.Errorf("attempt %d: River's span of the job has links %v, want one into the delivery's trace %v", n, links, delivery.SpanContext().TraceID())
		}
		if s.Name() != forward.SpanName+" "+forward.DefaultDestination || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("attempt %d: span %q of kind %v, want %q, client", n, s.Name(), s.SpanKind(), forward.SpanName+" "+forward.DefaultDestination)
		}
		testkit.WantAttrs(t, s, forward.AttrDestination.String(forward.DefaultDestination), forward.AttrSink.String("http"),
			forward.AttrSource.String("acme"), forward.AttrTransactionID.String("tx-traced"),
			forward.AttrType.String(store.ForwardPaymentRecorded), forward.AttrAttempt.Int(n))
		sc := s.SpanContext()
		want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		if tp := attempts[i].Header.Get("traceparent"); tp != want {
			t.Errorf("attempt %d reached the receiver with traceparent %q, want its span's %s", n, tp, want)
		}
		if attempts[i].Err != nil {
			t.Errorf("attempt %d does not verify with traceparent among its headers: %v", n, attempts[i].Err)
		}
	}
	testkit.WantAttrs(t, got[0], forward.AttrOutcome.String(string(forward.OutcomeFailedAttempt)),
		attribute.Int("http.response.status_code", 503), forward.AttrStatus.Int(503))
	if got[0].Status().Code != codes.Error {
		t.Errorf("the refused attempt's span has status %v, want an error", got[0].Status())
	}
	testkit.WantAttrs(t, got[1], forward.AttrOutcome.String(string(forward.OutcomeDelivered)))
	if status := attr(got[1], "http.response.status_code"); status < 200 || status > 299 {
		t.Errorf("the delivered attempt's span has http.response.status_code %d, want the receiver's 2xx", status)
	}
}

// attemptSpans returns the ended attempt spans, by attempt.
func attemptSpans(spans *testkit.Spans) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if strings.HasPrefix(s.Name(), forward.SpanName+" ") {
			out = append(out, s)
		}
	}
	for i := range out { // ended in attempt order, but do not rely on it
		for j := i + 1; j < len(out); j++ {
			if attemptOf(out[j]) < attemptOf(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func attemptOf(s sdktrace.ReadOnlySpan) int64 { return attr(s, forward.AttrAttempt) }

// attr is s's integer attribute k (0 when it has none).
func attr(s sdktrace.ReadOnlySpan, k attribute.Key) int64 {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.AsInt64()
		}
	}
	return 0
}
