package gocardless

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

// newNotifier is a gocardless source's adapter, as a provider.Notifier.
func newNotifier(t testing.TB) provider.Notifier {
	t.Helper()
	a, err := Provider{}.New(provider.Config{Source: "gocardless", Rules: payload.NewRules("", nil)})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := a.(provider.Notifier)
	if !ok {
		t.Fatal("the gocardless adapter is not a provider.Notifier")
	}
	return n
}

// wanted are d's events, an absent payload standing for the whole body.
func wanted(d provider.Delivery) []provider.Event {
	out := make([]provider.Event, len(d.Events))
	for i, e := range d.Events {
		if e.Payload == nil {
			e.Payload = d.Body
		}
		out[i] = e
	}
	return out
}

// TestEachFetchedStateRecordsItsEvents: every sample answer of the API
// becomes exactly its events, as the pipeline and the database need them.
func TestEachFetchedStateRecordsItsEvents(t *testing.T) {
	t.Parallel()
	a := newNotifier(t)
	for _, d := range (Provider{}).Samples().Deliveries {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			got, err := a.Adapt(d.Body, "")
			if err != nil {
				t.Fatal(err)
			}
			providertest.CheckAdapted(t, got, nil)
			providertest.WantEvents(t, got, wanted(d))
		})
	}
}

// TestEveryStatusMapsAsDocumented: each payment and refund status
// GoCardless documents records its kinds, under ids derived from the
// state; a status not final, or unknown, records nothing.
func TestEveryStatusMapsAsDocumented(t *testing.T) {
	t.Parallel()
	a := newNotifier(t)
	body := func(status string, refunds ...string) []byte {
		b := `{"payments":{"id":"PM0TEST0001","amount":700,"currency":"gbp","status":"` + status + `"},"refunds":[`
		for i, r := range refunds {
			if i > 0 {
				b += ","
			}
			b += `{"id":"RF0TEST000` + string(rune('1'+i)) + `","amount":100,"currency":"GBP","status":"` + r + `","links":{"payment":"PM0TEST0001"}}`
		}
		return []byte(b + `]}`)
	}
	type ev struct {
		kind lifecycle.Kind
		id   string
	}
	for _, tc := range []struct {
		status  string
		refunds []string
		want    []ev
	}{
		{"pending_customer_approval", nil, nil},
		{"pending_submission", nil, nil},
		{"submitted", nil, nil},
		{"confirmed", nil, []ev{{"", "PM0TEST0001:confirmed"}}},
		{"paid_out", nil, []ev{{"", "PM0TEST0001:confirmed"}}},
		{"charged_back", nil, []ev{{"", "PM0TEST0001:confirmed"}, {lifecycle.DisputeLost, "PM0TEST0001:charged_back"}}},
		{"failed", nil, []ev{{lifecycle.Failed, "PM0TEST0001:failed"}}},
		{"customer_approval_denied", nil, []ev{{lifecycle.Failed, "PM0TEST0001:customer_approval_denied"}}},
		{"cancelled", nil, []ev{{lifecycle.Canceled, "PM0TEST0001:cancelled"}}},
		{"a_status_gocardless_adds_later", nil, nil},
		{"paid_out", []string{"created", "pending_submission", "submitted"}, []ev{{"", "PM0TEST0001:confirmed"},
			{lifecycle.RefundPending, "RF0TEST0001:created"}, {lifecycle.RefundPending, "RF0TEST0002:pending_submission"},
			{lifecycle.RefundPending, "RF0TEST0003:submitted"}}},
		{"paid_out", []string{"paid", "cancelled", "bounced", "funds_returned"}, []ev{{"", "PM0TEST0001:confirmed"},
			{lifecycle.Refund, "RF0TEST0001:paid"}, {lifecycle.RefundFailed, "RF0TEST0002:cancelled"},
			{lifecycle.RefundFailed, "RF0TEST0003:bounced"}, {lifecycle.RefundFailed, "RF0TEST0004:funds_returned"}}},
		{"paid_out", []string{"a_refund_status_added_later"}, []ev{{"", "PM0TEST0001:confirmed"}}},
	} {
		got, err := a.Adapt(body(tc.status, tc.refunds...), "")
		if err != nil {
			t.Errorf("%s %v: %v", tc.status, tc.refunds, err)
			continue
		}
		providertest.CheckAdapted(t, got, nil)
		if len(got) != len(tc.want) {
			t.Errorf("%s %v: %d events %+v, want %v", tc.status, tc.refunds, len(got), got, tc.want)
			continue
		}
		for i, w := range tc.want {
			g := got[i]
			if g.Kind != w.kind || g.EventID != w.id || g.TransactionID != "PM0TEST0001" || g.Currency != "GBP" {
				t.Errorf("%s %v: event %d = %+v, want kind %q id %s", tc.status, tc.refunds, i, g, w.kind, w.id)
			}
			if refund := strings.HasPrefix(w.id, "RF"); refund && (g.RefundID != strings.Split(w.id, ":")[0] || g.Amount != 100) ||
				!refund && (g.RefundID != "" || g.Amount != 700) {
				t.Errorf("%s %v: event %d refund %q amount %d", tc.status, tc.refunds, i, g.RefundID, g.Amount)
			}
		}
	}
}

