package stripe_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakestripe"
	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/stripe"
)

// fetcherOf serves a fake Stripe API and returns it, a stripe source's
// fetcher of it with its key, and its URL.
func fetcherOf(t *testing.T) (*fakestripe.API, provider.Fetcher, string) {
	t.Helper()
	const key = "sk_test_fetch"
	api := fakestripe.New(key)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	f, err := stripe.Provider{}.NewFetcher(provider.ListerConfig{Source: "stripe", URL: srv.URL, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return api, f, srv.URL
}

// TestFetchTurnsEachPaymentIntentStatusIntoTheEventItsWebhookWouldBe:
// what the adapter reads from a fetched PaymentIntent is what its webhook
// carries, under the event id sync:<pi>:<status>; a status that is not
// final is no body.
func TestFetchTurnsEachPaymentIntentStatusIntoTheEventItsWebhookWouldBe(t *testing.T) {
	t.Parallel()
	api, f, url := fetcherOf(t)
	a, err := stripe.Provider{}.New(provider.Config{Source: "stripe", Rules: payload.NewRules("", nil)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		status string
		kind   lifecycle.Kind // "" with ok: a payment that succeeded
		ok     bool           // a body is returned
	}{
		{"succeeded", "", true},
		{"requires_capture", lifecycle.Authorized, true},
		{"canceled", lifecycle.Canceled, true},
		{"processing", "", false},
		{"requires_action", "", false},
	} {
		pi := "pi_fetch_" + tc.status
		api.PutPaymentIntent(fakestripe.PaymentIntent(fakestripe.Payment{ID: pi, Amount: 1200, Currency: "jpy", Created: time.Now()}, tc.status))
		body, status, err := f.Fetch(t.Context(), pi)
		if err != nil || status != tc.status || (body != nil) != tc.ok {
			t.Errorf("%s: body %v, status %q, %v", tc.status, body != nil, status, err)
			continue
		}
		if !tc.ok {
			continue
		}
		events, err := a.Adapt(body, "")
		if err != nil || len(events) != 1 {
			t.Errorf("%s: the adapter read %d events, %v", tc.status, len(events), err)
			continue
		}
		e := events[0]
		if e.Kind != tc.kind || e.TransactionID != pi || e.Amount != 1200 || e.Currency != "JPY" || e.EventID != "sync:"+pi+":"+tc.status {
			t.Errorf("%s: %+v", tc.status, e)
		}
	}
	if _, _, err := f.Fetch(t.Context(), "pi_nobody"); !errors.Is(err, provider.ErrNoSuchPayment) {
		t.Errorf("an unknown PaymentIntent: %v, want ErrNoSuchPayment", err)
	}
	bad, _ := stripe.Provider{}.NewFetcher(provider.ListerConfig{Source: "stripe", URL: url, Key: "sk_test_wrong"})
	if _, _, err := bad.Fetch(t.Context(), "pi_fetch_succeeded"); !errors.Is(err, provider.ErrRefused) {
		t.Errorf("a wrong key: %v, want ErrRefused", err)
	}
}

func TestAPISettingsAreCheckedWithTheSource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, value string
		ok               bool
	}{
		{"a variable", "api_key_env", `"STRIPE_SHOP_KEY"`, true},
		{"a key, not a variable", "api_key_env", `"sk_live_123"`, true},
		{"not a name", "api_key_env", `"STRIPE KEY"`, false},
		{"not a string", "api_key_env", `7`, false},
		{"an https URL", "api_url", `"https://api.stripe.com"`, true},
		{"a fake", "api_url", `"http://127.0.0.1:12111"`, true},
		{"credentials", "api_url", `"https://sk:x@api.stripe.com"`, false},
		{"no scheme", "api_url", `"api.stripe.com"`, false},
	} {
		_, err := stripe.Provider{}.New(provider.Config{Source: "stripe", Rules: payload.NewRules("", nil),
			Settings: provider.Settings{tc.key: json.RawMessage(tc.value)}})
		var se *provider.SettingError
		if tc.ok != (err == nil) || err != nil && (!errors.As(err, &se) || se.Key != tc.key) {
			t.Errorf("%s: %s = %s: %v", tc.name, tc.key, tc.value, err)
		}
	}
}

// TestFindByOrderSearchesThePaymentIntentsMetadata: the fetcher finds the
// PaymentIntents whose metadata names an order (quotes and backslashes in
// the order id escaped in Stripe's query language), by the default
// pointer or another metadata key, and refuses a pointer Stripe cannot
// search by without asking the API.
func TestFindByOrderSearchesThePaymentIntentsMetadata(t *testing.T) {
	t.Parallel()
	api, f, url := fetcherOf(t)
	finder, ok := f.(provider.OrderFinder)
	if !ok {
		t.Fatal("the stripe fetcher is no provider.OrderFinder")
	}
	odd := `ord-'7'\x`
	for _, p := range []fakestripe.Payment{
		{ID: "pi_a", Metadata: map[string]string{"order_id": "ord-1"}},
		{ID: "pi_b", Metadata: map[string]string{"order_id": "ord-1"}},
		{ID: "pi_c", Metadata: map[string]string{"order_id": "ord-2", "cart": "c-9"}},
		{ID: "pi_d", Metadata: map[string]string{"order_id": odd}},
		{ID: "pi_e"},
	} {
		p.Amount, p.Currency, p.Created = 1200, "jpy", time.Now()
		api.PutPaymentIntent(fakestripe.PaymentIntent(p, "succeeded"))
	}
	orderID := []string{"data", "object", "metadata", "order_id"}
	for _, tc := range []struct {
		pointer []string
		order   string
		want    []string
	}{
		{orderID, "ord-1", []string{"pi_a", "pi_b"}},
		{orderID, "ord-2", []string{"pi_c"}},
		{orderID, odd, []string{"pi_d"}},
		{orderID, "ord-nobody", nil},
		{[]string{"data", "object", "metadata", "cart"}, "c-9", []string{"pi_c"}},
	} {
		got, err := finder.FindByOrder(t.Context(), tc.pointer, tc.order)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%v = %q: %v, %v; want %v", tc.pointer, tc.order, got, err, tc.want)
		}
	}
	before := api.Requests()
	for _, p := range [][]string{
		{"data", "object", "description"},
		{"data", "object", "metadata", "it's"},
		{"metadata", "order_id"},
	} {
		if _, err := finder.FindByOrder(t.Context(), p, "ord-1"); !errors.Is(err, provider.ErrUnsupportedPointer) {
			t.Errorf("%v: %v, want ErrUnsupportedPointer", p, err)
		}
	}
	if n := api.Requests() - before; n != 0 {
		t.Errorf("%d requests for pointers Stripe cannot search by, want none", n)
	}
	bad, _ := stripe.Provider{}.NewFetcher(provider.ListerConfig{Source: "stripe", URL: url, Key: "sk_test_wrong"})
	if _, err := bad.(provider.OrderFinder).FindByOrder(t.Context(), orderID, "ord-1"); !errors.Is(err, provider.ErrRefused) {
		t.Errorf("a wrong key: %v, want ErrRefused", err)
	}
}
