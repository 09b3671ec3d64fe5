package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/fakestripe"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
)

// fakeMollie is Mollie's payments API for one key: GET
// /v2/payments/{id}, each request counted.
type fakeMollie struct {
	key      string
	mu       sync.Mutex
	payments map[string]string
	requests atomic.Int64
}

func (f *fakeMollie) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	time.Sleep(20 * time.Millisecond) // an API across the internet
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"status":401,"title":"Unauthorized Request","detail":"Missing authentication, or failed to authenticate"}`))
		return
	}
	id, ok := strings.CutPrefix(r.URL.Path, "/v2/payments/")
	f.mu.Lock()
	body, known := f.payments[id]
	f.mu.Unlock()
	if r.Method != http.MethodGet || !ok || !known {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"status":404,"title":"Not Found","detail":"No payment exists with token ` + id + `."}`))
		return
	}
	w.Header().Set("Content-Type", "application/hal+json")
	_, _ = w.Write([]byte(body))
}

func (f *fakeMollie) paid(id, value, currency string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.payments[id] = fmt.Sprintf(`{"resource":"payment","id":%q,"mode":"test","createdAt":"2026-12-06T10:00:00+00:00",
		"amount":{"value":%q,"currency":%q},"description":"Order 12345","method":"ideal","metadata":{"order_id":"12345"},
		"status":"paid","paidAt":"2026-12-06T10:01:00+00:00","profileId":"pfl_QkEhN94Ba","sequenceType":"oneoff",
		"redirectUrl":"https://webshop.example.org/order/12345/","webhookUrl":"https://paylock.example.org/webhooks/mollie"}`, id, value, currency)
}

// noticesEnv is three paylock serve replicas sharing a database and Redis,
// with a mollie source (its webhooks unsigned, its key in MOLLIE_API_KEY)
// and a stripe source of thin events, each fetching from a fake API.
type noticesEnv struct {
	reps   []*stormReplica
	mollie *fakeMollie
	stripe *fakestripe.API
	dsn    string
}

const noticesStripeSecret = "whsec_thin-events-test-secret-0123456789"

