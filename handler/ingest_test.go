package handler_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// stripeEvent is a payment_intent.succeeded Event for pi with amount.
func stripeEvent(pi string, amount string) []byte {
	return []byte(`{"id":"evt_` + pi + `","object":"event","api_version":"2025-08-27.basil","created":1764500000,` +
		`"type":"payment_intent.succeeded","livemode":false,"data":{"object":{"id":"` + pi +
		`","object":"payment_intent","amount":` + amount + `,"amount_received":` + amount + `,"currency":"jpy","status":"succeeded"}}}`)
}

// ingestHandler is a replica with one unsigned stripe source whose record
// hook counts its calls, on a fresh schema: its handler, store and URL.
func ingestHandler(t *testing.T) (*handler.Handler, *store.Store, string, *atomic.Int64) {
	t.Helper()
	hooked := new(atomic.Int64)
	r := startReplica(t, paylocktest.Options{Config: handler.Config{
		Sources: []handler.Source{{Name: "stripe", Provider: "stripe",
			OnRecord: func(context.Context, pgx.Tx, store.Payment) error { hooked.Add(1); return nil }}},
	}})
	return r.Handler, r.Store, r.URL, hooked
}

func TestIngestRecordsAMissingPaymentOnceThroughTheSourcesPipeline(t *testing.T) {
	t.Parallel()
	h, st, url, hooked := ingestHandler(t)
	ctx := context.Background()
	body := stripeEvent("pi_missing", "2000")

	checked, err := h.Check(ctx, "stripe", body)
	if err != nil || checked.Result != "missing" || len(checked.Records) != 1 || checked.Records[0].Ref != "pi_missing" {
		t.Fatalf("Check before = %+v, %v; want missing pi_missing", checked, err)
	}
	if n := testkit.PaymentRows(t, st.Pool(), "pi_missing"); n != 0 {
		t.Fatalf("Check wrote %d rows", n)
	}
	for i, want := range []string{"processed", "duplicate"} {
		res, err := h.Ingest(ctx, "stripe", body)
		if err != nil || res.Result != want || len(res.Records) != 1 || res.Records[0].Result != want {
			t.Fatalf("Ingest #%d = %+v, %v; want %s", i+1, res, err, want)
		}
	}
	if n, calls := testkit.PaymentRows(t, st.Pool(), "pi_missing"), hooked.Load(); n != 1 || calls != 1 {
		t.Fatalf("%d rows, hook ran %d times; want 1 and 1", n, calls)
	}
	// The webhook that arrives late is a duplicate of the ingested record.
	a := post(t, url, "/webhooks/stripe", "application/json", body)
	if a.status != http.StatusOK || a.str("result") != "duplicate" {
		t.Fatalf("late webhook: %d %s; want 200 duplicate", a.status, a.raw)
	}
	checked, err = h.Check(ctx, "stripe", body)
	if err != nil || checked.Result != "duplicate" {
		t.Fatalf("Check after = %+v, %v; want duplicate", checked, err)
	}
}

func TestIngestErrors(t *testing.T) {
	t.Parallel()
	h, st, url, _ := ingestHandler(t)
	ctx := context.Background()
	// A payment recorded by webhook with one amount, reported by the API
	// with another.
	if a := post(t, url, "/webhooks/stripe", "application/json", stripeEvent("pi_other", "2000")); a.status != http.StatusOK {
		t.Fatalf("webhook: %d %s", a.status, a.raw)
	}
	other := stripeEvent("pi_other", "2500")
	if _, err := h.Ingest(ctx, "stripe", other); !errors.Is(err, store.ErrMismatch) {
		t.Errorf("Ingest of a different amount = %v, want store.ErrMismatch", err)
	}
	if _, err := h.Check(ctx, "stripe", other); !errors.Is(err, store.ErrMismatch) {
		t.Errorf("Check of a different amount = %v, want store.ErrMismatch", err)
	}
	for _, fn := range []func(context.Context, string, []byte) (handler.IngestResult, error){h.Ingest, h.Check} {
		if _, err := fn(ctx, "adyen", other); !errors.Is(err, handler.ErrUnknownSource) {
			t.Errorf("unknown source: %v, want handler.ErrUnknownSource", err)
		}
		if _, err := fn(ctx, "stripe", []byte(`{"object":"list"}`)); err == nil {
			t.Error("a body that is no Event was accepted")
		}
		ignored := []byte(strings.Replace(string(stripeEvent("pi_x", "1")), "payment_intent.succeeded", "payment_intent.created", 1))
		if res, err := fn(ctx, "stripe", ignored); err != nil || res.Result != "ignored" {
			t.Errorf("an event type the source does not record = %+v, %v; want ignored", res, err)
		}
	}
	if n := testkit.PaymentRows(t, st.Pool(), "pi_other"); n != 1 {
		t.Errorf("%d rows of pi_other, want 1", n)
	}
}
