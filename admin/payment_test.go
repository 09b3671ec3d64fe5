package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/store"
)

// recordLifecycle records a stripe payment, a refund of it, a dispute
// opened, and a refund of a payment paylock does not know, each change
// forwarded to the default destination.
func recordLifecycle(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	p := st.Payments()
	if _, err := p.RecordPaymentForwarded(ctx, store.Payment{Source: "stripe", TransactionID: "pi_life", Amount: 1000, Currency: "EUR",
		EventID: "evt_ok", Payload: []byte(`{"id":"evt_ok"}`)}, forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	for _, e := range []store.PaymentEvent{
		{Source: "stripe", TransactionID: "pi_life", EventID: "evt_refund", Kind: lifecycle.Refund, Amount: 300, Currency: "EUR", Cumulative: true},
		{Source: "stripe", TransactionID: "pi_life", EventID: "evt_dispute", Kind: lifecycle.DisputeOpened, Amount: 1000, Currency: "EUR"},
		{Source: "stripe", TransactionID: "pi_later", EventID: "evt_early_refund", Kind: lifecycle.Refund, Amount: 100, Currency: "EUR", RefundID: "re_1"},
	} {
		if _, err := p.RecordEvent(ctx, e, st.Outbox().ForwardChangeHook(forward.DefaultDestination)); err != nil {
			t.Fatal(err)
		}
	}
}

type paymentJSON struct {
	Source, TransactionID, Status, Currency string
	Amount, AmountRefunded                  int64
	OverRefunded                            bool
	Dispute                                 *string
	Version                                 int
	Events                                  []struct {
		EventID string `json:"event_id"`
		Kind    string `json:"kind"`
	}
}

func decodePayment(t *testing.T, body string) paymentJSON {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	var p paymentJSON
	for k, dst := range map[string]any{"source": &p.Source, "transaction_id": &p.TransactionID, "status": &p.Status,
		"currency": &p.Currency, "amount": &p.Amount, "amount_refunded": &p.AmountRefunded, "over_refunded": &p.OverRefunded, "dispute": &p.Dispute,
		"version": &p.Version, "events": &p.Events} {
		v, ok := raw[k]
		if !ok {
			t.Fatalf("%s: no %q", body, k)
		}
		if err := json.Unmarshal(v, dst); err != nil {
			t.Fatalf("%s: %s: %v", body, k, err)
		}
	}
	return p
}

func TestPaymentsAPIAnswersTheLifecycleAsJSON(t *testing.T) {
	t.Parallel()
	_, st := paylocktest.MigratedSchema(t)
	recordLifecycle(t, st)
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(), Payments: st.Payments()}))
	t.Cleanup(srv.Close)

	a := adminDo(t, srv, http.MethodGet, "/admin/payments/stripe/pi_life", nil, bearer, nil)
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	p := decodePayment(t, a.body)
	if p.Source != "stripe" || p.TransactionID != "pi_life" || p.Status != "partially_refunded" || p.Amount != 1000 ||
		p.Currency != "EUR" || p.AmountRefunded != 300 || p.Dispute == nil || *p.Dispute != "open" || p.Version != 3 {
		t.Errorf("payment %+v, want partially_refunded 1000 EUR, 300 refunded, dispute open, version 3", p)
	}
	if len(p.Events) != 3 || p.Events[0].Kind != "succeeded" || p.Events[0].EventID != "evt_ok" {
		t.Errorf("events %+v, want the success then the refund and the dispute", p.Events)
	}

	a = adminDo(t, srv, http.MethodGet, "/admin/payments/stripe/pi_later", nil, bearer, nil)
	if p := decodePayment(t, a.body); a.status != http.StatusOK || p.Status != "pending" || p.Dispute != nil || len(p.Events) != 1 {
		t.Errorf("a payment known by a refund alone: %d %s", a.status, a.body)
	}
	a = adminDo(t, srv, http.MethodGet, "/admin/payments/stripe/pi_nothing", nil, bearer, nil)
	if a.status != http.StatusNotFound || a.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("an unknown payment: %d %s %s, want a 404 problem", a.status, a.header.Get("Content-Type"), a.body)
	}
	if a := adminDo(t, srv, http.MethodGet, "/admin/payments/stripe/pi_life", nil, nil, nil); a.status != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", a.status)
	}
}

// TestPaymentsAPISaysWhenRefundsExceedTheAmount: refunds beyond the
// amount cap amount_refunded and set over_refunded; a partial refund does
// not.
func TestPaymentsAPISaysWhenRefundsExceedTheAmount(t *testing.T) {
	t.Parallel()
	_, st := paylocktest.MigratedSchema(t)
	recordLifecycle(t, st)
	ctx := context.Background()
	if _, err := st.Payments().RecordPayment(ctx, store.Payment{Source: "stripe", TransactionID: "pi_over", Amount: 1000,
		Currency: "EUR", EventID: "evt_over", Payload: []byte(`{"id":"evt_over"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ id, refund string }{{"evt_r1", "re_1"}, {"evt_r2", "re_2"}} {
		if _, err := st.Payments().RecordEvent(ctx, store.PaymentEvent{Source: "stripe", TransactionID: "pi_over", EventID: r.id,
			Kind: lifecycle.Refund, Amount: 700, Currency: "EUR", RefundID: r.refund}, nil); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(), Payments: st.Payments()}))
	t.Cleanup(srv.Close)
	for tx, want := range map[string]bool{"pi_over": true, "pi_life": false} {
		a := adminDo(t, srv, http.MethodGet, "/admin/payments/stripe/"+tx, nil, bearer, nil)
		if p := decodePayment(t, a.body); a.status != http.StatusOK || p.OverRefunded != want {
			t.Errorf("%s: %d %s, want over_refunded %v", tx, a.status, a.body, want)
		}
	}
}

func TestConsolePaymentPageShowsTheTimelineAndAnswersJSONWhenAsked(t *testing.T) {
	t.Parallel()
	_, st := paylocktest.MigratedSchema(t)
	recordLifecycle(t, st)
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(),
		Console: consoleStore(st), Payments: st.Payments(), Forwards: map[string]string{"stripe": forward.DefaultDestination}}))
	t.Cleanup(srv.Close)

	html := adminDo(t, srv, http.MethodGet, "/admin/payments/stripe/pi_life", nil, page, nil)
	for _, want := range []string{"Lifecycle", "partially_refunded", "version 3", "evt_refund", "dispute_opened", "(cumulative)",
		"payment.recorded", "payment.refunded", "payment.dispute.opened"} {
		if html.status != http.StatusOK || !strings.Contains(html.body, want) {
			t.Errorf("page %d lacks %q", html.status, want)
		}
	}
	asJSON := map[string]string{"Authorization": bearer["Authorization"], "Accept": "application/json"}
	a := adminDo(t, srv, http.MethodGet, "/admin/payments/stripe/pi_life", nil, asJSON, nil)
	if p := decodePayment(t, a.body); a.status != http.StatusOK || p.Version != 3 {
		t.Errorf("with Accept: application/json: %d %s", a.status, a.body)
	}
}
