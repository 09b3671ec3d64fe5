package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

const (
	stormStripeSecret = "whsec_lifecycle-storm-secret-0123456789"
	stormAdyenKey     = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	stormPayments     = 40 // per provider
)

// stormDelivery is one provider delivery of the storm.
type stormDelivery struct {
	source string
	body   []byte
}

// stormWant is a payment's final state as the admin API says it.
type stormWant struct {
	source, tx, status string
	amount, refunded   int64
	dispute            string
}

var stormDay = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// stripeLifecycle is payment i's Stripe events: a failure, the success, two
// cumulative refunds, a dispute opened and closed (won for every third).
func stripeLifecycle(i int) ([]stormDelivery, stormWant) {
	pi := fmt.Sprintf("pi_storm_%03d", i)
	amount := int64(1000 + i)
	event := func(id, typ string, hours int, obj string) stormDelivery {
		return stormDelivery{"stripe", fmt.Appendf(nil, `{"id":"evt_%s_%s","object":"event","type":%q,"created":%d,"data":{"object":%s}}`,
			id, pi, typ, stormDay.Add(time.Duration(hours)*time.Hour).Unix(), obj)}
	}
	piObj := func(received int64, status string) string {
		return fmt.Sprintf(`{"id":%q,"object":"payment_intent","amount":%d,"amount_received":%d,"currency":"jpy","status":%q}`,
			pi, amount, received, status)
	}
	charge := func(refunded int64) string {
		return fmt.Sprintf(`{"id":"ch_%s","object":"charge","amount":%d,"amount_refunded":%d,"currency":"jpy","payment_intent":%q}`,
			pi, amount, refunded, pi)
	}
	dispute := func(status string) string {
		return fmt.Sprintf(`{"id":"du_%s","object":"dispute","amount":%d,"currency":"jpy","charge":"ch_%s","payment_intent":%q,"status":%q}`,
			pi, amount, pi, pi, status)
	}
	outcome := "lost"
	if i%3 == 0 {
		outcome = "won"
	}
	return []stormDelivery{
			event("fail", "payment_intent.payment_failed", 0, piObj(0, "requires_payment_method")),
			event("ok", "payment_intent.succeeded", 1, piObj(amount, "succeeded")),
			event("r1", "charge.refunded", 2, charge(300)),
			event("r2", "charge.refunded", 3, charge(500)),
			event("dp", "charge.dispute.created", 24, dispute("needs_response")),
			event("dc", "charge.dispute.closed", 48, dispute(outcome)),
		}, stormWant{source: "stripe", tx: pi, status: "partially_refunded", amount: amount, refunded: 500,
			dispute: outcome}
}

// adyenLifecycle is payment i's Adyen notifications, one item each: the
// authorisation, two refunds, a chargeback notice, the chargeback and, for
// every third payment, its reversal (won).
func adyenLifecycle(t *testing.T, secret signature.Secret, i int) ([]stormDelivery, stormWant) {
	psp := fmt.Sprintf("ADYSTORM%08d", i)
	amount := int64(2000 + i)
	item := func(ref, code string, value int64, hours int) stormDelivery {
		orig := psp
		if ref == psp {
			orig = ""
		}
		body := fmt.Appendf(nil, `{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{},`+
			`"amount":{"currency":"EUR","value":%d},"eventCode":%q,"eventDate":%q,"merchantAccountCode":"PaylockECOM",`+
			`"merchantReference":"order-%d","originalReference":%q,"pspReference":%q,"success":"true"}}]}`,
			value, code, stormDay.Add(time.Duration(hours)*time.Hour).Format(time.RFC3339), i, orig, ref)
		signed, err := signature.SignAdyenNotification(secret, body)
		if err != nil {
			t.Fatal(err)
		}
		return stormDelivery{"adyen", signed}
	}
	ds := []stormDelivery{
		item(psp, "AUTHORISATION", amount, 0),
		item(fmt.Sprintf("RFNDA%011d", i), "REFUND", 300, 1),
		item(fmt.Sprintf("RFNDB%011d", i), "REFUND", 200, 2),
		item(fmt.Sprintf("DSPTN%011d", i), "NOTIFICATION_OF_CHARGEBACK", amount, 24),
		item(fmt.Sprintf("DSPTC%011d", i), "CHARGEBACK", amount, 48),
	}
	outcome := "lost"
	if i%3 == 0 {
		ds = append(ds, item(fmt.Sprintf("DSPTR%011d", i), "CHARGEBACK_REVERSED", amount, 72))
		outcome = "won"
	}
	return ds, stormWant{source: "adyen", tx: psp, status: "partially_refunded", amount: amount, refunded: 500, dispute: outcome}
}

