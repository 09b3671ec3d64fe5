package handler_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func verifier(t *testing.T, scheme signature.Scheme, csv string) (*signature.Verifier, []signature.Secret) {
	t.Helper()
	secrets, err := signature.ParseSecrets(scheme, csv)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(scheme, secrets, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return v, secrets
}

func signedPost(t *testing.T, base string, h http.Header, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/payments", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	return do(t, req)
}

func TestUnsignedOrBadlySignedDeliveriesAre401AndTouchNothing(t *testing.T) {
	t.Parallel()
	v, secrets := verifier(t, signature.SchemeStandard, testSecret)
	r := startReplica(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{handler.PaymentsSource(v)}}})
	body := payJSON("tx-sig", 100, "JPY")
	good := signature.Sign(signature.SchemeStandard, secrets[0], "msg_1", time.Now(), body)
	wrongSecrets, _ := signature.ParseSecrets(signature.SchemeStandard, "whsec_c2VjcmV0LXRoYXQtaXMtbm90LW91cnMtMzJieXRlcw==")

	cases := []struct {
		name string
		h    http.Header
		body []byte
	}{
		{"unsigned", http.Header{}, body},
		{"wrong secret", signature.Sign(signature.SchemeStandard, wrongSecrets[0], "msg_1", time.Now(), body), body},
		{"tampered body", good, payJSON("tx-sig", 100000, "JPY")},
		{"too old", signature.Sign(signature.SchemeStandard, secrets[0], "msg_1", time.Now().Add(-time.Hour), body), body},
		{"malformed header", http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {"x"}, "Webhook-Signature": {"v1,???"}}, body},
		{"bad input but unsigned", http.Header{}, []byte(`{`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := signedPost(t, r.URL, c.h, c.body)
			wantProblem(t, a, http.StatusUnauthorized)
			if a.str("detail") != "the webhook signature could not be verified" {
				t.Fatalf("detail %q reveals more than it should", a.str("detail"))
			}
		})
	}
	if n := testkit.PaymentRows(t, r.Store.Pool(), ""); n != 0 {
		t.Fatalf("rows = %d", n)
	}
	if keys, _ := r.Redis.Keys(context.Background(), r.Config.LockPrefix+"*").Result(); len(keys) != 0 {
		t.Fatalf("lock keys %v", keys)
	}
	a := signedPost(t, r.URL, good, body)
	if a.status != 200 || a.str("result") != "processed" {
		t.Fatalf("signed delivery: %d %s", a.status, a.raw)
	}
	p, err := r.Store.Payments().Payment(context.Background(), "payments", "tx-sig")
	if err != nil || p.EventID != "msg_1" {
		t.Fatalf("stored %+v, %v; want event_id msg_1", p, err)
	}
}

func TestStripeSignedDeliveryStoresTheEventID(t *testing.T) {
	t.Parallel()
	const secret = "whsec_stripe_test_secret"
	v, secrets := verifier(t, signature.SchemeStripe, "whsec_old_secret,"+secret)
	r := startReplica(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{handler.PaymentsSource(v)}}})
	body := []byte(`{"id":"evt_123","transaction_id":"tx-stripe","amount":100,"currency":"USD"}`)
	a := signedPost(t, r.URL, signature.Sign(signature.SchemeStripe, secrets[1], "", time.Now(), body), body)
	if a.status != 200 || a.str("result") != "processed" {
		t.Fatalf("%d %s", a.status, a.raw)
	}
	p, err := r.Store.Payments().Payment(context.Background(), "payments", "tx-stripe")
	if err != nil || p.EventID != "evt_123" {
		t.Fatalf("stored %+v, %v; want event_id evt_123", p, err)
	}
}

// TestSignedStormAcrossReplicasRecordsEachPaymentOnce: a PSP that signs
// every delivery (each retry with a fresh timestamp, same webhook-id) over
// three replicas, with the secret mid-rotation.
func TestSignedStormAcrossReplicasRecordsEachPaymentOnce(t *testing.T) {
	t.Parallel()
	v, secrets := verifier(t, signature.SchemeStandard, "whsec_c2VjcmV0LXRoYXQtaXMtbm90LW91cnMtMzJieXRlcw==,"+testSecret)
	reps := startReplicas(t, 3, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{handler.PaymentsSource(v)}}})
	const txs, deliveries = 20, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	processed := 0
	sem := make(chan struct{}, 48)
	for i := range txs * deliveries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tx := fmt.Sprintf("tx-signed-%d", i%txs)
			body := payJSON(tx, 100, "JPY")
			for attempt := 0; attempt < 100; attempt++ {
				h := signature.Sign(signature.SchemeStandard, secrets[1], "msg_"+tx, time.Now(), body)
				a := signedPost(t, reps[i%3].URL, h, body)
				if a.status == 200 {
					mu.Lock()
					if a.str("result") == "processed" {
						processed++
					}
					mu.Unlock()
					return
				}
				if a.status != 409 && a.status != 503 {
					t.Errorf("%s: %d %s", tx, a.status, a.raw)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Errorf("%s never acknowledged", tx)
		}()
	}
	wg.Wait()
	if processed != txs {
		t.Fatalf("processed = %d, want %d", processed, txs)
	}
	if n := testkit.PaymentRows(t, reps[0].Store.Pool(), ""); n != txs {
		t.Fatalf("rows = %d, want %d", n, txs)
	}
}
