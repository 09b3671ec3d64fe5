package compat

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/paylock/paylock/internal/fakestripe"
)

// TestStripeGoListsTheFakesEvents points stripe-go's own client at
// internal/fakestripe (what paylock's reconciliation tests list events
// from): its pages decode as stripe.EventList, its pagination by
// starting_after and has_more is the one stripe-go follows, and its events
// are stripe.Events whose PaymentIntents carry the amounts given.
func TestStripeGoListsTheFakesEvents(t *testing.T) {
	t.Parallel()
	const key = "sk_test_compat0123456789"
	api := fakestripe.New(key)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	t0 := time.Unix(1764500000, 0)
	for i := range 7 {
		api.Add(fakestripe.PaymentIntentSucceeded(fakestripe.Payment{
			ID: fmt.Sprintf("pi_compat_%d", i), Amount: int64(100 * (i + 1)), Currency: "jpy", Created: t0.Add(time.Duration(i) * time.Minute)}))
	}
	api.Add(fakestripe.ChargeSucceeded(fakestripe.Payment{ID: "ch_compat", Amount: 1500, Currency: "eur", Created: t0.Add(time.Hour)}))
	client := func(key string) *stripe.Client {
		b := stripe.NewBackendsWithConfig(&stripe.BackendConfig{URL: stripe.String(srv.URL), MaxNetworkRetries: stripe.Int64(0)})
		return stripe.NewClient(key, stripe.WithBackends(b))
	}

	params := &stripe.EventListParams{Type: stripe.String(string(stripe.EventTypePaymentIntentSucceeded)),
		CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: t0.Add(time.Minute).Unix()}}
	params.Limit = stripe.Int64(2)
	var got []string
	for ev, err := range client(key).V1Events.List(context.Background(), params) {
		if err != nil {
			t.Fatal(err)
		}
		var pi stripe.PaymentIntent
		mustUnmarshal(t, ev.Data.Raw, &pi)
		if ev.Type != stripe.EventTypePaymentIntentSucceeded || pi.AmountReceived != pi.Amount || pi.Currency != stripe.CurrencyJPY {
			t.Errorf("%s: %s, %d of %d %s", ev.ID, ev.Type, pi.AmountReceived, pi.Amount, pi.Currency)
		}
		got = append(got, fmt.Sprintf("%s:%d", pi.ID, pi.AmountReceived))
	}
	if fmt.Sprint(got) != "[pi_compat_6:700 pi_compat_5:600 pi_compat_4:500 pi_compat_3:400 pi_compat_2:300 pi_compat_1:200]" {
		t.Errorf("stripe-go listed %v", got)
	}

	types := &stripe.EventListParams{Types: stripe.StringSlice([]string{"charge.succeeded"})}
	var charges []string
	for ev, err := range client(key).V1Events.List(context.Background(), types) {
		if err != nil {
			t.Fatal(err)
		}
		charges = append(charges, ev.ID)
	}
	if fmt.Sprint(charges) != "[evt_ch_compat]" {
		t.Errorf("types=[charge.succeeded]: %v", charges)
	}

	for _, err := range client("sk_test_wrong").V1Events.List(context.Background(), &stripe.EventListParams{}) {
		var se *stripe.Error
		if !errors.As(err, &se) || se.HTTPStatusCode != 401 {
			t.Errorf("a wrong key: %v, want a stripe.Error with status 401", err)
		}
		break
	}
}
