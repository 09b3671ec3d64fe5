package reconcile_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/fakestripe"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/reconcile"
)

// stripeLifecycle is the Stripe provider's samples of two payments'
// lifecycles: pi_3QpaylockPI0001 succeeded, refunded in part, disputed and
// lost; pi_3QpaylockPI0002 failed, then canceled.
func stripeLifecycle(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	for _, f := range []string{"payment_intent.succeeded.json", "charge.refunded.json", "charge.dispute.created.json",
		"charge.dispute.closed.json", "payment_intent.payment_failed.json", "payment_intent.canceled.json"} {
		b, err := os.ReadFile(filepath.Join("..", "provider", "stripe", "samples", f))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// stripeReplica is a replica with the default stripe source (every
// lifecycle type), unsigned, on a schema of its own.
func stripeReplica(t *testing.T) *paylocktest.Replica {
	t.Helper()
	return paylocktest.StartReplica(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{
		{Name: "stripe", Provider: "stripe"}}}})
}

// TestReconciliationReachesTheStateWebhooksReach records the same Stripe
// lifecycles once through webhooks and once through reconciliation
// (the fake Stripe API's GET /v1/events, newest first): both end in the
// same states, and a second reconciliation finds everything recorded.
func TestReconciliationReachesTheStateWebhooksReach(t *testing.T) {
	t.Parallel()
	events := stripeLifecycle(t)
	hooks := stripeReplica(t)
	for _, body := range events {
		res, err := http.Post(hooks.URL+"/webhooks/stripe", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("webhook: %d", res.StatusCode)
		}
	}

	api := fakestripe.New("sk_test_lifecycle")
	for _, body := range events {
		api.Add(body)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	p, _ := provider.Lookup("stripe")
	lister, err := p.(provider.Lister).NewLister(provider.ListerConfig{Source: "stripe", URL: srv.URL, Key: "sk_test_lifecycle"})
	if err != nil {
		t.Fatal(err)
	}
	rec := stripeReplica(t)
	run := reconcile.Payments{Source: "stripe", Events: lister, Handler: rec.Handler}
	since := time.Unix(1764000000, 0)
	rep, err := run.Run(context.Background(), since)
	if err != nil || rep.RecordedNow != len(events) || len(rep.Errors) != 0 || len(rep.Mismatched) != 0 {
		t.Fatalf("reconciliation: %+v, %v; want %d recorded now", rep, err, len(events))
	}

	ctx := context.Background()
	for _, tx := range []string{"pi_3QpaylockPI0001", "pi_3QpaylockPI0002"} {
		want, err := hooks.Store.Payments().PaymentState(ctx, "stripe", tx)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rec.Store.Payments().PaymentState(ctx, "stripe", tx)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != want.State || len(got.Events) != len(want.Events) {
			t.Errorf("%s reconciled: %+v with %d events; through webhooks: %+v with %d", tx, got.State, len(got.Events),
				want.State, len(want.Events))
		}
	}
	if st, _ := rec.Store.Payments().PaymentState(ctx, "stripe", "pi_3QpaylockPI0001"); st.Status != "partially_refunded" ||
		st.AmountRefunded != 500 || st.Dispute != "lost" {
		t.Errorf("pi_3QpaylockPI0001: %+v, want partially_refunded, 500 refunded, dispute lost", st.State)
	}
	if st, _ := rec.Store.Payments().PaymentState(ctx, "stripe", "pi_3QpaylockPI0002"); st.Status != "canceled" {
		t.Errorf("pi_3QpaylockPI0002: %+v, want canceled", st.State)
	}
	again, err := run.Run(ctx, since)
	if err != nil || !again.Clean() || again.AlreadyRecorded != len(events) {
		t.Errorf("second reconciliation: %+v, %v; want all %d already recorded", again, err, len(events))
	}
}
