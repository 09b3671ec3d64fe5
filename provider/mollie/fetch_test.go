package mollie

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

const testKey = "test_dHar4XY7LxsDOtmnkVtjNVWXLSlXsM"

// fakeMollie is Mollie's payments API as far as Fetch uses it: GET
// /v2/payments/{id} with a bearer key, Mollie's error bodies, and a
// count of the requests it was sent.
type fakeMollie struct {
	key      string
	requests atomic.Int64

	mu       sync.Mutex
	payments map[string][]byte // by the id asked for
	status   map[string]int    // an error status to answer for an id
	last     *http.Request
}

// newFake serves a fake API holding every sample answer under its ref,
// and returns it with its URL.
func newFake(t *testing.T) (*fakeMollie, string) {
	t.Helper()
	f := &fakeMollie{key: testKey, payments: map[string][]byte{}, status: map[string]int{}}
	for _, d := range (Provider{}).Samples().Deliveries {
		f.payments[d.Ref] = d.Body
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeMollie) put(id string, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.payments[id] = body
}

func (f *fakeMollie) fail(id string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status[id] = status
}

func (f *fakeMollie) lastRequest() *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fakeMollie) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	f.mu.Lock()
	f.last = r.Clone(r.Context())
	id, found := strings.CutPrefix(r.URL.Path, "/v2/payments/")
	body, ok := f.payments[id]
	status := f.status[id]
	f.mu.Unlock()
	problem := func(status int, title, detail string) {
		w.Header().Set("Content-Type", "application/hal+json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "title": title, "detail": detail})
	}
	switch {
	case r.Method != http.MethodGet || !found:
		problem(http.StatusNotFound, "Not Found", "The resource does not exist.")
	case r.Header.Get("Authorization") != "Bearer "+f.key:
		// Echoes what it was sent, as a careless API might: the fetcher
		// must not pass it on.
		problem(http.StatusUnauthorized, "Unauthorized Request", "Failed to authenticate with "+r.Header.Get("Authorization"))
	case status != 0:
		problem(status, http.StatusText(status), "Something went wrong with "+id+" and key "+f.key+".")
	case !ok:
		problem(http.StatusNotFound, "Not Found", "No payment exists with token "+id+".")
	default:
		w.Header().Set("Content-Type", "application/hal+json")
		_, _ = w.Write(body)
	}
}

// fetcherOf is a mollie source's fetcher of the API at url with key.
func fetcherOf(t *testing.T, url, key string) provider.Fetcher {
	t.Helper()
	f, err := Provider{}.NewFetcher(provider.ListerConfig{Source: "mollie", URL: url, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// wantNoKey fails when err's text holds the key.
func wantNoKey(t *testing.T, err error, key string) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), key) {
		t.Errorf("error %q reveals the API key", err)
	}
}

// TestFetchAsksMollieForThePaymentWithItsRefundsAndChargebacks: the
// request Mollie's API documents, and its answer as the adapter reads it.
func TestFetchAsksMollieForThePaymentWithItsRefundsAndChargebacks(t *testing.T) {
	t.Parallel()
	api, url := newFake(t)
	f := fetcherOf(t, url+"/", testKey)
	a := newAdapter(t)
	for _, d := range (Provider{}).Samples().Deliveries {
		body, status, err := f.Fetch(t.Context(), d.Ref)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		r := api.lastRequest()
		if r.Method != http.MethodGet || r.URL.Path != "/v2/payments/"+d.Ref || r.URL.Query().Get("embed") != "refunds,chargebacks" ||
			len(r.URL.Query()) != 1 || r.Header.Get("Authorization") != "Bearer "+testKey || r.Header.Get("Accept") != "application/json" {
			t.Errorf("%s: request %s %s Authorization %q Accept %q", d.Name, r.Method, r.URL, r.Header.Get("Authorization"), r.Header.Get("Accept"))
		}
		var want struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(d.Body, &want); err != nil {
			t.Fatal(err)
		}
		if status != want.Status {
			t.Errorf("%s: status %q, want Mollie's %q", d.Name, status, want.Status)
		}
		if len(d.Events) == 0 {
			if body != nil {
				t.Errorf("%s: a body for a state that records nothing", d.Name)
			}
			continue
		}
		if !bytes.Equal(body, d.Body) {
			t.Errorf("%s: the body is not Mollie's answer as it came", d.Name)
		}
		got, err := a.Adapt(body, "")
		providertest.CheckAdapted(t, got, err)
		providertest.WantEvents(t, got, withPayloads(d.Events, d.Body))
	}
}

// TestFetchOfAPendingPaymentWithARefundReturnsTheBody: nothing is final
// about a pending payment, but what is embedded in it is recorded.
func TestFetchOfAPendingPaymentWithARefundReturnsTheBody(t *testing.T) {
	t.Parallel()
	api, url := newFake(t)
	odd := replaced(t, "refunded.json", `"status": "paid"`, `"status": "pending"`)
	api.put("tr_Rf8nD2kWq4", odd)
	body, status, err := fetcherOf(t, url, testKey).Fetch(t.Context(), "tr_Rf8nD2kWq4")
	if err != nil || status != "pending" || !bytes.Equal(body, odd) {
		t.Errorf("a pending payment with refunds: body %v, status %q, %v", body != nil, status, err)
	}
}