// TestFetchingTheSameStateTwiceYieldsTheSameEvents: the ids are the
// state's, not the fetch's, so that a second fetch records nothing more;
// a payment moving on keeps its success's id and adds the new events.
func TestFetchingTheSameStateTwiceYieldsTheSameEvents(t *testing.T) {
	t.Parallel()
	a := newNotifier(t)
	body := sample("api_refunded.json")
	first, err1 := a.Adapt(body, "")
	second, err2 := a.Adapt(append([]byte(nil), body...), "")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	providertest.WantEvents(t, second, first)

	confirmed, _ := a.Adapt(sample("api_confirmed.json"), "")
	paidOut, _ := a.Adapt(replaced("api_confirmed.json", `"status": "confirmed"`, `"status": "paid_out"`), "")
	charged, _ := a.Adapt(replaced("api_confirmed.json", `"status": "confirmed"`, `"status": "charged_back"`), "")
	if len(confirmed) != 1 || len(paidOut) != 1 || len(charged) != 2 {
		t.Fatalf("confirmed %d, paid_out %d, charged_back %d events; want 1, 1, 2", len(confirmed), len(paidOut), len(charged))
	}
	if paidOut[0].EventID != confirmed[0].EventID || charged[0].EventID != confirmed[0].EventID {
		t.Errorf("the success's id moved with the status: %s, %s, %s", confirmed[0].EventID, paidOut[0].EventID, charged[0].EventID)
	}
	if charged[1].EventID == confirmed[0].EventID || charged[1].Kind != lifecycle.DisputeLost {
		t.Errorf("the chargeback: %+v", charged[1])
	}
}