// startForwarding runs the forward worker of st to a receiver that takes
// every message type.
func startForwarding(t *testing.T, st *store.Store) *testkit.Receiver {
	t.Helper()
	rcv := testkit.StartReceiver(t, testkit.ReceiverConfig{OtherEvents: true})
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, testkit.ReceiverSecret)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	fw, err := forward.New(forward.Config{Secret: secrets[0], Destinations: forward.Destinations{forward.DefaultDestination: rcv.URL},
		Timeout: 5 * time.Second, Logger: quiet}, st.Payments())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Close() })
	rcfg := &river.Config{Logger: quiet, FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond}
	if err := fw.AddTo(rcfg); err != nil {
		t.Fatal(err)
	}
	stop, err := st.StartJobs(context.Background(), rcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = stop(ctx)
	})
	return rcv
}

// TestLifecycleStormAcrossThreeReplicas is issue #23's storm: the Stripe
// and Adyen lifecycles of 40 payments each, every event delivered three
// times in a random order to three replicas at once. Every payment ends
// in its state (read through the admin API), every forward has its own
// webhook-id, and each payment is forwarded as payment.recorded once, its
// newest message carrying its final state.
func TestLifecycleStormAcrossThreeReplicas(t *testing.T) {
	t.Parallel()
	dsn, st := paylocktest.MigratedSchema(t)
	adyenSecrets, err := signature.ParseSecrets(signature.SchemeAdyen, stormAdyenKey)
	if err != nil {
		t.Fatal(err)
	}
	// paylock's own forwarding: each replica's store routes every
	// source's messages to the default destination.
	routes := func(_ *handler.Config, own *store.Store) {
		for _, name := range []string{"stripe", "adyen"} {
			own.Outbox().Route(name, store.ToDestination(forward.DefaultDestination))
		}
	}
	reps := startReplicas(t, 3, paylocktest.Options{DSN: dsn, Config: handler.Config{Sources: []handler.Source{
		{Name: "stripe", Provider: "stripe", Verifier: testkit.Verifier(t, signature.SchemeStripe, stormStripeSecret)},
		{Name: "adyen", Provider: "adyen", Verifier: testkit.Verifier(t, signature.SchemeAdyen, stormAdyenKey)},
	}}, Configure: routes})
	rcv := startForwarding(t, st)

	var all []stormDelivery
	var wants []stormWant
	for i := range stormPayments {
		ds, w := stripeLifecycle(i)
		all, wants = append(all, ds...), append(wants, w)
		ds, w = adyenLifecycle(t, adyenSecrets[0], i)
		all, wants = append(all, ds...), append(wants, w)
	}
	storm := append(append(append([]stormDelivery{}, all...), all...), all...)
	r := rand.New(rand.NewPCG(23, 3))
	r.Shuffle(len(storm), func(i, j int) { storm[i], storm[j] = storm[j], storm[i] })
	deliverStorm(t, reps, storm)

	testkit.WaitFor(t, 60*time.Second, "every forward job completed", func() bool {
		return testkit.Count(t, st.Pool(), `SELECT count(*) FROM river_job WHERE kind = 'forward' AND state <> 'completed'`) == 0
	})
	asrv := httptest.NewServer(admin.New(admin.Config{Payments: st.Payments(), Logger: testkit.Logger()}))
	t.Cleanup(asrv.Close)
	checkStorm(t, asrv.URL, rcv, wants)
}

// deliverStorm delivers storm from 12 senders at once, round-robin over
// reps, each delivery retried like a PSP until acknowledged.
func deliverStorm(t *testing.T, reps []*paylocktest.Replica, storm []stormDelivery) {
	t.Helper()
	stripeSecrets, err := signature.ParseSecrets(signature.SchemeStripe, stormStripeSecret)
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				d := storm[i]
				h := http.Header{}
				if strings.HasPrefix(d.source, "stripe") {
					h = signature.Sign(signature.SchemeStripe, stripeSecrets[0], "", time.Now(), d.body)
				}
				deliverOne(t, reps[i%len(reps)].URL+"/webhooks/"+d.source, h, d.body)
			}
		}()
	}
	for i := range storm {
		next <- i
	}
	close(next)
	wg.Wait()
}