// TestAnAnswerTheAdapterRefusesIsReturnedForItToRefuse: Fetch checks
// only that the answer is the payment asked for; what is wrong inside it
// is the adapter's 422, reported where refused bodies are.
func TestAnAnswerTheAdapterRefusesIsReturnedForItToRefuse(t *testing.T) {
	t.Parallel()
	api, url := newFake(t)
	bad := replaced(t, "paid.json", `"value": "10.00"`, `"value": "10.001"`)
	api.put("tr_WDqYK6vllg", bad)
	body, status, err := fetcherOf(t, url, testKey).Fetch(t.Context(), "tr_WDqYK6vllg")
	if err != nil || status != "paid" || !bytes.Equal(body, bad) {
		t.Fatalf("Fetch = body %v, status %q, %v; want the answer", body != nil, status, err)
	}
	got, err := newAdapter(t).Adapt(body, "")
	if got != nil {
		t.Errorf("events %+v of a refused answer", got)
	}
	providertest.WantRefused(t, err, 422, "amount.value")
}

func TestFetchNamesWhatWentWrongWithoutTheKey(t *testing.T) {
	t.Parallel()
	api, url := newFake(t)
	big := append(append([]byte(nil), sample("paid.json")[:len(sample("paid.json"))-2]...),
		[]byte(`,"x":"`+strings.Repeat("x", maxAnswerBytes)+`"}`)...)
	api.put("tr_Big1", big)
	api.put("tr_Other1", sample("paid.json")) // answers for tr_WDqYK6vllg
	api.put("tr_Refund1", replaced(t, "paid.json", `"resource": "payment"`, `"resource": "refund"`, `"id": "tr_WDqYK6vllg"`, `"id": "tr_Refund1"`))
	api.put("tr_Html1", []byte("<html>maintenance</html>"))
	api.fail("tr_Down1", http.StatusServiceUnavailable)
	api.fail("tr_Busy1", http.StatusTooManyRequests)
	api.fail("tr_Gone1", http.StatusGone)
	for _, tc := range []struct {
		name, key, ref string
		want           error // nil: neither ErrNoSuchPayment, ErrRefused nor ErrAnswer
	}{
		{"an unknown payment", testKey, "tr_Nobody1", provider.ErrNoSuchPayment},
		{"a wrong key", "test_wrongwrongwrongwrongwrongwrong", "tr_WDqYK6vllg", provider.ErrRefused},
		{"no key", "", "tr_WDqYK6vllg", provider.ErrRefused},
		{"another 4xx", testKey, "tr_Gone1", provider.ErrRefused},
		{"another payment's answer", testKey, "tr_Other1", ErrAnswer},
		{"not a payment", testKey, "tr_Refund1", ErrAnswer},
		{"not JSON", testKey, "tr_Html1", ErrAnswer},
		{"larger than 1 MiB", testKey, "tr_Big1", ErrAnswer},
		{"the API down", testKey, "tr_Down1", nil},
		{"too many requests", testKey, "tr_Busy1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body, status, err := fetcherOf(t, url, tc.key).Fetch(t.Context(), tc.ref)
			if err == nil || body != nil || status != "" {
				t.Fatalf("Fetch = body %v, status %q, %v; want an error", body != nil, status, err)
			}
			for _, sentinel := range []error{provider.ErrNoSuchPayment, provider.ErrRefused, ErrAnswer} {
				if want := sentinel == tc.want; errors.Is(err, sentinel) != want {
					t.Errorf("error %q: errors.Is(err, %q) = %v, want %v", err, sentinel, !want, want)
				}
			}
			wantNoKey(t, err, testKey)
			if tc.key != "" {
				wantNoKey(t, err, tc.key)
			}
		})
	}
}

// TestFetchAsksNothingForARefThatIsNotAPaymentID: a ref comes from a
// webhook anybody can post; only a payment id reaches Mollie's API, so
// that no other path or query is ever requested with the key.
func TestFetchAsksNothingForARefThatIsNotAPaymentID(t *testing.T) {
	t.Parallel()
	api, url := newFake(t)
	f := fetcherOf(t, url, testKey)
	for _, ref := range []string{"", "tr_", "re_4qqhO89gsT", "ord_kEn1PlbGa", "tr_WDqYK6vllg/refunds", "tr_WDqYK6vllg?testmode=true",
		"tr_../../v2/methods", "tr_WDqYK6vllg%2F", "TR_WDqYK6vllg", " tr_WDqYK6vllg", "tr_" + strings.Repeat("a", 65)} {
		body, _, err := f.Fetch(t.Context(), ref)
		if body != nil || !errors.Is(err, provider.ErrNoSuchPayment) || !errors.Is(err, ErrNotPaymentID) {
			t.Errorf("ref %q: body %v, %v; want ErrNoSuchPayment and ErrNotPaymentID", ref, body != nil, err)
		}
		wantNoKey(t, err, testKey)
	}
	if n := api.requests.Load(); n != 0 {
		t.Errorf("%d requests for refs that are not payment ids, want none", n)
	}
	if _, _, err := f.Fetch(t.Context(), "tr_WDqYK6vllg"); err != nil || api.requests.Load() != 1 {
		t.Errorf("a payment id: %v after %d requests", err, api.requests.Load())
	}
}

func TestFetchStopsWithItsContext(t *testing.T) {
	t.Parallel()
	_, url := newFake(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := fetcherOf(t, url, testKey).Fetch(ctx, "tr_WDqYK6vllg")
	if err == nil || errors.Is(err, provider.ErrRefused) || errors.Is(err, provider.ErrNoSuchPayment) {
		t.Errorf("a canceled context: %v, want a plain error", err)
	}
	wantNoKey(t, err, testKey)
}

func TestNewFetcherDefaults(t *testing.T) {
	t.Parallel()
	f, err := Provider{}.NewFetcher(provider.ListerConfig{Source: "mollie", Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	ft := f.(fetcher)
	if ft.base != DefaultURL || ft.client == nil || ft.client.Timeout <= 0 {
		t.Errorf("defaults: base %q, client %+v; want %s and a client with a timeout", ft.base, ft.client, DefaultURL)
	}
}