func startNoticeReplicas(t *testing.T) *noticesEnv {
	t.Helper()
	m := &fakeMollie{key: "test_dHar4XY7LxsDOtmnkVtjNVWXLSlXsM", payments: map[string]string{}}
	ms := httptest.NewServer(m)
	t.Cleanup(ms.Close)
	sa := fakestripe.New(syncKey)
	ss := httptest.NewServer(sa)
	t.Cleanup(ss.Close)
	path := filepath.Join(t.TempDir(), "sources.yaml")
	file := `
sources:
  mollie:
    adapter: mollie
    api_key_env: MOLLIE_API_KEY
    api_url: ` + ms.URL + `
  stripethin:
    adapter: stripe
    thin: true
    secrets_env: STRIPE_THIN_SECRETS
    api_key_env: STRIPE_THIN_KEY
    api_url: ` + ss.URL + `
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn, _ := paylocktest.MigratedSchema(t)
	env := map[string]string{
		"DATABASE_URL":         dsn,
		"REDIS_URL":            testkit.RedisURL(t),
		"PAYLOCK_LOCK_PREFIX":  testkit.Key(t, "") + ":",
		"PAYLOCK_SOURCES_FILE": path,
		"MOLLIE_API_KEY":       m.key,
		"STRIPE_THIN_SECRETS":  noticesStripeSecret,
		"STRIPE_THIN_KEY":      syncKey,
		"PAYLOCK_LOG_LEVEL":    "error",
	}
	return &noticesEnv{reps: startServeReplicas(t, 3, env), mollie: m, stripe: sa, dsn: dsn}
}

// storm sends 5 copies of one webhook to each replica at once and returns
// the answers' statuses and results.
func (e *noticesEnv) storm(t *testing.T, path string, header http.Header, body []byte) []string {
	t.Helper()
	var wg sync.WaitGroup
	out := make([]string, 15)
	for i := range out {
		wg.Go(func() {
			status, raw, err := post(e.reps[i%3].url+path, body, header.Clone())
			if err != nil {
				out[i] = err.Error()
				return
			}
			var res struct{ Result string }
			_ = json.Unmarshal(raw, &res)
			out[i] = fmt.Sprintf("%d %s", status, res.Result)
		})
	}
	wg.Wait()
	return out
}

func wantAcknowledged(t *testing.T, what string, answers []string) {
	t.Helper()
	for _, a := range answers {
		if a != "200 processed" && a != "200 duplicate" {
			t.Fatalf("%s: a copy answered %q; want 200 processed or duplicate (all: %q)", what, a, answers)
		}
	}
}

// Mollie's and Stripe's thin webhooks carry no payment: three replicas of
// paylock serve, five copies of each webhook at each replica at once,
// record the payment their provider's API gives once, and ask the API at
// most a few times, not fifteen.
func TestNoticeStormsRecordOnceAndFetchABoundedNumberOfTimes(t *testing.T) {
	t.Parallel()
	e := startNoticeReplicas(t)
	ctx := context.Background()
	st := paylocktest.Migrated(t, e.dsn)

	e.mollie.paid("tr_WDqYK6vllg", "10.00", "EUR")
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	wantAcknowledged(t, "mollie storm", e.storm(t, "/webhooks/mollie", form, []byte("id=tr_WDqYK6vllg")))
	if n := e.mollie.requests.Load(); n < 1 || n > 3 {
		t.Fatalf("15 copies of a Mollie webhook asked Mollie's API %d times, want 1 to 3", n)
	} else {
		t.Logf("mollie: 15 copies over 3 replicas, %d requests to the API", n)
	}
	p, err := st.Payments().Payment(ctx, "mollie", "tr_WDqYK6vllg")
	if err != nil || p.Amount != 1000 || p.Currency != "EUR" {
		t.Fatalf("mollie payment %+v, %v; want 1000 EUR as the API says", p, err)
	}

	pi := fakestripe.Payment{ID: "pi_3QthinStorm000001", Amount: 4200, Currency: "gbp", Created: time.Now()}
	e.stripe.PutPaymentIntent(fakestripe.PaymentIntent(pi, "succeeded"))
	thin := []byte(`{"id":"evt_test_65R9Ijk8x4JoZOXDE1ESpMObtT","object":"v2.core.event","type":"v1.payment_intent.succeeded",` +
		`"livemode":false,"created":"2026-12-06T10:01:00.000Z","context":null,` +
		`"related_object":{"id":"pi_3QthinStorm000001","type":"payment_intent","url":"/v1/payment_intents/pi_3QthinStorm000001"},"reason":null}`)
	h, err := stripeSigned(noticesStripeSecret, thin)
	if err != nil {
		t.Fatal(err)
	}
	before := e.stripe.Requests()
	wantAcknowledged(t, "thin-event storm", e.storm(t, "/webhooks/stripethin", h, thin))
	if n := e.stripe.Requests() - before; n < 1 || n > 3 {
		t.Fatalf("15 copies of a thin event asked Stripe's API %d times, want 1 to 3", n)
	} else {
		t.Logf("stripe thin: 15 copies over 3 replicas, %d requests to the API", n)
	}
	p, err = st.Payments().Payment(ctx, "stripethin", "pi_3QthinStorm000001")
	if err != nil || p.Amount != 4200 || p.Currency != "GBP" {
		t.Fatalf("thin-event payment %+v, %v; want 4200 GBP as the API says", p, err)
	}
	if n := testkit.Count(t, st.Pool(), `SELECT count(*) FROM payments`); n != 2 {
		t.Fatalf("%d payments recorded, want 2", n)
	}

	// An id Mollie does not know: 422 for each copy, nothing written.
	before64 := e.mollie.requests.Load()
	for _, a := range e.storm(t, "/webhooks/mollie", form, []byte("id=tr_unknown0001")) {
		if !strings.HasPrefix(a, "422") {
			t.Fatalf("a copy of an unknown id answered %q, want 422", a)
		}
	}
	if n := e.mollie.requests.Load() - before64; n < 1 || n > 3 {
		t.Fatalf("15 copies of an unknown id asked Mollie's API %d times, want 1 to 3", n)
	} else {
		t.Logf("mollie unknown id: 15 copies over 3 replicas, %d requests to the API", n)
	}
	// A body shaped as Mollie's API answer, posted to the webhook, is not
	// read as one.
	forged, _ := json.Marshal(map[string]any{"resource": "payment", "id": "tr_forged00001", "status": "paid",
		"amount": map[string]string{"value": "99999.00", "currency": "EUR"}})
	if status, raw, _ := post(e.reps[0].url+"/webhooks/mollie", forged, http.Header{"Content-Type": {"application/json"}}); status != http.StatusUnsupportedMediaType {
		t.Fatalf("a forged API answer as JSON: %d %s, want 415", status, raw)
	}
	if n := testkit.Count(t, st.Pool(), `SELECT count(*) FROM payments`); n != 2 {
		t.Fatalf("%d payments after the unknown and forged ids, want still 2", n)
	}
}

// stripeSigned signs body as Stripe would with secret.
func stripeSigned(secret string, body []byte) (http.Header, error) {
	secrets, err := signature.ParseSecrets(signature.SchemeStripe, secret)
	if err != nil {
		return nil, err
	}
	h := signature.Sign(signature.SchemeStripe, secrets[0], "", time.Now(), body)
	h.Set("Content-Type", "application/json")
	return h, nil
}

// A mollie source needs no secrets (its webhooks carry none) but its API
// key: without api_key_env serve refuses to start, saying so.
func TestAMollieSourceWithoutItsAPIKeyIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sources.yaml")
	if err := os.WriteFile(path, []byte("sources:\n  mollie: {adapter: mollie}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := loadConfig("serve", nil, envMap(map[string]string{
		"PAYLOCK_SOURCES_FILE": path, "DATABASE_URL": testkit.DatabaseURL(t), "REDIS_URL": testkit.RedisURL(t),
	}))
	if err != nil {
		t.Fatal(err)
	}
	sources, _, err := handlerSources(cfg, testkit.Logger())
	if err != nil {
		t.Fatalf("a mollie source without secrets: %v; want it served (it signs nothing)", err)
	}
	if sources[len(sources)-1].Verifier != nil {
		t.Fatal("a mollie source got a verifier")
	}
	err = withFetchers(cfg, sources)
	if err == nil {
		_, err = handler.New(handler.Config{Sources: sources}, nil, nil)
	}
	if !errors.Is(err, handler.ErrNoFetcher) || !strings.Contains(err.Error(), "api_key_env") {
		t.Fatalf("a mollie source without api_key_env: %v; want handler.ErrNoFetcher naming api_key_env", err)
	}
	var buf bytes.Buffer
	fmt.Fprint(&buf, err)
	if strings.Contains(buf.String(), "test_") {
		t.Fatal("the error shows a key")
	}
}
