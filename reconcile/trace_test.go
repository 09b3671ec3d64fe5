package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/store"
)

// spanIngester is an ingester that notes the span each event is settled in.
type spanIngester struct {
	*ingester
	spans []trace.SpanContext
}

func (i *spanIngester) Ingest(ctx context.Context, source string, body []byte) (handler.IngestResult, error) {
	i.spans = append(i.spans, trace.SpanContextFromContext(ctx))
	return i.ingester.Ingest(ctx, source, body)
}

func TestAPaymentsRunIsASpanWithItsCountsAndTheParentOfWhatItRecords(t *testing.T) {
	t.Parallel()
	spans := testkit.NewSpans(t)
	events := listed{events: []provider.ListedEvent{
		{ID: "evt_1", Ref: "pi_new", Body: []byte("pi_new")}, {ID: "evt_2", Ref: "pi_old", Body: []byte("pi_old")},
		{ID: "evt_3", Ref: "pi_other", Body: []byte("pi_other")},
	}}
	in := &spanIngester{ingester: &ingester{
		results: map[string]handler.IngestResult{"pi_new": record("pi_new", "processed"), "pi_old": record("pi_old", "duplicate")},
		errs:    map[string]error{"pi_other": fmt.Errorf("recorded otherwise: %w", store.ErrMismatch)},
	}}
	since := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	run := reconcile.Payments{Source: "stripe", Events: events, Handler: in, TracerProvider: spans.Provider}
	if _, err := run.Run(context.Background(), since); err != nil {
		t.Fatal(err)
	}
	span := spans.Wait(t, reconcile.SpanPayments)
	testkit.WantAttrs(t, span, reconcile.AttrSource.String("stripe"), reconcile.AttrSince.String("2026-11-30T12:00:00Z"),
		reconcile.AttrDryRun.Bool(false), reconcile.AttrSeen.Int(3), reconcile.AttrAlreadyRecorded.Int(1),
		reconcile.AttrRecordedNow.Int(1), reconcile.AttrMismatched.Int(1), reconcile.AttrErrors.Int(0))
	for i, sc := range in.spans {
		if sc.SpanID() != span.SpanContext().SpanID() {
			t.Errorf("event %d was settled outside the run's span", i+1)
		}
	}
	if len(in.spans) != 3 {
		t.Errorf("%d events settled, want 3", len(in.spans))
	}
}

func TestAPaymentsRunWhoseListingFailsIsAnErrorSpan(t *testing.T) {
	t.Parallel()
	spans := testkit.NewSpans(t)
	refused := fmt.Errorf("listing: %w", provider.ErrRefused)
	run := reconcile.Payments{Source: "stripe", Events: listed{err: refused}, Handler: &ingester{}, TracerProvider: spans.Provider}
	if _, err := run.Run(context.Background(), time.Now()); !errors.Is(err, provider.ErrRefused) {
		t.Fatalf("Run: %v", err)
	}
	if span := spans.Wait(t, reconcile.SpanPayments); span.Status().Code != codes.Error {
		t.Errorf("the run's span has status %v, want an error", span.Status())
	}
}

func TestADisbursementsRunIsASpanWithItsCountsAndTheParentOfItsLookups(t *testing.T) {
	t.Parallel()
	spans := testkit.NewSpans(t)
	_, st := paylocktest.MigratedSchema(t)
	fake := fakeprovider.New(fakeprovider.Config{})
	t.Cleanup(fake.Close)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	for tranche := 1; tranche <= 2; tranche++ {
		if _, err := st.Disbursements().AcceptDisbursement(context.Background(), store.Disbursement{LoanID: "L-rec", Tranche: tranche,
			Amount: 1000, Currency: "EUR", EventID: fmt.Sprintf("evt-L-rec-%d", tranche)}); err != nil {
			t.Fatal(err)
		}
	}
	check := reconcile.Disbursements{Rows: st.Disbursements(), Timeout: time.Second, Grace: time.Hour, TracerProvider: spans.Provider,
		Provider: payout.NewClient(srv.URL, &http.Client{}, payout.WithTracerProvider(spans.Provider))}
	rep, err := check.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	span := spans.Wait(t, reconcile.SpanDisbursements)
	testkit.WantAttrs(t, span, reconcile.AttrPending.Int(2), reconcile.AttrSent.Int(0), reconcile.AttrFailed.Int(0),
		reconcile.AttrDifferences.Int(len(rep.Diffs)))
	lookups := 0
	for _, s := range spans.Ended() {
		if s.Name() == payout.SpanLookup {
			lookups++
			testkit.WantChild(t, span, s)
		}
	}
	if lookups != 2 {
		t.Errorf("%d lookup spans, want one per row (2)", lookups)
	}
}
