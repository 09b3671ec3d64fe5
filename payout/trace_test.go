package payout_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/store"
)

// A payout job's attempt is a span (child of River's span of the job,
// linked to the span that accepted the disbursement), and its provider
// call a client span whose traceparent the provider receives.
func TestPayoutAttemptAndProviderCallAreSpansAndTheProviderGetsTheirTrace(t *testing.T) {
	t.Parallel()
	spans := testkit.NewSpans(t)
	dsn, _ := paylocktest.MigratedSchema(t)
	st := paylocktest.OpenStore(t, store.Config{URL: dsn, TracerProvider: spans.Provider})
	fake := fakeprovider.New(fakeprovider.Config{})
	t.Cleanup(fake.Close)
	var mu sync.Mutex
	var traceparents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("traceparent"))
		mu.Unlock()
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	ctx, accept := spans.Provider.Tracer("test").Start(context.Background(), "loan approved")
	d, err := st.Disbursements().AcceptDisbursement(ctx, store.Disbursement{
		LoanID: "L-traced", Tranche: 1, Amount: 500000, Currency: "JPY", EventID: "evt-L-traced-1"})
	accept.End()
	if err != nil {
		t.Fatal(err)
	}
	w, err := payout.New(payout.Config{ProviderURL: srv.URL, Timeout: 2 * time.Second, PollInterval: 50 * time.Millisecond,
		Logger: testkit.Logger(), TracerProvider: spans.Provider, Propagator: propagation.TraceContext{}}, st.Disbursements())
	if err != nil {
		t.Fatal(err)
	}
	testkit.Run(t, "worker", func(ctx context.Context) error { return w.Run(ctx, st) })

	attempt := spans.Wait(t, payout.SpanAttempt)
	work := spans.Wait(t, "river.work/"+(store.PayoutArgs{}).Kind())
	create := spans.Wait(t, payout.SpanCreate)
	testkit.WantChild(t, work, attempt)
	testkit.WantChild(t, attempt, create)
	if links := work.Links(); len(links) != 1 || links[0].SpanContext.TraceID() != accept.SpanContext().TraceID() {
		t.Errorf("River's span of the job has links %v, want one into the trace of the span that accepted the disbursement", links)
	}
	testkit.WantAttrs(t, attempt, payout.AttrDisbursementID.Int64(d.ID), payout.AttrLoanID.String("L-traced"),
		payout.AttrTranche.Int(1), payout.AttrOutcome.String(string(payout.OutcomeSent)), payout.AttrAttempt.Int(1))
	testkit.WantAttrs(t, create, attribute.String("http.request.method", "POST"),
		attribute.String("paylock.idempotency_key", d.IdempotencyKey), attribute.String("paylock.payout.status", "pending"))
	if create.SpanKind() != trace.SpanKindClient {
		t.Errorf("the provider call's span is a %v span, want client", create.SpanKind())
	}
	mu.Lock()
	defer mu.Unlock()
	want := "00-" + create.SpanContext().TraceID().String() + "-" + create.SpanContext().SpanID().String() + "-01"
	if len(traceparents) != 1 || traceparents[0] != want {
		t.Errorf("the provider received traceparents %q, want [%s] (the call's span)", traceparents, want)
	}
}
