package handler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// chargeEvent is a charge.succeeded Event of a Charge made without a
// PaymentIntent.
func chargeEvent(ch string, amount int) []byte {
	return []byte(fmt.Sprintf(`{"id":"evt_%s","object":"event","api_version":"2025-08-27.basil","created":1764500000,`+
		`"type":"charge.succeeded","livemode":false,"data":{"object":{"id":"%s","object":"charge","amount":%d,`+
		`"currency":"jpy","payment_intent":null,"status":"succeeded"}}}`, ch, ch, amount))
}

// stripeLogged is a replica with one Stripe-signed source "stripe"
// recording the events named, keeping its deliveries in the delivery log
// (wrapped by wrap when set), on dsn ("" a fresh schema); and the secret.
func stripeLogged(t *testing.T, dsn string, events string, cfg handler.Config, wrap func(handler.DeliveryLog) handler.DeliveryLog) (*paylocktest.Replica, signature.Secret) {
	t.Helper()
	v, secrets := verifier(t, signature.SchemeStripe, testSecret)
	cfg.Sources = []handler.Source{{Name: "stripe", Provider: "stripe", Verifier: v,
		Settings: provider.Settings{"events": []byte(events)}}}
	r := startReplica(t, paylocktest.Options{DSN: dsn, Config: cfg, Configure: func(c *handler.Config, st *store.Store) {
		c.Deliveries = st.Deliveries()
		if wrap != nil {
			c.Deliveries = wrap(c.Deliveries)
		}
	}})
	return r, secrets[0]
}

