package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// moneyCase is one way the recorded state used to differ from the money
// that moved (issue "Right once"): deliveries of one payment, and what its
// state must be once each was delivered three times to three replicas in a
// random order.
type moneyCase struct {
	name        string
	deliveries  []stormDelivery
	source, tx  string
	status      lifecycle.Status
	authorized  int64
	captured    int64
	refunded    int64
	dispute     lifecycle.Dispute
	review      []string // the payment's review reasons (payment_attention)
	contradicts bool     // a delivery is a contradiction: answered 422, a mismatch review item
}

// adyenItem signs one Adyen notification item of merchant account acct.
func adyenMoneyItem(t *testing.T, psp, orig, code, currency, acct string, value int64, hours int) stormDelivery {
	t.Helper()
	secrets, err := signature.ParseSecrets(signature.SchemeAdyen, stormAdyenKey)
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Appendf(nil, `{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{},`+
		`"amount":{"currency":%q,"value":%d},"eventCode":%q,"eventDate":%q,"merchantAccountCode":%q,`+
		`"merchantReference":"order-1","originalReference":%q,"pspReference":%q,"success":"true"}}]}`,
		currency, value, code, stormDay.Add(time.Duration(hours)*time.Hour).Format(time.RFC3339), acct, orig, psp)
	signed, err := signature.SignAdyenNotification(secrets[0], body)
	if err != nil {
		t.Fatal(err)
	}
	return stormDelivery{"adyen", signed}
}

// stripeEvent is a Stripe event of type typ around obj, delivered to source.
func stripeMoneyEvent(source, id, typ string, hours int, obj string) stormDelivery {
	return stormDelivery{source, fmt.Appendf(nil, `{"id":%q,"object":"event","type":%q,"created":%d,"data":{"object":%s}}`,
		id, typ, stormDay.Add(time.Duration(hours)*time.Hour).Unix(), obj)}
}