// deliverOne posts body until a 2xx, as a PSP retries a 409 or a 503.
func deliverOne(t *testing.T, url string, h http.Header, body []byte) {
	for range 200 {
		a := postRaw(t, url, h, body)
		switch {
		case a.status == http.StatusOK:
			return
		case a.status != http.StatusConflict && a.status != http.StatusServiceUnavailable:
			t.Errorf("%s answered %d: %s", url, a.status, a.raw)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("%s: never acknowledged", url)
}

// stormMessage is what checkStorm reads of a forwarded message.
type stormMessage struct {
	Type string `json:"type"`
	Data struct {
		Source           string  `json:"source"`
		TransactionID    string  `json:"transaction_id"`
		Status           string  `json:"status"`
		AmountAuthorized int64   `json:"amount_authorized"`
		AmountCaptured   int64   `json:"amount_captured"`
		AmountRefunded   int64   `json:"amount_refunded"`
		Dispute          *string `json:"dispute"`
		Version          int     `json:"version"`
	} `json:"data"`
}

// checkStorm checks every payment through the admin API at base against
// the messages rcv received.
func checkStorm(t *testing.T, base string, rcv *testkit.Receiver, wants []stormWant) {
	t.Helper()
	byPayment := map[string][]stormMessage{}
	ids := map[string]bool{}
	for _, a := range rcv.Attempts() {
		id := a.Header.Get(signature.HeaderWebhookID)
		if ids[id] {
			t.Errorf("webhook-id %s delivered twice", id)
		}
		ids[id] = true
		var m stormMessage
		if err := json.Unmarshal(a.Body, &m); err != nil {
			t.Fatal(err)
		}
		k := m.Data.Source + "/" + m.Data.TransactionID
		byPayment[k] = append(byPayment[k], m)
	}
	t.Logf("%d payments, %d forwards received", len(wants), len(ids))
	for _, w := range wants {
		a := do(t, mustRequest(t, base+"/admin/payments/"+w.source+"/"+w.tx))
		dispute, _ := a.body["dispute"].(string)
		if a.status != http.StatusOK || a.str("status") != w.status || int64(a.body["amount"].(float64)) != w.amount ||
			int64(a.body["amount_refunded"].(float64)) != w.refunded || dispute != w.dispute {
			t.Errorf("%s %s: %d %s, want %+v", w.source, w.tx, a.status, a.raw, w)
			continue
		}
		version := int(a.body["version"].(float64))
		msgs := byPayment[w.source+"/"+w.tx]
		recorded, newest := 0, stormMessage{}
		for _, m := range msgs {
			if m.Type == store.ForwardPaymentRecorded {
				recorded++
			}
			if m.Data.Version > newest.Data.Version {
				newest = m
			}
		}
		if recorded != 1 || len(msgs) != version || newest.Data.Version != version || newest.Data.Status != w.status ||
			newest.Data.AmountRefunded != w.refunded || newest.Data.Dispute == nil || *newest.Data.Dispute != w.dispute {
			t.Errorf("%s %s: %d messages (%d payment.recorded) for version %d, the newest %+v", w.source, w.tx,
				len(msgs), recorded, version, newest)
		}
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestAdyenRefundInAnotherCurrencySignedByAdyensLibraryIsRecordedNotApplied delivers the
// refund that Adyen's own Node library signed (signature/testdata/adyen:
// gen-vectors.sh) after its payment: the refund of 7914073381342284, in
// USD where the payment is in EUR, is recorded once, under its
// pspReference, not applied, and put up for review; the payment is not
// refunded.
func TestAdyenRefundInAnotherCurrencySignedByAdyensLibraryIsRecordedNotApplied(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../signature/testdata/adyen/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct{ Name, Key, Body string }
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	keys := map[string]string{}
	for _, v := range file.Vectors {
		bodies[v.Name], keys[v.Name] = v.Body, v.Key
	}
	const payment, refund = "authorisation, second key", "refund with originalReference"
	if bodies[payment] == "" || bodies[refund] == "" || keys[payment] != keys[refund] {
		t.Fatal("the vectors lack the authorisation and the refund signed with the same key")
	}
	r := startReplica(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{
		{Name: "adyen", Provider: "adyen", Verifier: testkit.Verifier(t, signature.SchemeAdyen, keys[refund])}}}})
	for _, name := range []string{refund, payment, refund} {
		if a := postRaw(t, r.URL+"/webhooks/adyen", nil, []byte(bodies[name])); a.status != http.StatusOK || a.raw != "[accepted]" {
			t.Fatalf("%s: %d %s", name, a.status, a.raw)
		}
	}
	st, err := r.Store.Payments().PaymentState(context.Background(), "adyen", "7914073381342284")
	if err != nil {
		t.Fatal(err)
	}
	// Adyen's library signed a refund in USD of a payment in EUR: it is
	// recorded once (never lost), not applied, and a review reason.
	if st.Status != "succeeded" || st.AmountRefunded != 0 || st.Currency != "EUR" || len(st.Events) != 1 ||
		st.Events[0].EventID != "8814073381342286:REFUND" || st.Events[0].RefundID != "8814073381342286" ||
		st.Events[0].Currency != "USD" {
		t.Errorf("payment %+v with events %+v, want the USD refund 8814073381342286 recorded once, not applied", st.State, st.Events)
	}
	items, err := r.Store.Review().ReviewItems(context.Background(), store.ReviewFilter{Kind: store.ReviewLifecycle})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].Details["reason"] != "currency_mismatch" {
		t.Errorf("review items %+v, want the currency mismatch", items)
	}
}
