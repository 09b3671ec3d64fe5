package compat

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// stripeReplicas starts n paylock replicas sharing one schema and one Redis,
// each serving a "stripe" source verified with the compat secrets.
func stripeReplicas(t *testing.T, n int) ([]string, *store.Store) {
	t.Helper()
	v, _ := stripeVerifier(t)
	reps := paylocktest.StartReplicas(t, n, paylocktest.Options{Config: handler.Config{
		Sources: []handler.Source{{Name: "stripe", Provider: "stripe", Verifier: v}},
	}})
	urls := make([]string, n)
	for i, r := range reps {
		urls[i] = r.URL
	}
	return urls, reps[0].Store
}

// stripeGoEvent builds an Event the way stripe-go models it, around a
// PaymentIntent or a Customer marshalled from stripe-go's own types (with
// every null and nested object those types produce).
func stripeGoEvent(t *testing.T, id string, typ stripe.EventType, object any) []byte {
	t.Helper()
	raw, err := json.Marshal(object)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(stripe.Event{
		ID: id, Object: "event", APIVersion: stripe.APIVersion, Type: typ, Livemode: false,
		Created: time.Now().Unix(), Data: &stripe.EventData{Raw: raw},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// deliverSigned sends body to url signed by stripe-go's own test signer.
func deliverSigned(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: stripeCur, Timestamp: time.Now()})
	req, err := http.NewRequest(http.MethodPost, url+"/webhooks/stripe", strings.NewReader(string(p.Payload)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(signature.HeaderStripeSignature, p.Header)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestStripePaymentIntentSignedByStripeGoIsRecordedOnceAcrossThreeReplicas(t *testing.T) {
	t.Parallel()
	urls, st := stripeReplicas(t, 3)
	body := stripeGoEvent(t, "evt_storm_1", stripe.EventTypePaymentIntentSucceeded, &stripe.PaymentIntent{
		ID: "pi_storm_1", Object: "payment_intent", Amount: 2000, AmountReceived: 2000,
		Currency: stripe.CurrencyJPY, Status: stripe.PaymentIntentStatusSucceeded,
	})

	const deliveries = 60
	results := make(chan string, deliveries)
	var wg sync.WaitGroup
	for i := range deliveries {
		wg.Go(func() {
			// A PSP retries what was not answered 2xx: so does this sender.
			for attempt := 0; ; attempt++ {
				code, ans := deliverSigned(t, urls[i%len(urls)], body)
				if code == http.StatusOK {
					var a struct {
						Result        string `json:"result"`
						TransactionID string `json:"transaction_id"`
					}
					json.Unmarshal([]byte(ans), &a)
					if a.TransactionID != "pi_storm_1" {
						t.Errorf("answer names %q", ans)
					}
					results <- a.Result
					return
				}
				if code != http.StatusConflict && code != http.StatusServiceUnavailable || attempt > 50 {
					t.Errorf("delivery %d: %d %s", i, code, ans)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	close(results)
	count := map[string]int{}
	for r := range results {
		count[r]++
	}
	if count["processed"] != 1 || count["duplicate"] != deliveries-1 {
		t.Fatalf("answers %v, want 1 processed and %d duplicates", count, deliveries-1)
	}
	p, err := st.Payments().Payment(context.Background(), "stripe", "pi_storm_1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Amount != 2000 || p.Currency != "JPY" || p.EventID != "evt_storm_1" || p.Source != "stripe" {
		t.Fatalf("recorded %+v", p)
	}
}

func TestStripeEventOfAnotherTypeIsAcknowledgedAndWritesNothing(t *testing.T) {
	t.Parallel()
	urls, st := stripeReplicas(t, 1)
	body := stripeGoEvent(t, "evt_customer_1", stripe.EventTypeCustomerCreated, &stripe.Customer{ID: "cus_1", Email: "a@example.com"})
	code, ans := deliverSigned(t, urls[0], body)
	if code != http.StatusOK || !strings.Contains(ans, `"result":"ignored"`) {
		t.Fatalf("customer.created: %d %s, want 200 ignored", code, ans)
	}
	// Nothing was written: not even under the customer's id.
	if _, err := st.Payments().Payment(context.Background(), "stripe", "cus_1"); err == nil {
		t.Fatal("an ignored event was recorded")
	}
}