// sendStripe posts body to the stripe source, signed with secret (nil:
// unsigned).
func sendStripe(t *testing.T, base string, secret *signature.Secret, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if secret != nil {
		for k, vs := range signature.Sign(signature.SchemeStripe, *secret, "", time.Now(), body) {
			req.Header[k] = vs
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	return do(t, req)
}

func TestVerifiedDeliveriesThatRecordNothingAreKeptAndReplayedOnceTheSourceIsWidened(t *testing.T) {
	t.Parallel()
	r, secret := stripeLogged(t, "", `["payment_intent.succeeded"]`, handler.Config{}, nil)
	ctx := context.Background()
	for _, body := range [][]byte{chargeEvent("ch_1", 1500), chargeEvent("ch_2", 2500), chargeEvent("ch_1", 1500)} {
		if a := sendStripe(t, r.URL, &secret, body); a.status != http.StatusOK || a.str("result") != "ignored" {
			t.Fatalf("a charge.succeeded: %d %s; want 200 ignored", a.status, a.raw)
		}
	}
	refused := stripeEvent("pi_str", `"2000"`)
	a := sendStripe(t, r.URL, &secret, refused)
	wantProblem(t, a, a.status)
	if a.status < 400 || a.status >= 500 {
		t.Fatalf("a string amount: %d %s; want a 4xx refusal", a.status, a.raw)
	}
	if a := sendStripe(t, r.URL, &secret, stripeEvent("pi_ok", "3000")); a.status != http.StatusOK || a.str("result") != "processed" {
		t.Fatalf("a payment: %d %s", a.status, a.raw)
	}
	for i := range 30 {
		if a := sendStripe(t, r.URL, nil, chargeEvent(fmt.Sprint("ch_flood_", i), 1)); a.status != http.StatusUnauthorized {
			t.Fatalf("an unsigned delivery: %d %s", a.status, a.raw)
		}
	}

	log := r.Store.Deliveries()
	kept, err := log.Deliveries(ctx, store.DeliveryFilter{Source: "stripe"})
	if err != nil {
		t.Fatal(err)
	}
	byEvent := map[string]store.Delivery{}
	for i, d := range kept {
		if d.Body != nil || d.BodyBytes == 0 {
			t.Errorf("a listing carries the body of delivery %d (%d bytes, %d said); want only its size", d.ID, len(d.Body), d.BodyBytes)
		}
		if kept[i], err = log.Delivery(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		byEvent[d.EventID] = kept[i]
	}
	if len(kept) != 3 {
		t.Fatalf("%d kept deliveries (%v); want the two charges and the refused one, nothing unsigned, nothing recorded", len(kept), byEvent)
	}
	ch1, str := byEvent["evt_ch_1"], byEvent["evt_pi_str"]
	if ch1.Outcome != store.DeliveryIgnored || ch1.Seen != 2 || ch1.Status != 200 || !bytes.Equal(ch1.Body, chargeEvent("ch_1", 1500)) {
		t.Errorf("ch_1 kept as %+v; want ignored, seen twice, with its body", ch1)
	}
	if str.Outcome != store.DeliveryRefused || str.Status != a.status || str.ProblemType == "" || str.ProblemDetail == "" {
		t.Errorf("the string amount kept as %+v; want refused with its problem", str)
	}
	for _, d := range kept {
		if _, ok := d.Headers["Stripe-Signature"]; ok || d.Headers["User-Agent"] == nil {
			t.Errorf("delivery %d kept headers %v; want the User-Agent and never the signature", d.ID, d.Headers)
		}
	}

	// The source widened: a replica of the new configuration replays them.
	wide, _ := stripeLogged(t, r.DSN, `["payment_intent.succeeded","charge.succeeded"]`, handler.Config{}, nil)
	for round, want := range []string{"processed", "duplicate"} {
		for _, ev := range []string{"evt_ch_1", "evt_ch_2"} {
			d := byEvent[ev]
			res, err := wide.Handler.Replay(ctx, d.Source, d.Body, d.SignatureID)
			if err != nil || res.Result != want {
				t.Fatalf("replay #%d of %s: %+v, %v; want %s", round+1, ev, res, err, want)
			}
		}
		if _, err := wide.Handler.Replay(ctx, str.Source, str.Body, str.SignatureID); err == nil {
			t.Fatalf("replay #%d of the string amount recorded it", round+1)
		}
	}
	for _, tx := range []string{"ch_1", "ch_2"} {
		if n := testkit.PaymentRows(t, r.Store.Pool(), tx); n != 1 {
			t.Errorf("%d rows of %s, want 1", n, tx)
		}
	}
	if _, err := wide.Handler.Replay(ctx, "nope", str.Body, ""); !errors.Is(err, handler.ErrUnknownSource) {
		t.Errorf("replay to an unknown source: %v", err)
	}
}

// failingLog is a delivery log whose database is down.
type failingLog struct{}

func (failingLog) Keep(context.Context, store.Delivery) (int64, error) {
	return 0, fmt.Errorf("%w: the test's log is down", store.ErrUnavailable)
}

func TestAnIgnoredDeliveryIsAnswered200OnlyOnceKept(t *testing.T) {
	t.Parallel()
	r, secret := stripeLogged(t, "", `["payment_intent.succeeded"]`, handler.Config{}, func(handler.DeliveryLog) handler.DeliveryLog { return failingLog{} })
	a := sendStripe(t, r.URL, &secret, chargeEvent("ch_lost", 100))
	wantProblem(t, a, http.StatusServiceUnavailable)
	wantRetryAfter(t, a)
	// A payment does not touch the log: it is its own record.
	if a := sendStripe(t, r.URL, &secret, stripeEvent("pi_fine", "100")); a.status != http.StatusOK {
		t.Fatalf("a payment with the log down: %d %s", a.status, a.raw)
	}
}

func TestDistinctDeliveriesBeyondTheSourcesCapAreDroppedAndCounted(t *testing.T) {
	t.Parallel()
	dsn, _ := paylocktest.MigratedSchema(t)
	reg := prometheus.NewRegistry()
	v, secrets := verifier(t, signature.SchemeStripe, testSecret)
	r := startReplica(t, paylocktest.Options{DSN: dsn, Store: func(c *store.Config) { c.DeliveryLogCap = 2 },
		Config: handler.Config{Metrics: handler.NewMetrics(reg, 5*time.Second), Sources: []handler.Source{{Name: "stripe",
			Provider: "stripe", Verifier: v, Settings: provider.Settings{"events": []byte(`["payment_intent.succeeded"]`)}}}},
		Configure: func(c *handler.Config, st *store.Store) { c.Deliveries = st.Deliveries() }})
	for i := range 5 {
		if a := sendStripe(t, r.URL, &secrets[0], chargeEvent(fmt.Sprint("ch_cap_", i), 100)); a.status != http.StatusOK {
			t.Fatalf("charge %d: %d %s; want 200 ignored even when not kept", i, a.status, a.raw)
		}
	}
	// Past the cap, the newest ignored delivery of each event type is
	// still kept (one row per type, replaced): so a flood never hides the
	// latest real event of a type.
	admin := testkit.Connect(t, dsn)
	if n := testkit.Count(t, admin, `SELECT count(*) FROM delivery_log`); n != 3 {
		t.Fatalf("%d kept, want the cap of 2 and the newest charge.succeeded", n)
	}
	if n := testkit.Count(t, admin, `SELECT count(*) FROM delivery_log WHERE overflow AND event_id = 'evt_ch_cap_4'`); n != 1 {
		t.Fatalf("the newest charge.succeeded is kept %d times past the cap; want once", n)
	}
	for i := range 2 {
		if a := sendStripe(t, r.URL, &secrets[0], stripeEvent(fmt.Sprint("pi_str_", i), `"100"`)); a.status < 400 || a.status >= 500 {
			t.Fatalf("a refused delivery: %d %s", a.status, a.raw)
		}
	}
	if n := testkit.Count(t, admin, `SELECT count(*) FROM delivery_log`); n != 3 {
		t.Fatalf("%d kept after two refusals past the cap, want still 3", n)
	}
	if got := testkit.Gathered(t, reg).Sum("paylock_delivery_log_dropped_total", `source="stripe"`, `reason="cap"`); got != 2 {
		t.Fatalf("paylock_delivery_log_dropped_total{cap} = %v, want 2", got)
	}
}
