package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakestripe"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

const (
	syncToken = "admin-token-of-the-sync-tests"
	syncKey   = "sk_test_sync0123456789"
)

// syncEnv is a migrated schema, a fake Stripe API, and the sources of the
// sync tests: stripe (signed webhooks, a status API with its key in
// STRIPE_SYNC_KEY, forwarding its payments), stripebad (a status API whose
// key Stripe refuses), adyen (confirmed answers).
type syncEnv struct {
	env map[string]string
	st  *store.Store
	api *fakestripe.API
}

func setupSync(t *testing.T) *syncEnv {
	t.Helper()
	api := fakestripe.New(syncKey)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "sources.yaml")
	file := `
sources:
  stripe:
    adapter: stripe
    signature: stripe
    secrets_env: STRIPE_WEBHOOK_SECRETS
    api_key_env: STRIPE_SYNC_KEY
    api_url: ` + srv.URL + `
    forward_url: https://orders.internal/paylock
  stripebad:
    adapter: stripe
    signature: stripe
    secrets_env: STRIPEBAD_WEBHOOK_SECRETS
    api_key_env: STRIPE_WRONG_KEY
    api_url: ` + srv.URL + `
  adyen:
    adapter: adyen
    signature: adyen
    secrets_env: ADYEN_HMAC_KEYS
    forward_url: https://orders.internal/paylock
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn, st := paylocktest.MigratedSchema(t)
	env := map[string]string{
		"DATABASE_URL":              dsn,
		"REDIS_URL":                 testkit.RedisURL(t),
		"PAYLOCK_LOCK_PREFIX":       testkit.Key(t, "") + ":",
		"PAYLOCK_WEBHOOK_SECRETS":   paymentsSecret,
		"PAYLOCK_SOURCES_FILE":      path,
		"STRIPE_WEBHOOK_SECRETS":    stripeSecret,
		"ADYEN_HMAC_KEYS":           adyenKey,
		"STRIPE_SYNC_KEY":           syncKey,
		"STRIPE_WRONG_KEY":          "sk_test_revoked",
		"STRIPEBAD_WEBHOOK_SECRETS": "whsec_stripebad-test-secret-0123456789",
		"PAYLOCK_FORWARD_SECRETS":   forwardSecret,
		"PAYLOCK_ADMIN_TOKEN":       syncToken,
		"PAYLOCK_LOG_LEVEL":         "error",
	}
	return &syncEnv{env: env, st: st, api: api}
}

// succeeded puts pi, succeeded for amount JPY, in the fake API and
// returns its payment_intent.succeeded webhook (event id evt_<pi>).
func (e *syncEnv) succeeded(pi string, amount int64) []byte {
	p := fakestripe.Payment{ID: pi, Amount: amount, Currency: "jpy", Created: time.Now()}
	e.api.PutPaymentIntent(fakestripe.PaymentIntent(p, "succeeded"))
	return fakestripe.PaymentIntentSucceeded(p)
}

// post POSTs body to url (with the admin token when admin) and returns
// the status and the body; an error instead of t.Fatal, for goroutines.
func post(url string, body []byte, header http.Header) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header = header
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

func adminHeader() http.Header {
	return http.Header{"Authorization": {"Bearer " + syncToken}, "Content-Type": {"application/json"}}
}

func stripeHeader(body []byte) (http.Header, error) {
	secrets, err := signature.ParseSecrets(signature.SchemeStripe, stripeSecret)
	if err != nil {
		return nil, err
	}
	h := signature.Sign(signature.SchemeStripe, secrets[0], "", time.Now(), body)
	h.Set("Content-Type", "application/json")
	return h, nil
}

// settle sends until the answer is not 409 or 503 (as a PSP and a
// checkout backend retry), at most 50 times, and returns the last status
// and its "result".
func settle(send func() (int, []byte, error)) (int, string, error) {
	for range 50 {
		status, body, err := send()
		if err != nil {
			return 0, "", err
		}
		if status == http.StatusConflict || status == http.StatusServiceUnavailable {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var r struct {
			Result string `json:"result"`
		}
		_ = json.Unmarshal(body, &r)
		if status != http.StatusOK {
			return status, string(body), nil
		}
		return status, r.Result, nil
	}
	return 0, "", fmt.Errorf("still busy after 50 tries")
}

func (e *syncEnv) sync(base, source, pi string) (int, string, error) {
	return settle(func() (int, []byte, error) {
		return post(base+"/admin/api/v1/payments/"+source+"/"+pi+"/sync", nil, adminHeader())
	})
}

func (e *syncEnv) webhook(base string, body []byte) (int, string, error) {
	return settle(func() (int, []byte, error) {
		h, err := stripeHeader(body)
		if err != nil {
			return 0, nil, err
		}
		return post(base+"/webhooks/stripe", body, h)
	})
}

// forwards counts the forward messages (payment.recorded) of pi, in
// River or the express lane (store's forward_messages).
func (e *syncEnv) forwards(t *testing.T, pi string) int {
	t.Helper()
	return testkit.Count(t, e.st.Pool(), `SELECT count(*) FROM forward_messages WHERE transaction_id = $1`, pi)
}

// TestSyncAndWebhookOfFiftyPaymentIntentsRaceAcrossThreeReplicasAndRecordEachOnce
// delivers, for each of 50 PaymentIntents, its signed webhook and a sync
// at the same moment to different replicas: 50 payments, each recorded by
// exactly one of the two (the other answered duplicate), one forward job
// each.
func TestSyncAndWebhookOfFiftyPaymentIntentsRaceAcrossThreeReplicasAndRecordEachOnce(t *testing.T) {
	t.Parallel()
	e := setupSync(t)
	reps := make([]*served, 3)
	for i := range reps {
		reps[i] = startServe(t, e.env, serveOptions{admin: true})
	}
	const n = 50
	type pair struct{ sync, webhook string }
	got := make([]pair, n)
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		pi := fmt.Sprintf("pi_race_%02d", i)
		body := e.succeeded(pi, int64(1000+i))
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			status, res, err := e.sync(reps[i%3].admin, "stripe", pi)
			if err == nil && status != 200 {
				err = fmt.Errorf("%s: sync: %d %s", pi, status, res)
			}
			got[i].sync = res
			errs <- err
		}()
		go func() {
			defer wg.Done()
			<-start
			status, res, err := e.webhook(reps[(i+1)%3].base, body)
			if err == nil && status != 200 {
				err = fmt.Errorf("%s: webhook: %d %s", pi, status, res)
			}
			got[i].webhook = res
			errs <- err
		}()
		close(start)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if c := testkit.Count(t, e.st.Pool(), `SELECT count(*) FROM payments WHERE source = 'stripe' AND transaction_id LIKE 'pi_race_%'`); c != n {
		t.Errorf("%d payments, want %d", c, n)
	}
	for i, p := range got {
		pi := fmt.Sprintf("pi_race_%02d", i)
		if (p.sync == "processed") == (p.webhook == "processed") || p.sync != "processed" && p.sync != "duplicate" ||
			p.webhook != "processed" && p.webhook != "duplicate" {
			t.Errorf("%s: sync %q, webhook %q: want one processed, the other duplicate", pi, p.sync, p.webhook)
		}
		if f := e.forwards(t, pi); f != 1 {
			t.Errorf("%s: %d payment.recorded forward jobs, want 1", pi, f)
		}
	}
}

// syncAnswer is the JSON of a sync or a confirm.
type syncAnswer struct {
	Result         string `json:"result"`
	Source         string `json:"source"`
	TransactionID  string `json:"transaction_id"`
	ProviderStatus string `json:"provider_status"`
	Payment        *struct {
		Status string `json:"status"`
		Amount int64  `json:"amount"`
		Events []struct {
			EventID string `json:"event_id"`
			Kind    string `json:"kind"`
		} `json:"events"`
	} `json:"payment"`
}

func adminPost(t *testing.T, url string, body []byte) (int, syncAnswer, string) {
	t.Helper()
	status, b, err := post(url, body, adminHeader())
	if err != nil {
		t.Fatal(err)
	}
	var a syncAnswer
	_ = json.Unmarshal(b, &a)
	return status, a, string(b)
}

func TestSyncFirstThenTheWebhookIsADuplicateAndTheOtherWayRound(t *testing.T) {
	t.Parallel()
	e := setupSync(t)
	s := startServe(t, e.env, serveOptions{admin: true})

	first := e.succeeded("pi_sync_first", 4200)
	status, a, raw := adminPost(t, s.admin+"/admin/api/v1/payments/stripe/pi_sync_first/sync", nil)
	if status != 200 || a.Result != "processed" || a.ProviderStatus != "succeeded" || a.Payment == nil ||
		a.Payment.Status != "succeeded" || a.Payment.Amount != 4200 || len(a.Payment.Events) != 1 ||
		a.Payment.Events[0].EventID != "sync:pi_sync_first:succeeded" {
		t.Fatalf("sync: %d %s; want processed, succeeded 4200, its event sync:pi_sync_first:succeeded", status, raw)
	}
	if status, res, err := e.webhook(s.base, first); err != nil || status != 200 || res != "duplicate" {
		t.Errorf("the webhook after the sync: %d %q %v, want 200 duplicate", status, res, err)
	}
	if status, a, raw := adminPost(t, s.admin+"/admin/api/v1/payments/stripe/pi_sync_first/sync", nil); status != 200 || a.Result != "duplicate" {
		t.Errorf("a second sync: %d %s, want duplicate", status, raw)
	}
	if f := e.forwards(t, "pi_sync_first"); f != 1 {
		t.Errorf("pi_sync_first: %d forward jobs, want 1", f)
	}

	second := e.succeeded("pi_webhook_first", 1500)
	if status, res, err := e.webhook(s.base, second); err != nil || status != 200 || res != "processed" {
		t.Fatalf("the webhook: %d %q %v, want 200 processed", status, res, err)
	}
	status, a, raw = adminPost(t, s.admin+"/admin/api/v1/payments/stripe/pi_webhook_first/sync", nil)
	if status != 200 || a.Result != "duplicate" || a.Payment == nil || a.Payment.Status != "succeeded" ||
		len(a.Payment.Events) != 1 || a.Payment.Events[0].EventID != "evt_pi_webhook_first" {
		t.Errorf("the sync after the webhook: %d %s; want duplicate, succeeded, the webhook's event only", status, raw)
	}
	if f := e.forwards(t, "pi_webhook_first"); f != 1 {
		t.Errorf("pi_webhook_first: %d forward jobs, want 1", f)
	}
}

// TestSyncOfAPaymentIntentNamingARegisteredOrderAnswersItPaid: with
// orders on but the deriver not yet run (its interval is an hour), the
// sync's answer carries the order, paid, derived in the same request; the
// webhook after it and the deriver's run leave one order.paid message.
func TestSyncOfAPaymentIntentNamingARegisteredOrderAnswersItPaid(t *testing.T) {
	t.Parallel()
	e := setupSync(t)
	e.env["PAYLOCK_ORDERS_INTERVAL"] = "1h"
	e.env["PAYLOCK_FORWARD_URL"] = "https://orders.internal/paylock"
	s := startServe(t, e.env, serveOptions{admin: true})
	if status, _, raw := adminPost(t, s.admin+"/admin/api/v1/orders",
		[]byte(`{"order_id":"ord-sync","amount":4200,"currency":"JPY"}`)); status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, raw)
	}
	p := fakestripe.Payment{ID: "pi_ord_sync", Amount: 4200, Currency: "jpy", Created: time.Now(),
		Metadata: map[string]string{"order_id": "ord-sync"}}
	e.api.PutPaymentIntent(fakestripe.PaymentIntent(p, "succeeded"))
	status, _, raw := adminPost(t, s.admin+"/admin/api/v1/payments/stripe/pi_ord_sync/sync", nil)
	var a struct {
		Result string `json:"result"`
		Order  *struct {
			OrderID    string  `json:"order_id"`
			Status     string  `json:"status"`
			Amount     *int64  `json:"amount"`
			Currency   *string `json:"currency"`
			AmountPaid int64   `json:"amount_paid"`
			Version    int     `json:"version"`
		} `json:"order"`
	}
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		t.Fatal(err)
	}
	if status != 200 || a.Result != "processed" || a.Order == nil || a.Order.OrderID != "ord-sync" || a.Order.Status != "paid" ||
		a.Order.Amount == nil || *a.Order.Amount != 4200 || a.Order.Currency == nil || *a.Order.Currency != "JPY" ||
		a.Order.AmountPaid != 4200 || a.Order.Version == 0 {
		t.Fatalf("sync: %d %s; want processed with order ord-sync paid 4200 JPY", status, raw)
	}
	if status, res, err := e.webhook(s.base, fakestripe.PaymentIntentSucceeded(p)); err != nil || status != 200 || res != "duplicate" {
		t.Errorf("the webhook after the sync: %d %q %v, want 200 duplicate", status, res, err)
	}
	if _, err := e.st.Orders().DeriveOrders(context.Background(), store.OrderDeriver{
		Links: map[string][]string{"stripe": {"data", "object", "metadata", "order_id"}}, Destination: "default"}); err != nil {
		t.Fatal(err)
	}
	status, _, raw = adminPost(t, s.admin+"/admin/api/v1/payments/stripe/pi_ord_sync/sync", nil)
	if status != 200 || !strings.Contains(raw, `"order":{"order_id":"ord-sync","status":"paid"`) ||
		!strings.Contains(raw, fmt.Sprintf(`"version":%d}`, a.Order.Version)) {
		t.Errorf("a second sync: %d %s; want the order paid at version %d", status, raw, a.Order.Version)
	}
	if n := testkit.Count(t, e.st.Pool(), `SELECT count(*) FROM forward_messages WHERE type = 'order.paid'`); n != 1 {
		t.Errorf("%d order.paid messages; want 1", n)
	}
	// A payment naming no order: no "order" in the answer.
	e.api.PutPaymentIntent(fakestripe.PaymentIntent(fakestripe.Payment{ID: "pi_no_order", Amount: 900, Currency: "jpy",
		Created: time.Now(), Metadata: map[string]string{}}, "succeeded"))
	if status, _, raw := adminPost(t, s.admin+"/admin/api/v1/payments/stripe/pi_no_order/sync", nil); status != 200 ||
		strings.Contains(raw, `"order"`) {
		t.Errorf("a payment naming no order: %d %s; want no order", status, raw)
	}
}

func TestSyncAnswersWhatTheProviderSaysAndRefusesWhatItCannotSync(t *testing.T) {
	t.Parallel()
	e := setupSync(t)
	s := startServe(t, e.env, serveOptions{admin: true})
	e.api.PutPaymentIntent(fakestripe.PaymentIntent(fakestripe.Payment{ID: "pi_processing", Amount: 900, Currency: "jpy", Created: time.Now()}, "processing"))
	e.succeeded("pi_refused_key", 900)
	api := s.admin + "/admin/api/v1/payments/"
	for _, tc := range []struct {
		name, url string
		status    int
		want      string // in the body
	}{
		{"not final", api + "stripe/pi_processing/sync", 200, `"result":"not_final","source":"stripe","transaction_id":"pi_processing","provider_status":"processing","payment":null`},
		{"unknown to Stripe", api + "stripe/pi_nobody/sync", 404, `pi_nobody`},
		{"refused key", api + "stripebad/pi_refused_key/sync", 502, `provider-failed`},
		{"unknown source", api + "nosuch/pi_1/sync", 404, `no source \"nosuch\"`},
		{"no status API", api + "adyen/8815000000000001/sync", 422, `has no status API`},
		{"no confirm", api + "stripe/confirm", 422, `takes no confirmed answer`},
	} {
		status, _, raw := adminPost(t, tc.url, nil)
		if status != tc.status || !strings.Contains(raw, tc.want) {
			t.Errorf("%s: %d %s, want %d with %s", tc.name, status, raw, tc.status, tc.want)
		}
	}
	if c := testkit.Count(t, e.st.Pool(), `SELECT count(*) FROM payments`); c != 0 {
		t.Errorf("%d payments written, want none", c)
	}
	// Without the token: 401, nothing asked of Stripe.
	before := e.api.Requests()
	if status, _, _ := post(api+"stripe/pi_processing/sync", nil, http.Header{}); status != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", status)
	}
	if e.api.Requests() != before {
		t.Error("a sync without the token asked Stripe")
	}
}