func moneyCases(t *testing.T) []moneyCase {
	a := func(psp, orig, code, currency string, value int64, hours int) stormDelivery {
		return adyenMoneyItem(t, psp, orig, code, currency, "ShopA", value, hours)
	}
	manual := func(psp, orig, code string, value int64) stormDelivery {
		d := adyenMoneyItem(t, psp, orig, code, "EUR", "ShopA", value, 1)
		d.source = "adyen-manual"
		return d
	}
	pi := `{"id":"pi_money_1","object":"payment_intent","amount":1000,"amount_received":1000,"currency":"jpy","status":"succeeded"}`
	refund := func(status string) string {
		return `{"id":"re_money_1","object":"refund","amount":400,"currency":"jpy","charge":"ch_money_1","payment_intent":"pi_money_1","status":"` + status + `"}`
	}
	return []moneyCase{
		{name: "authorised then voided is canceled", source: "adyen", tx: "AUTHVOID00000001", status: lifecycle.StatusCanceled, authorized: 1000,
			deliveries: []stormDelivery{a("AUTHVOID00000001", "", "AUTHORISATION", "EUR", 1000, 0), a("VOID000000000001", "AUTHVOID00000001", "CANCELLATION", "EUR", 1000, 1)}},
		{name: "cancel-or-refund before capture is a void", source: "adyen", tx: "AUTHVOID00000002", status: lifecycle.StatusCanceled, authorized: 1000,
			deliveries: []stormDelivery{a("AUTHVOID00000002", "", "AUTHORISATION", "EUR", 1000, 0), a("CORF000000000002", "AUTHVOID00000002", "CANCEL_OR_REFUND", "EUR", 1000, 1)}},
		{name: "manual capture: partial captures, one failed", source: "adyen-manual", tx: "MANUAL0000000001", status: lifecycle.StatusSucceeded,
			authorized: 1000, captured: 500, deliveries: []stormDelivery{manual("MANUAL0000000001", "", "AUTHORISATION", 1000),
				manual("CAPT000000000001", "MANUAL0000000001", "CAPTURE", 300), manual("CAPT000000000002", "MANUAL0000000001", "CAPTURE", 500),
				manual("CAPT000000000001", "MANUAL0000000001", "CAPTURE_FAILED", 300)}},
		{name: "manual capture: held, then voided", source: "adyen-manual", tx: "MANUAL0000000002", status: lifecycle.StatusCanceled, authorized: 1000,
			deliveries: []stormDelivery{manual("MANUAL0000000002", "", "AUTHORISATION", 1000), manual("VOID000000000002", "MANUAL0000000002", "CANCELLATION", 1000)}},
		{name: "a Stripe refund that failed after it was reported", source: "stripe", tx: "pi_money_1", status: lifecycle.StatusSucceeded,
			authorized: 1000, captured: 1000, deliveries: []stormDelivery{
				stripeMoneyEvent("stripe", "evt_money_ok", "payment_intent.succeeded", 0, pi),
				stripeMoneyEvent("stripe", "evt_money_rc", "refund.created", 1, refund("pending")),
				stripeMoneyEvent("stripe", "evt_money_rs", "refund.updated", 2, refund("succeeded")),
				stripeMoneyEvent("stripe", "evt_money_rf", "refund.failed", 3, refund("failed"))}},
		{name: "a refund in another currency is recorded, not applied", source: "adyen", tx: "JPYPAYMENT000001", status: lifecycle.StatusSucceeded,
			authorized: 1000, captured: 1000, review: []string{"currency_mismatch"}, deliveries: []stormDelivery{
				a("JPYPAYMENT000001", "", "AUTHORISATION", "JPY", 1000, 0), a("USDREFUND0000001", "JPYPAYMENT000001", "REFUND", "USD", 1000, 1)}},
		{name: "refunds cannot overflow", source: "adyen", tx: "OVERFLOW00000001", status: lifecycle.Refunded, authorized: 1000, captured: 1000,
			refunded: 1000, review: []string{"amount_overflow", "over_refunded"}, deliveries: []stormDelivery{
				a("OVERFLOW00000001", "", "AUTHORISATION", "EUR", 1000, 0),
				a("MAXREFUND0000001", "OVERFLOW00000001", "REFUND", "EUR", 1<<53-1, 1), a("ONEREFUND0000001", "OVERFLOW00000001", "REFUND", "EUR", 1, 2)}},
		{name: "a charge source gets its charge's refunds", source: "stripe-charges", tx: "ch_money_2", status: lifecycle.PartiallyRefunded,
			authorized: 1000, captured: 1000, refunded: 300, deliveries: []stormDelivery{
				stripeMoneyEvent("stripe-charges", "evt_money_ch", "charge.succeeded", 0,
					`{"id":"ch_money_2","object":"charge","amount":1000,"currency":"jpy","payment_intent":"pi_money_2"}`),
				stripeMoneyEvent("stripe-charges", "evt_money_chr", "charge.refunded", 1,
					`{"id":"ch_money_2","object":"charge","amount":1000,"amount_refunded":300,"currency":"jpy","payment_intent":"pi_money_2"}`)}},
		{name: "a refund of another merchant account is recorded, not applied", source: "adyen", tx: "SHOPAPAYMENT0001", status: lifecycle.StatusSucceeded,
			authorized: 1000, captured: 1000, review: []string{"account_mismatch"}, deliveries: []stormDelivery{
				a("SHOPAPAYMENT0001", "", "AUTHORISATION", "EUR", 1000, 0),
				adyenMoneyItem(t, "SHOPBREFUND00001", "SHOPAPAYMENT0001", "REFUND", "EUR", "ShopB", 1000, 1)}},
		{name: "dispute stages decide, not the unsigned dates", source: "adyen", tx: "DISPUTE000000001", status: lifecycle.StatusSucceeded,
			authorized: 1000, captured: 1000, dispute: lifecycle.Won, deliveries: []stormDelivery{
				a("DISPUTE000000001", "", "AUTHORISATION", "EUR", 1000, 0),
				a("CHBK000000000001", "DISPUTE000000001", "CHARGEBACK", "EUR", 1000, 48),
				a("CHBK000000000001", "DISPUTE000000001", "CHARGEBACK_REVERSED", "EUR", 1000, 24)}},
	}
}

