package cli

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/order"
)

func stripeIntentFor(pi, orderID string) []byte {
	return []byte(`{"id":"evt_` + pi + `","object":"event","created":1764500000,"type":"payment_intent.succeeded","livemode":false,` +
		`"data":{"object":{"id":"` + pi + `","object":"payment_intent","amount":1500,"amount_received":1500,"currency":"jpy",` +
		`"metadata":{"order_id":"` + orderID + `"}}}}`)
}

// TestServeDerivesOrdersFromStripeMetadata: an order registered on the
// admin API, two Stripe PaymentIntents naming it in their metadata, and
// serve's order deriver (on the River leader) makes it double_paid, with
// paylock_orders{status="double_paid"} 1 and a review item.
func TestServeDerivesOrdersFromStripeMetadata(t *testing.T) {
	t.Parallel()
	const token = "admin-token-of-the-orders-test"
	path := filepath.Join(t.TempDir(), "sources.yaml")
	stripeSourceFile(t, path, "[payment_intent.succeeded]")
	dsn, st := paylocktest.MigratedSchema(t)
	env := map[string]string{
		"DATABASE_URL": dsn, "REDIS_URL": testkit.RedisURL(t), "PAYLOCK_LOCK_PREFIX": testkit.Key(t, "") + ":",
		"PAYLOCK_SOURCES_FILE": path, "STRIPE_WEBHOOK_SECRETS": stripeSecret, "PAYLOCK_LOG_LEVEL": "error",
		"PAYLOCK_ADMIN_TOKEN": token, "PAYLOCK_ORDERS_INTERVAL": "200ms",
	}
	s := startServe(t, env, serveOptions{admin: true, metrics: true})
	req, _ := http.NewRequest(http.MethodPost, s.admin+"/admin/api/v1/orders",
		strings.NewReader(`{"order_id":"ord-e2e","amount":1500,"currency":"JPY"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("registering the order: %d, want 201", res.StatusCode)
	}
	for _, pi := range []string{"pi_e2e_1", "pi_e2e_2"} {
		if code := postStripe(t, s.base, stripeIntentFor(pi, "ord-e2e"), false); code != http.StatusOK {
			t.Fatalf("%s: %d, want 200", pi, code)
		}
	}
	testkit.WaitFor(t, 20*time.Second, "ord-e2e double_paid", func() bool {
		o, err := st.Orders().GetOrder(context.Background(), "ord-e2e")
		return err == nil && o.Status == order.DoublePaid
	})
	metricAt(t, s.metrics, `paylock_orders{status="double_paid"}`, 1)
	if status, _, body := adminGet(t, s.admin+"/admin/api/v1/review?kind=order", token, ""); status != http.StatusOK ||
		!strings.Contains(body, "pi_e2e_1") || !strings.Contains(body, "pi_e2e_2") {
		t.Fatalf("review items of kind order: %d %.500s", status, body)
	}
}

// TestOrdersAreOffByDefault: without PAYLOCK_ORDERS_INTERVAL the deriver
// does not run, so the admin API serves no orders (an order registered
// then would never be derived) and no payment is linked.
func TestOrdersAreOffByDefault(t *testing.T) {
	t.Parallel()
	const token = "admin-token-of-the-orders-off-test"
	path := filepath.Join(t.TempDir(), "sources.yaml")
	stripeSourceFile(t, path, "[payment_intent.succeeded]")
	dsn, st := paylocktest.MigratedSchema(t)
	env := map[string]string{
		"DATABASE_URL": dsn, "REDIS_URL": testkit.RedisURL(t), "PAYLOCK_LOCK_PREFIX": testkit.Key(t, "") + ":",
		"PAYLOCK_SOURCES_FILE": path, "STRIPE_WEBHOOK_SECRETS": stripeSecret, "PAYLOCK_LOG_LEVEL": "error",
		"PAYLOCK_ADMIN_TOKEN": token,
	}
	s := startServe(t, env, serveOptions{admin: true, metrics: true})
	if code := postStripe(t, s.base, stripeIntentFor("pi_off_1", "ord-off"), false); code != http.StatusOK {
		t.Fatalf("payment: %d, want 200", code)
	}
	req, _ := http.NewRequest(http.MethodPost, s.admin+"/admin/api/v1/orders",
		strings.NewReader(`{"order_id":"ord-off","amount":1500,"currency":"JPY"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("registering an order with orders off: %d, want 404", res.StatusCode)
	}
	if n := testkit.Count(t, st.Pool(), `SELECT count(*) FROM order_payments`); n != 0 {
		t.Fatalf("%d payments linked with orders off, want 0", n)
	}
}
