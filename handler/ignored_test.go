package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/store"
)

// stripeOfType is a signed Stripe Event of type typ about the Charge ch.
func stripeOfType(typ, ch string) []byte {
	return []byte(fmt.Sprintf(`{"id":"evt_%s_%s","object":"event","api_version":"2025-08-27.basil","created":1764500000,`+
		`"type":%q,"livemode":false,"data":{"object":{"id":%q,"object":"charge","amount":1500,"amount_refunded":1500,`+
		`"currency":"jpy","payment_intent":null,"status":"succeeded"}}}`, typ, ch, typ, ch))
}

func TestIgnoredDeliveriesNameTheirTypeInTheAnswerTheLogTheDeliveryLogAndTheMetric(t *testing.T) {
	t.Parallel()
	var logs testkit.LogBuffer
	reg := prometheus.NewRegistry()
	cfg := handler.Config{Logger: logs.Logger(), Metrics: handler.NewMetrics(reg, 5*time.Second)}
	r, secret := stripeLogged(t, "", `["payment_intent.succeeded"]`, cfg, nil)
	sent := map[string]string{ // event type -> its metric label
		"charge.refunded":        "charge.refunded",
		"charge.dispute.created": "charge.dispute.created",
		"customer.created":       "other", // a type the adapter does not know: a bounded label
	}
	for typ := range sent {
		a := sendStripe(t, r.URL, &secret, stripeOfType(typ, "ch_ign"))
		if a.status != http.StatusOK || a.str("result") != "ignored" || a.str("type") != typ {
			t.Errorf("%s: %d %s; want 200 ignored naming the type", typ, a.status, a.raw)
		}
	}
	sendStripe(t, r.URL, &secret, stripeOfType("charge.refunded", "ch_ign2"))

	logged := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		if line["outcome"] == "ignored" {
			typ, _ := line["event_type"].(string)
			logged[typ] = true
		}
	}
	kept, err := r.Store.Deliveries().Deliveries(context.Background(), store.DeliveryFilter{Source: "stripe"})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, d := range kept {
		rows[d.EventType] = d.Outcome == store.DeliveryIgnored
	}
	for typ, label := range sent {
		if !logged[typ] {
			t.Errorf("no ignored log line names %s:\n%s", typ, logs.String())
		}
		if !rows[typ] {
			t.Errorf("no ignored delivery-log row names %s: %+v", typ, kept)
		}
		want := 1.0
		if typ == "charge.refunded" {
			want = 2
		}
		if got := ignoredCount(t, reg, "stripe", label); got != want {
			t.Errorf("paylock_deliveries_ignored_total{source=stripe,type=%s} = %v, want %v", label, got, want)
		}
	}
	if n := seriesCount(t, reg, "paylock_deliveries_ignored_total"); n != len(sent) {
		t.Errorf("%d ignored series, want %d: one per known type sent and other", n, len(sent))
	}
}

// ignoredCount is paylock_deliveries_ignored_total{source,type}.
func ignoredCount(t *testing.T, reg *prometheus.Registry, source, typ string) float64 {
	t.Helper()
	for _, s := range testkit.Gathered(t, reg) {
		if s.Name == "paylock_deliveries_ignored_total" && s.Labels["source"] == source && s.Labels["type"] == typ {
			return s.Value
		}
	}
	return 0
}