// fold is the state the events of bodies make, in order.
func fold(t *testing.T, a provider.Adapter, bodies ...[]byte) lifecycle.State {
	t.Helper()
	var evs []lifecycle.Event
	for _, b := range bodies {
		got, err := a.Adapt(b, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range got {
			kind := e.Kind
			if e.Succeeded() {
				kind = lifecycle.Succeeded
			}
			evs = append(evs, lifecycle.Event{Kind: kind, ID: e.EventID, Amount: e.Amount, Currency: e.Currency,
				RefundID: e.RefundID, Stage: e.Stage, At: e.At})
		}
	}
	return lifecycle.Fold(evs)
}

// TestTheFetchedStatesFoldToThePaymentsState: what the payment is once
// its events are folded, whichever fetches recorded them.
func TestTheFetchedStatesFoldToThePaymentsState(t *testing.T) {
	t.Parallel()
	a := newNotifier(t)
	refunded := fold(t, a, sample("api_refunded.json"))
	if refunded.Status != lifecycle.PartiallyRefunded || refunded.AmountCaptured != 5000 || refunded.AmountRefunded != 2000 || refunded.Currency != "GBP" {
		t.Errorf("a paid refund, a bounced one and a pending one: %+v, want 5000 GBP captured, 2000 refunded", refunded)
	}
	// The bounced refund was paid first: its failure wins, fetched in
	// either order.
	paid := replaced("api_refunded.json", `"status": "bounced"`, `"status": "paid"`)
	for _, order := range [][][]byte{{paid, sample("api_refunded.json")}, {sample("api_refunded.json"), paid}} {
		if got := fold(t, a, order...); got.AmountRefunded != 2000 {
			t.Errorf("a refund paid, then bounced: %+v, want 2000 refunded", got)
		}
	}
	if got := fold(t, a, sample("api_charged_back.json")); got.Status != lifecycle.StatusSucceeded || got.Dispute != lifecycle.Lost {
		t.Errorf("charged back: %+v, want succeeded with a lost dispute", got)
	}
	if got := fold(t, a, replaced("api_charged_back.json", `"status": "charged_back"`, `"status": "confirmed"`), sample("api_charged_back.json")); got.Dispute != lifecycle.Lost || got.AmountCaptured != 4200 {
		t.Errorf("confirmed, then charged back: %+v", got)
	}
	if got := fold(t, a, sample("api_cancelled.json")); got.Status != lifecycle.StatusCanceled {
		t.Errorf("cancelled: %+v", got)
	}
	if got := fold(t, a, sample("api_failed.json")); got.Status != lifecycle.StatusFailed {
		t.Errorf("failed: %+v", got)
	}
	if got := fold(t, a, sample("api_customer_approval_denied.json")); got.Status != lifecycle.StatusFailed {
		t.Errorf("customer approval denied: %+v", got)
	}
	// A payment that failed and was then retried and collected (Success+).
	retried := fold(t, a, sample("api_failed.json"), replaced("api_failed.json", `"status": "failed"`, `"status": "confirmed"`))
	if retried.Status != lifecycle.StatusSucceeded || retried.AmountCaptured != 1500 {
		t.Errorf("failed, then collected on retry: %+v", retried)
	}
}

// TestAPendingPaymentRecordsNothing: not final, and no refund.
func TestAPendingPaymentRecordsNothing(t *testing.T) {
	t.Parallel()
	got, err := newNotifier(t).Adapt(sample("api_pending.json"), "")
	if err != nil || got != nil {
		t.Fatalf("pending_submission: %+v, %v; want no events", got, err)
	}
}

// TestAdaptRefusesWhatIsNotTheAPIsAnswer: a webhook, a payment or refund
// that breaks the rules, a refund of another payment: refused, nothing
// recorded.
func TestAdaptRefusesWhatIsNotTheAPIsAnswer(t *testing.T) {
	t.Parallel()
	a := newNotifier(t)
	const c, r = "api_confirmed.json", "api_refunded.json"
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
		field  string
	}{
		{"a webhook", sample("webhook_confirmed.json"), 422, "payments"},
		{"not JSON", []byte(`{"payments":`), 400, "*"},
		{"an array", []byte(`[{"payments":{}}]`), 400, "*"},
		{"payments an array", []byte(`{"payments":[],"refunds":[]}`), 400, "payments"},
		{"refunds missing", replaced(c, `,
  "refunds": []`, ``), 422, "refunds"},
		{"refunds an object", replaced(c, `"refunds": []`, `"refunds": {}`), 400, "refunds"},
		{"payment id missing", replaced(c, `"id": "PM0PAYLOCK0001",`, ``), 422, "payments.id"},
		{"payment id not a payment's", replaced(c, `"id": "PM0PAYLOCK0001"`, `"id": "MD0PAYLOCK0001"`), 422, "payments.id"},
		{"status missing", replaced(c, `"status": "confirmed",`, ``), 422, "payments.status"},
		{"status not a token", replaced(c, `"status": "confirmed"`, `"status": "Confirmed "`), 422, "payments.status"},
		{"amount a string", replaced(c, `"amount": 1000`, `"amount": "1000"`), 400, "payments.amount"},
		{"amount a fraction", replaced(c, `"amount": 1000`, `"amount": 10.00`), 422, "payments.amount"},
		{"amount zero", replaced(c, `"amount": 1000`, `"amount": 0`), 422, "payments.amount"},
		{"currency unknown", replaced(c, `"currency": "GBP"`, `"currency": "ABC"`), 422, "payments.currency"},
		{"currency missing", replaced(c, `"currency": "GBP",`, ``), 422, "payments.currency"},
		{"amount case-variant", replaced(c, `"amount": 1000`, `"amount": 1000, "Amount": 1`), 400, "payments.amount"},
		{"a repeated key", replaced(c, `"order_id": "ORD-1001"`, `"k": "1", "k": "2"`), 400, "*"},
		{"a refund of another payment", replaced(r, `"payment": "PM0PAYLOCK0007"`, `"payment": "PM0PAYLOCK0001"`), 422, "refunds[0].links.payment"},
		{"a refund without its payment", replaced(r, `"links": {
        "payment": "PM0PAYLOCK0007"
      }`, `"links": {}`), 422, "refunds[0].links.payment"},
		{"a refund id not a refund's", replaced(r, `"id": "RF0PAYLOCK007A"`, `"id": "PM0PAYLOCK007A"`), 422, "refunds[0].id"},
		{"a refund amount zero", replaced(r, `"amount": 2000`, `"amount": 0`), 422, "refunds[0].amount"},
		{"a refund currency unknown", replaced(r, `"currency": "GBP",
      "reference": "Goodwill refund"`, `"currency": "XYZ",
      "reference": "Goodwill refund"`), 422, "refunds[1].currency"},
		{"a refund a string", replaced(c, `"refunds": []`, `"refunds": ["RF0PAYLOCK0001"]`), 400, "refunds[0]"},
	} {
		got, err := a.Adapt(tc.body, "")
		if got != nil {
			t.Errorf("%s: adapted to %+v", tc.name, got)
		}
		t.Run(tc.name, func(t *testing.T) { providertest.WantRefused(t, err, tc.status, tc.field) })
	}
}

