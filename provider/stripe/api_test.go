package stripe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakestripe"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/stripe"
)

func TestAPIFollowsEveryPageFromSince(t *testing.T) {
	t.Parallel()
	const key = "sk_test_pages0123456789"
	api := fakestripe.New(key)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	t0 := time.Unix(1764500000, 0)
	for i := range 250 {
		api.Add(fakestripe.PaymentIntentSucceeded(fakestripe.Payment{
			ID: fmt.Sprintf("pi_%03d", i), Amount: 1000, Currency: "jpy", Created: t0.Add(time.Duration(i) * time.Second)}))
	}
	api.Add(fakestripe.ChargeSucceeded(fakestripe.Payment{ID: "ch_1", Amount: 1, Currency: "eur", Created: t0.Add(time.Hour)}))

	var ids []string
	err := stripe.API{BaseURL: srv.URL, Key: key}.List(context.Background(), "payment_intent.succeeded", t0.Add(20*time.Second),
		func(ev json.RawMessage) error {
			var e struct{ ID, Type string }
			if err := json.Unmarshal(ev, &e); err != nil {
				return err
			}
			if e.Type != "payment_intent.succeeded" {
				t.Errorf("%s has type %s", e.ID, e.Type)
			}
			ids = append(ids, e.ID)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 230 || ids[0] != "evt_pi_249" || ids[229] != "evt_pi_020" {
		t.Fatalf("listed %d events, %v ... %v; want 230, evt_pi_249 to evt_pi_020", len(ids), ids[:1], ids[len(ids)-1:])
	}
	if n := api.Requests(); n != 3 {
		t.Errorf("%d requests for 230 events, want 3 pages of 100", n)
	}

	stop := errors.New("stop")
	calls := 0
	err = stripe.API{BaseURL: srv.URL, Key: key}.List(context.Background(), "payment_intent.succeeded", t0,
		func(json.RawMessage) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("fn's error: %v after %d calls; want it returned after 1", err, calls)
	}
}

func TestAPIWrongKeyIsRefusedAndNotRepeated(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(fakestripe.New("sk_test_right0123456789"))
	t.Cleanup(srv.Close)
	const wrong = "sk_test_wrong0123456789"
	err := stripe.API{BaseURL: srv.URL, Key: wrong}.List(context.Background(), "payment_intent.succeeded", time.Now(),
		func(json.RawMessage) error { t.Error("an event was listed with a wrong key"); return nil })
	if !errors.Is(err, provider.ErrRefused) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong key: %v, want ErrRefused naming the 401", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Errorf("the error repeats the key: %v", err)
	}
}

// TestStripeSourcesDefaultToPaymentIntentSucceeded: a source whose
// settings name no events records payment_intent.succeeded alone, and its
// lister lists those alone.
func TestStripeSourcesDefaultToPaymentIntentSucceeded(t *testing.T) {
	t.Parallel()
	p, ok := provider.Lookup("stripe")
	if !ok {
		t.Fatal("stripe is not registered")
	}
	a, err := p.New(provider.Config{Source: "stripe", Rules: payload.NewRules("", nil)})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1764500000, 0)
	pi := fakestripe.PaymentIntentSucceeded(fakestripe.Payment{ID: "pi_default", Amount: 1000, Currency: "jpy", Created: t0})
	ch := fakestripe.ChargeSucceeded(fakestripe.Payment{ID: "ch_default", Amount: 1, Currency: "eur", Created: t0})
	if events, err := a.Adapt(pi, ""); err != nil || len(events) != 1 || events[0].TransactionID != "pi_default" {
		t.Errorf("payment_intent.succeeded: %+v, %v; want it recorded", events, err)
	}
	if events, err := a.Adapt(ch, ""); err != nil || len(events) != 0 {
		t.Errorf("charge.succeeded: %+v, %v; want it ignored", events, err)
	}

	const key = "sk_test_default0123456789"
	api := fakestripe.New(key)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	api.Add(pi)
	api.Add(ch)
	l, err := p.(provider.Lister).NewLister(provider.ListerConfig{Source: "stripe", URL: srv.URL, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var listed []provider.ListedEvent
	if err := l.List(context.Background(), t0.Add(-time.Hour), func(ev provider.ListedEvent) error {
		listed = append(listed, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Ref != "pi_default" || listed[0].ID != "evt_pi_default" {
		t.Fatalf("listed %+v, want the PaymentIntent's event alone", listed)
	}
}