// TestTheRecordedStateIsTheMoneyThatMovedAcrossThreeReplicas delivers each
// case's events three times, shuffled, to three replicas at once: every
// payment ends in the state of the money that moved, with the review
// reasons that say what disagreed, and its newest forward carries it.
func TestTheRecordedStateIsTheMoneyThatMovedAcrossThreeReplicas(t *testing.T) {
	t.Parallel()
	dsn, st := paylocktest.MigratedSchema(t)
	// paylock's own forwarding: each replica's store routes every
	// source's messages to the default destination.
	routes := func(_ *handler.Config, own *store.Store) {
		for _, name := range []string{"stripe", "stripe-charges", "adyen", "adyen-manual"} {
			own.Outbox().Route(name, store.ToDestination(forward.DefaultDestination))
		}
	}
	reps := startReplicas(t, 3, paylocktest.Options{DSN: dsn, Config: handler.Config{Sources: []handler.Source{
		{Name: "stripe", Provider: "stripe", Verifier: testkit.Verifier(t, signature.SchemeStripe, stormStripeSecret)},
		{Name: "stripe-charges", Provider: "stripe", Verifier: testkit.Verifier(t, signature.SchemeStripe, stormStripeSecret),
			Settings: provider.Settings{"events": []byte(`["charge.succeeded","charge.refunded"]`)}},
		{Name: "adyen", Provider: "adyen", Verifier: testkit.Verifier(t, signature.SchemeAdyen, stormAdyenKey)},
		{Name: "adyen-manual", Provider: "adyen", Verifier: testkit.Verifier(t, signature.SchemeAdyen, stormAdyenKey),
			Settings: provider.Settings{"capture": []byte(`"manual"`)}},
	}}, Configure: routes})
	rcv := startForwarding(t, st)
	cases := moneyCases(t)
	var storm []stormDelivery
	for _, c := range cases {
		for range 3 {
			storm = append(storm, c.deliveries...)
		}
	}
	r := rand.New(rand.NewPCG(29, 3))
	r.Shuffle(len(storm), func(i, j int) { storm[i], storm[j] = storm[j], storm[i] })
	deliverStorm(t, reps, storm)
	testkit.WaitFor(t, 60*time.Second, "every forward job completed", func() bool {
		return testkit.Count(t, st.Pool(), `SELECT count(*) FROM river_job WHERE kind = 'forward' AND state <> 'completed'`) == 0
	})
	newest := map[string]stormMessage{}
	for _, a := range rcv.Attempts() {
		var m stormMessage
		if err := json.Unmarshal(a.Body, &m); err != nil {
			t.Fatal(err)
		}
		k := m.Data.Source + "/" + m.Data.TransactionID
		if m.Data.Version > newest[k].Data.Version {
			newest[k] = m
		}
	}
	ctx := context.Background()
	for _, c := range cases {
		p, err := st.Payments().PaymentState(ctx, c.source, c.tx)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if p.Status != c.status || p.AmountAuthorized != c.authorized || p.AmountCaptured != c.captured ||
			p.AmountRefunded != c.refunded || p.Dispute != c.dispute {
			t.Errorf("%s: %+v, want %s, %d authorised, %d captured, %d refunded, dispute %q", c.name, p.State, c.status,
				c.authorized, c.captured, c.refunded, c.dispute)
		}
		var reasons []string
		rows, err := st.Pool().Query(ctx, `SELECT reason FROM payment_attention WHERE source = $1 AND transaction_id = $2 ORDER BY reason`, c.source, c.tx)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var r string
			if err := rows.Scan(&r); err != nil {
				t.Fatal(err)
			}
			reasons = append(reasons, r)
		}
		rows.Close()
		if !slices.Equal(reasons, c.review) {
			t.Errorf("%s: review reasons %v, want %v", c.name, reasons, c.review)
		}
		m := newest[c.source+"/"+c.tx]
		if m.Data.Version != p.Version || m.Data.Status != string(c.status) || m.Data.AmountRefunded != c.refunded ||
			m.Data.AmountCaptured != c.captured || m.Data.AmountAuthorized != c.authorized {
			t.Errorf("%s: the newest forward %+v, want version %d carrying the state", c.name, m, p.Version)
		}
	}
}

// TestAContradictingLifecycleEventIsAReviewItem: an event id delivered
// again with another amount is answered 422, changes nothing, and opens a
// review item naming what disagreed (it was kept in the delivery log
// alone).
func TestAContradictingLifecycleEventIsAReviewItem(t *testing.T) {
	t.Parallel()
	dsn, st := paylocktest.MigratedSchema(t)
	reps := startReplicas(t, 3, paylocktest.Options{DSN: dsn, Config: handler.Config{Sources: []handler.Source{
		{Name: "adyen", Provider: "adyen", Verifier: testkit.Verifier(t, signature.SchemeAdyen, stormAdyenKey)}}}})
	url := func(i int) string { return reps[i%3].URL + "/webhooks/adyen" }
	deliverOne(t, url(0), http.Header{}, adyenMoneyItem(t, "CONTRA0000000001", "", "AUTHORISATION", "EUR", "ShopA", 1000, 0).body)
	deliverOne(t, url(1), http.Header{}, adyenMoneyItem(t, "CONTRAREFUND0001", "CONTRA0000000001", "REFUND", "EUR", "ShopA", 300, 1).body)
	again := adyenMoneyItem(t, "CONTRAREFUND0001", "CONTRA0000000001", "REFUND", "EUR", "ShopA", 900, 1)
	if a := postRaw(t, url(2), http.Header{}, again.body); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("the contradicting refund answered %d %s, want 422", a.status, a.raw)
	}
	items, err := st.Review().ReviewItems(context.Background(), store.ReviewFilter{Kind: store.ReviewMismatch})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].Details["detail"] != `amount recorded "300", delivered "900"` || items[0].Details["transaction_id"] != "CONTRA0000000001" {
		t.Fatalf("review items %+v, want one naming the amount that disagreed", items)
	}
	if p, _ := st.Payments().PaymentState(context.Background(), "adyen", "CONTRA0000000001"); p.AmountRefunded != 300 {
		t.Fatalf("refunded %d, want 300", p.AmountRefunded)
	}
}