func TestConfirmRecordsAdyensAnswerOnceAndTheWebhookIsItsDuplicate(t *testing.T) {
	t.Parallel()
	e := setupSync(t)
	s := startServe(t, e.env, serveOptions{admin: true})
	url := s.admin + "/admin/api/v1/payments/adyen/confirm"
	answer := `{"pspReference":"8815000000000001","resultCode":"Authorised","amount":{"value":1000,"currency":"EUR"},"merchantReference":"order-1","merchantAccount":"PaylockECOM"}`
	status, a, raw := adminPost(t, url, []byte(answer))
	if status != 200 || a.Result != "processed" || a.TransactionID != "8815000000000001" || a.ProviderStatus != "Authorised" ||
		a.Payment == nil || a.Payment.Status != "succeeded" || a.Payment.Amount != 1000 {
		t.Fatalf("confirm: %d %s; want processed, succeeded 1000", status, raw)
	}
	var origin string
	if err := e.st.Pool().QueryRow(t.Context(), `SELECT payload->'additionalData'->>'paylockOrigin' FROM payments WHERE transaction_id = '8815000000000001'`).Scan(&origin); err != nil || origin != "confirm" {
		t.Errorf("the stored payment's additionalData.paylockOrigin: %q %v, want confirm", origin, err)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	status, body, err := post(s.base+"/webhooks/adyen", adyenSigned(t, adyenKey, "8815000000000001"), h)
	if err != nil || status != 200 {
		t.Fatalf("the webhook: %d %s %v", status, body, err)
	}
	if status, a, raw := adminPost(t, url, []byte(answer)); status != 200 || a.Result != "duplicate" {
		t.Errorf("the same answer again: %d %s, want duplicate", status, raw)
	}
	if f := e.forwards(t, "8815000000000001"); f != 1 {
		t.Errorf("%d forward jobs, want 1", f)
	}
	pending := `{"pspReference":"8815000000000002","resultCode":"Pending","amount":{"value":1000,"currency":"EUR"},"merchantReference":"order-2"}`
	if status, a, raw := adminPost(t, url, []byte(pending)); status != 200 || a.Result != "not_final" || a.Payment != nil {
		t.Errorf("Pending: %d %s, want not_final and no payment", status, raw)
	}

	for _, tc := range []struct{ name, body, field string }{
		{"not JSON", `{"pspReference":`, ""},
		{"no pspReference", `{"resultCode":"Authorised","amount":{"value":1000,"currency":"EUR"},"merchantReference":"o"}`, "pspReference"},
		{"unknown resultCode", `{"pspReference":"p3","resultCode":"Paid","amount":{"value":1000,"currency":"EUR"},"merchantReference":"o"}`, "resultCode"},
		{"no amount", `{"pspReference":"p3","resultCode":"Authorised","merchantReference":"o"}`, "amount"},
		{"amount zero", `{"pspReference":"p3","resultCode":"Authorised","amount":{"value":0,"currency":"EUR"},"merchantReference":"o"}`, "amount.value"},
		{"amount a string", `{"pspReference":"p3","resultCode":"Authorised","amount":{"value":"10","currency":"EUR"},"merchantReference":"o"}`, "amount.value"},
		{"lower-case currency", `{"pspReference":"p3","resultCode":"Authorised","amount":{"value":10,"currency":"eur"},"merchantReference":"o"}`, "amount.currency"},
		{"no merchantReference", `{"pspReference":"p3","resultCode":"Authorised","amount":{"value":10,"currency":"EUR"}}`, "merchantReference"},
		{"merchantAccount a number", `{"pspReference":"p3","resultCode":"Authorised","amount":{"value":10,"currency":"EUR"},"merchantReference":"o","merchantAccount":7}`, "merchantAccount"},
	} {
		status, _, raw := adminPost(t, url, []byte(tc.body))
		if status != 400 || !strings.Contains(raw, `"field":"`+tc.field+`"`) && tc.field != "" {
			t.Errorf("%s: %d %s, want 400 naming %q", tc.name, status, raw, tc.field)
		}
	}
	if c := testkit.Count(t, e.st.Pool(), `SELECT count(*) FROM payments WHERE transaction_id <> '8815000000000001'`); c != 0 {
		t.Errorf("%d other payments written, want none", c)
	}
}

// TestJanitorSyncsAPaymentStuckAuthorizedOnTheRiverLeader: a payment
// authorized two hours ago, which Stripe says succeeded since, is synced
// by serve's janitor (PAYLOCK_SYNC_PENDING_AFTER=1h) on its first run; one
// authorized a minute ago is left alone.
func TestJanitorSyncsAPaymentStuckAuthorizedOnTheRiverLeader(t *testing.T) {
	t.Parallel()
	e := setupSync(t)
	ctx := t.Context()
	for _, pi := range []string{"pi_stuck", "pi_recent"} {
		if _, err := e.st.Payments().RecordEvent(ctx, store.PaymentEvent{Source: "stripe", TransactionID: pi, EventID: "evt_auth_" + pi,
			Kind: "authorized", Amount: 3000, Currency: "JPY", Payload: []byte(`{}`)}, nil); err != nil {
			t.Fatal(err)
		}
		e.succeeded(pi, 3000)
	}
	if _, err := e.st.Pool().Exec(ctx, `UPDATE payments SET received_at = now() - interval '2 hours', updated_at = now() - interval '2 hours' WHERE transaction_id = 'pi_stuck'`); err != nil {
		t.Fatal(err)
	}
	e.env["PAYLOCK_SYNC_PENDING_AFTER"] = "1h"
	e.env["PAYLOCK_SYNC_RATE"] = "2"
	startServe(t, e.env, serveOptions{})
	status := func(pi string) string {
		var s string
		if err := e.st.Pool().QueryRow(ctx, `SELECT status FROM payments WHERE transaction_id = $1`, pi).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	testkit.WaitFor(t, 30*time.Second, "the janitor's first run", func() bool {
		return testkit.Count(t, e.st.Pool(), `SELECT count(*) FROM river_job WHERE kind = 'sync_unsettled_payments' AND state = 'completed'`) > 0
	})
	if s := status("pi_stuck"); s != "succeeded" {
		t.Errorf("pi_stuck: %s, want succeeded (synced)", s)
	}
	if s := status("pi_recent"); s != "authorized" {
		t.Errorf("pi_recent: %s, want authorized (changed within PAYLOCK_SYNC_PENDING_AFTER)", s)
	}
	if f := e.forwards(t, "pi_stuck"); f < 1 {
		t.Errorf("pi_stuck: %d forward jobs, want its payment.recorded", f)
	}
}

// TestACanceledPaymentIntentSyncedThenNotifiedChangesItsPaymentOnce: the
// sync's event (sync:<pi>:canceled) and the webhook's (evt_...) are two
// events of the payment, which fold to one state change: one message.
func TestACanceledPaymentIntentSyncedThenNotifiedChangesItsPaymentOnce(t *testing.T) {
	t.Parallel()
	e := setupSync(t)
	s := startServe(t, e.env, serveOptions{admin: true})
	p := fakestripe.Payment{ID: "pi_void", Amount: 2500, Currency: "jpy", Created: time.Now()}
	pi := fakestripe.PaymentIntent(p, "canceled")
	e.api.PutPaymentIntent(pi)
	status, a, raw := adminPost(t, s.admin+"/admin/api/v1/payments/stripe/pi_void/sync", nil)
	if status != 200 || a.Result != "processed" || a.Payment == nil || a.Payment.Status != "canceled" {
		t.Fatalf("sync: %d %s; want processed, canceled", status, raw)
	}
	webhook, err := json.Marshal(map[string]any{"id": "evt_void", "object": "event", "type": "payment_intent.canceled",
		"created": time.Now().Unix(), "livemode": false, "data": map[string]any{"object": json.RawMessage(pi)}})
	if err != nil {
		t.Fatal(err)
	}
	if status, res, err := e.webhook(s.base, webhook); err != nil || status != 200 {
		t.Fatalf("the webhook: %d %q %v", status, res, err)
	}
	status, a, raw = adminPost(t, s.admin+"/admin/api/v1/payments/stripe/pi_void/sync", nil)
	if status != 200 || a.Result != "duplicate" || a.Payment == nil || a.Payment.Status != "canceled" || len(a.Payment.Events) != 2 {
		t.Errorf("a second sync: %d %s; want duplicate, canceled, the sync's and the webhook's events", status, raw)
	}
	if f := e.forwards(t, "pi_void"); f != 1 {
		t.Errorf("pi_void: %d forward jobs, want 1 (payment.canceled once)", f)
	}
}

// TestReconcilePaymentsTakesTheSourcesAPIKeyAndURL: a source with
// api_key_env and api_url is reconciled with that key at that URL, without
// STRIPE_API_KEY or PAYLOCK_STRIPE_API_URL; an empty api_key_env variable
// is refused, naming it.
func TestReconcilePaymentsTakesTheSourcesAPIKeyAndURL(t *testing.T) {
	t.Parallel()
	e := setupStripeReconcile(t)
	e.payment(t, "pi_missing", 4200, 0, time.Now().Add(-time.Hour))
	srv := httptest.NewServer(e.api)
	t.Cleanup(srv.Close)
	file := `
sources:
  stripe:
    adapter: stripe
    signature: stripe
    secrets_env: STRIPE_WEBHOOK_SECRETS
    events: [payment_intent.succeeded]
    api_key_env: STRIPE_SHOP_KEY
    api_url: ` + srv.URL + `
`
	if err := os.WriteFile(e.env["PAYLOCK_SOURCES_FILE"], []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	delete(e.env, "STRIPE_API_KEY")
	e.env["PAYLOCK_STRIPE_API_URL"] = "http://127.0.0.1:1" // not this one
	e.env["STRIPE_SHOP_KEY"] = ""
	if code, _, errOut := e.run(t); code != 2 || !strings.Contains(errOut, "STRIPE_SHOP_KEY (api_key_env) is empty") {
		t.Errorf("an empty api_key_env variable: exit %d, want 2 naming it\n%s", code, errOut)
	}
	e.env["STRIPE_SHOP_KEY"] = stripeKey
	if code, out, _ := e.run(t); code != 1 || !strings.Contains(out, "recorded_now  pi_missing") {
		t.Errorf("with the source's key and URL: exit %d, want 1 recording pi_missing\n%s", code, out)
	}
}

// TestJanitorFindsTheLostPaymentOfAnOrderStillAwaiting: an order
// registered two hours ago whose PaymentIntent succeeded at Stripe, but
// whose webhook was lost and whose checkout never synced, is looked for by
// its metadata (Stripe's search) on the janitor's first run, its payment
// recorded and the order paid, with one order.paid message; an order
// registered a minute ago is not looked for yet.
func TestJanitorFindsTheLostPaymentOfAnOrderStillAwaiting(t *testing.T) {
	t.Parallel()
	e := setupSync(t)
	ctx := t.Context()
	for _, id := range []string{"ord-lost", "ord-recent"} {
		if _, _, err := e.st.Orders().RegisterOrder(ctx, store.OrderRegistration{OrderID: id, Amount: 5100, Currency: "JPY"}); err != nil {
			t.Fatal(err)
		}
		e.api.PutPaymentIntent(fakestripe.PaymentIntent(fakestripe.Payment{ID: "pi_" + id, Amount: 5100, Currency: "jpy",
			Created: time.Now(), Metadata: map[string]string{"order_id": id}}, "succeeded"))
	}
	if _, err := e.st.Pool().Exec(ctx, `UPDATE orders SET created_at = now() - interval '2 hours' WHERE order_id = 'ord-lost'`); err != nil {
		t.Fatal(err)
	}
	e.env["PAYLOCK_SYNC_PENDING_AFTER"] = "1h"
	e.env["PAYLOCK_SYNC_RATE"] = "5"
	e.env["PAYLOCK_ORDERS_INTERVAL"] = "200ms"
	e.env["PAYLOCK_FORWARD_URL"] = "https://orders.internal/paylock"
	startServe(t, e.env, serveOptions{})
	status := func(id string) string {
		o, err := e.st.Orders().GetOrder(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return string(o.Status)
	}
	testkit.WaitFor(t, 30*time.Second, "the lost order paid", func() bool { return status("ord-lost") == "paid" })
	testkit.WaitFor(t, 10*time.Second, "the janitor's first run", func() bool {
		return testkit.Count(t, e.st.Pool(), `SELECT count(*) FROM river_job WHERE kind = 'sync_unsettled_payments' AND state = 'completed'`) > 0
	})
	if n := testkit.Count(t, e.st.Pool(), `SELECT count(*) FROM payments WHERE transaction_id = 'pi_ord-recent'`); n != 0 || status("ord-recent") != "awaiting" {
		t.Errorf("ord-recent: %d payments, %s; want none looked for yet (registered within PAYLOCK_SYNC_PENDING_AFTER)", n, status("ord-recent"))
	}
	if n := testkit.Count(t, e.st.Pool(), `SELECT count(*) FROM forward_messages WHERE type = 'order.paid'`); n != 1 {
		t.Errorf("%d order.paid messages; want 1", n)
	}
}