// TestNewChecksTheAPISettingsAndRefusesOthers: api_key_env and api_url are
// the only keys, and are checked as the sources file is loaded.
func TestNewChecksTheAPISettingsAndRefusesOthers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, value string
		ok               bool
	}{
		{"a variable", provider.KeyAPIKeyEnv, `"GOCARDLESS_ACCESS_TOKEN"`, true},
		{"not a name", provider.KeyAPIKeyEnv, `"GOCARDLESS TOKEN"`, false},
		{"a number", provider.KeyAPIKeyEnv, `7`, false},
		{"the live API", provider.KeyAPIURL, `"https://api.gocardless.com"`, true},
		{"the sandbox", provider.KeyAPIURL, `"https://api-sandbox.gocardless.com"`, true},
		{"a fake", provider.KeyAPIURL, `"http://127.0.0.1:8099"`, true},
		{"credentials", provider.KeyAPIURL, `"https://live_x:y@api.gocardless.com"`, false},
		{"no scheme", provider.KeyAPIURL, `"api.gocardless.com"`, false},
		{"a query", provider.KeyAPIURL, `"https://api.gocardless.com/?access_token=x"`, false},
		{"events", "events", `["payments.confirmed"]`, false},
		{"secret", "secret", `"x"`, false},
	} {
		_, err := Provider{}.New(provider.Config{Source: "gocardless", Rules: payload.NewRules("", nil),
			Settings: provider.Settings{tc.key: json.RawMessage(tc.value)}})
		var se *provider.SettingError
		if tc.ok != (err == nil) || err != nil && (!errors.As(err, &se) || se.Key != tc.key) {
			t.Errorf("%s: %s = %s: %v", tc.name, tc.key, tc.value, err)
		}
		if err != nil && strings.Contains(err.Error(), "live_x:y") {
			t.Errorf("%s: error %q repeats the URL's credentials", tc.name, err)
		}
	}
}

// TestAPaymentNamesItsOrderInItsMetadata: the default order pointer reads
// payments.metadata.order_id of what Adapt reads, the stored payload of
// every event.
func TestAPaymentNamesItsOrderInItsMetadata(t *testing.T) {
	t.Parallel()
	var p provider.Provider = Provider{}
	namer, ok := p.(provider.OrderNamer)
	if !ok {
		t.Fatal("Provider is not a provider.OrderNamer")
	}
	ptr, err := payload.ParsePointer(namer.OrderPointer())
	if err != nil {
		t.Fatal(err)
	}
	a := newNotifier(t)
	for _, d := range (Provider{}).Samples().Deliveries {
		events, err := a.Adapt(d.Body, "")
		if err != nil || len(events) == 0 {
			t.Fatalf("%s: %d events, %v", d.Name, len(events), err)
		}
		for _, e := range events {
			root, err := payload.Decode(e.Payload)
			if err != nil {
				t.Fatal(err)
			}
			n, err := ptr.Resolve(root)
			if err != nil || n == nil || n.Kind() != payload.String || !strings.HasPrefix(n.Text(), "ORD-") {
				t.Errorf("%s, event %s: %s resolves to %v, %v; want the order", d.Name, e.EventID, ptr, n, err)
			}
		}
	}
}

// TestTheProviderIsASyncerOfItsOwnScheme: what the registries see.
func TestTheProviderIsASyncerOfItsOwnScheme(t *testing.T) {
	t.Parallel()
	p, ok := provider.Lookup("gocardless")
	if !ok {
		t.Fatal(`no provider is registered as "gocardless"`)
	}
	if _, ok := p.(provider.Syncer); !ok {
		t.Error("the gocardless provider is not a provider.Syncer")
	}
	if s := p.Schemes(); len(s) != 1 || s[0] != Scheme {
		t.Errorf("Schemes = %v, want [%s]", s, Scheme)
	}
	if keys := p.Keys(); len(keys) != 2 || keys[0] != provider.KeyAPIKeyEnv || keys[1] != provider.KeyAPIURL {
		t.Errorf("Keys = %v", keys)
	}
}
