package mollie

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

// newAdapter is a mollie source's adapter with the default rules.
func newAdapter(t testing.TB) adapter {
	t.Helper()
	a, err := Provider{}.New(provider.Config{Source: "mollie", Rules: payload.NewRules("", nil)})
	if err != nil {
		t.Fatal(err)
	}
	return a.(adapter)
}

// replaced is the sample name with each old, new pair of replace applied
// once; it fails when an old is not in the sample.
func replaced(t testing.TB, name string, replace ...string) []byte {
	t.Helper()
	b := sample(name)
	for i := 0; i+1 < len(replace); i += 2 {
		if !bytes.Contains(b, []byte(replace[i])) {
			t.Fatalf("%s holds no %q", name, replace[i])
		}
		b = bytes.Replace(b, []byte(replace[i]), []byte(replace[i+1]), 1)
	}
	return b
}

// withPayloads is want with each nil payload the whole body, as
// provider.Delivery says.
func withPayloads(want []provider.Event, body []byte) []provider.Event {
	out := slices.Clone(want)
	for i := range out {
		if out[i].Payload == nil {
			out[i].Payload = body
		}
	}
	return out
}

func TestEverySampleAnswerRecordsItsEvents(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	for _, d := range (Provider{}).Samples().Deliveries {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			got, err := a.Adapt(d.Body, "")
			providertest.CheckAdapted(t, got, err)
			if err != nil {
				t.Fatal(err)
			}
			providertest.WantEvents(t, got, withPayloads(d.Events, d.Body))
			for _, e := range got {
				if e.TransactionID != d.Ref {
					t.Errorf("event %s is of %s, want the fetched payment %s", e.EventID, e.TransactionID, d.Ref)
				}
			}
		})
	}
}

// TestTheSameStateRecordsTheSameEventsAndANewStateOnlyWhatIsNew: the
// store records each event id once, so fetching a payment again must
// give the same ids, and a payment that changed must give new ids only
// for what changed.
func TestTheSameStateRecordsTheSameEventsAndANewStateOnlyWhatIsNew(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	body := sample("refunded.json")
	first, err := a.Adapt(body, "")
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.Adapt(bytes.Clone(body), "")
	if err != nil {
		t.Fatal(err)
	}
	providertest.WantEvents(t, again, first)

	// The queued refund went through; the rest is as it was.
	later := replaced(t, "refunded.json", `"status": "queued"`, `"status": "refunded"`)
	next, err := a.Adapt(later, "")
	if err != nil {
		t.Fatal(err)
	}
	ids := func(evs []provider.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.EventID)
		}
		return out
	}
	want := []string{"tr_Rf8nD2kWq4:paid", "re_4qqhO89gsT:refunded", "re_vD3Jm32wQt:failed", "re_Qu3uEdX8pL:refunded"}
	if got := ids(next); !slices.Equal(got, want) {
		t.Errorf("after the refund went through: %q, want %q", got, want)
	}
	for i, e := range next[:3] {
		if e.EventID != first[i].EventID || e.Kind != first[i].Kind || e.Amount != first[i].Amount {
			t.Errorf("unchanged event %d: %+v, was %+v", i, e, first[i])
		}
	}
	if e := next[3]; e.Kind != lifecycle.Refund || e.RefundID != "re_Qu3uEdX8pL" || e.Amount != 200 {
		t.Errorf("the refund that went through: %+v", e)
	}
}

// fold is the state the events of bodies make together.
func fold(t *testing.T, a adapter, bodies ...[]byte) lifecycle.State {
	t.Helper()
	var evs []lifecycle.Event
	for _, b := range bodies {
		got, err := a.Adapt(b, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range got {
			evs = append(evs, lifecycle.Event{Kind: e.Kind, ID: e.EventID, Amount: e.Amount, Currency: e.Currency,
				RefundID: e.RefundID, CaptureID: e.CaptureID, Cumulative: e.Cumulative, Stage: e.Stage, Account: e.Account, At: e.At})
		}
	}
	return lifecycle.Fold(evs)
}

// TestEachSampleFoldsToThePaymentsState: what the events of each answer
// make is the state Mollie's answer describes.
func TestEachSampleFoldsToThePaymentsState(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	for _, tc := range []struct {
		name string
		want lifecycle.State
	}{
		{"paid.json", lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000}},
		{"paid_jpy.json", lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1500, Currency: "JPY", AmountAuthorized: 1500, AmountCaptured: 1500}},
		{"open.json", lifecycle.State{Status: lifecycle.Pending}},
		{"failed.json", lifecycle.State{Status: lifecycle.StatusFailed, Amount: 2495, Currency: "EUR"}},
		{"canceled.json", lifecycle.State{Status: lifecycle.StatusCanceled, Amount: 3507, Currency: "EUR"}},
		{"expired.json", lifecycle.State{Status: lifecycle.StatusCanceled, Amount: 1250, Currency: "GBP"}},
		{"authorized.json", lifecycle.State{Status: lifecycle.StatusAuthorized, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000}},
		// Captured in part, the rest released: worth what was captured.
		{"captured.json", lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 5000, Currency: "EUR", AmountAuthorized: 5000, AmountCaptured: 3000}},
		// Only the refund that went through counts.
		{"refunded.json", lifecycle.State{Status: lifecycle.PartiallyRefunded, Amount: 3507, Currency: "EUR", AmountAuthorized: 3507,
			AmountCaptured: 3507, AmountRefunded: 595}},
		{"chargeback.json", lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 10000, Currency: "EUR", AmountAuthorized: 10000,
			AmountCaptured: 10000, Dispute: lifecycle.Lost}},
		{"chargeback_reversed.json", lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 2500, Currency: "EUR", AmountAuthorized: 2500,
			AmountCaptured: 2500, Dispute: lifecycle.Won}},
	} {
		if got := fold(t, a, sample(tc.name)); got != tc.want {
			t.Errorf("%s: %+v,\n want %+v", tc.name, got, tc.want)
		}
	}
}

// TestAnAuthorisationCapturedInPartsEndsWithWhatWasCaptured: fetched at
// each step (authorised, a first capture while still authorised, paid
// once the rest is captured), the payment is worth its captures.
func TestAnAuthorisationCapturedInPartsEndsWithWhatWasCaptured(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	authorized := replaced(t, "captured.json", `"status": "paid"`, `"status": "authorized"`, `"value": "30.00"`, `"value": "0.00"`)
	partly := replaced(t, "captured.json", `"status": "paid"`, `"status": "authorized"`)
	paid := replaced(t, "captured.json", `"value": "30.00"`, `"value": "50.00"`)
	if got := fold(t, a, authorized); got.Status != lifecycle.StatusAuthorized || got.AmountAuthorized != 5000 || got.AmountCaptured != 0 {
		t.Errorf("authorised, nothing captured: %+v", got)
	}
	// Money captured is money taken (lifecycle): succeeded, for 30.00.
	if got := fold(t, a, authorized, partly); got.Status != lifecycle.StatusSucceeded || got.AmountAuthorized != 5000 || got.AmountCaptured != 3000 {
		t.Errorf("authorised, 30.00 captured: %+v", got)
	}
	if got := fold(t, a, authorized, partly, paid); got.Status != lifecycle.StatusSucceeded || got.AmountCaptured != 5000 {
		t.Errorf("paid, 50.00 captured in two parts: %+v", got)
	}
	if got := fold(t, a, paid, authorized); got.Status != lifecycle.StatusSucceeded || got.AmountCaptured != 5000 {
		t.Errorf("the same answers in another order: %+v", got)
	}
}

// TestALaterChargebackDecidesOverAnEarlierReversal: the chargebacks'
// stages follow their creation, whatever the order Mollie lists them in.
func TestALaterChargebackDecidesOverAnEarlierReversal(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	second := `{"resource": "chargeback", "id": "chb_s3c0nd", "amount": {"value": "25.00", "currency": "EUR"},
	  "createdAt": "2024-05-01T09:00:00+00:00", "reversedAt": null, "paymentId": "tr_Rv6sQe1Jz3"},`
	body := replaced(t, "chargeback_reversed.json", `"chargebacks": [`, `"chargebacks": [`+second)
	got, err := a.Adapt(body, "")
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]int{}
	for _, e := range got {
		stages[e.EventID] = e.Stage
	}
	if stages["chb_xFzwUN4ci8HAmSGUACS4J:received"] != 1 || stages["chb_xFzwUN4ci8HAmSGUACS4J:reversed"] != 2 || stages["chb_s3c0nd:received"] != 3 {
		t.Errorf("stages %v: want the first chargeback 1 and 2, the second 3", stages)
	}
	if s := fold(t, a, body); s.Dispute != lifecycle.Lost {
		t.Errorf("a second chargeback after a reversal: %+v, want lost", s)
	}
}

func TestAZeroAmountPaymentRecordsNothing(t *testing.T) {
	t.Parallel()
	body := replaced(t, "paid.json", `"value": "10.00"`, `"value": "0.00"`)
	got, err := newAdapter(t).Adapt(body, "")
	if err != nil || len(got) != 0 {
		t.Errorf("a paid payment of 0.00: %+v, %v; want no events", got, err)
	}
}

// TestAdaptRefusesWhatIsNotAMolliePaymentItCanRead: the body must be a
// Mollie payment with amounts exact in their currency; the field named is
// where the body holds the fault.
func TestAdaptRefusesWhatIsNotAMolliePaymentItCanRead(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	refund := "_embedded.refunds[0]"
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
		field  string
	}{
		{"not JSON", []byte("id=tr_WDqYK6vllg"), 400, "*"},
		{"an array", []byte(`[{"resource": "payment"}]`), 400, "*"},
		{"a webhook's id only", []byte(`{"id": "tr_WDqYK6vllg"}`), 422, "resource"},
		{"a refund, not a payment", replaced(t, "paid.json", `"resource": "payment"`, `"resource": "refund"`), 422, "resource"},
		{"an order's id", replaced(t, "paid.json", `"id": "tr_WDqYK6vllg"`, `"id": "ord_kEn1PlbGa"`), 422, "id"},
		{"no id", replaced(t, "paid.json", `"id": "tr_WDqYK6vllg",`, ``), 422, "id"},
		{"id a number", replaced(t, "paid.json", `"id": "tr_WDqYK6vllg"`, `"id": 7`), 400, "id"},
		{"a v1 status", replaced(t, "paid.json", `"status": "paid"`, `"status": "refunded"`), 422, "status"},
		{"no status", replaced(t, "paid.json", `"status": "paid",`, ``), 422, "status"},
		{"no amount", replaced(t, "failed.json", `"amount": {
    "value": "24.95",
    "currency": "EUR"
  },`, ``), 422, "amount"},
		{"more decimals than the euro has", replaced(t, "paid.json", `"value": "10.00"`, `"value": "10.001"`), 422, "amount.value"},
		{"decimals in yen", replaced(t, "paid_jpy.json", `"value": "1500"`, `"value": "1500.5"`), 422, "amount.value"},
		{"amount a number", replaced(t, "paid.json", `"value": "10.00"`, `"value": 10.00`), 400, "amount.value"},
		{"amount negative", replaced(t, "paid.json", `"value": "10.00"`, `"value": "-10.00"`), 422, "amount.value"},
		{"amount with an exponent", replaced(t, "paid.json", `"value": "10.00"`, `"value": "1e3"`), 422, "amount.value"},
		{"amount with leading zeros", replaced(t, "paid.json", `"value": "10.00"`, `"value": "010.00"`), 422, "amount.value"},
		{"currency lower-case", replaced(t, "paid.json", `"currency": "EUR"`, `"currency": "eur"`), 422, "amount.currency"},
		{"currency unknown", replaced(t, "paid.json", `"currency": "EUR"`, `"currency": "ABC"`), 422, "amount.currency"},
		{"currency not tender (the rules)", replaced(t, "paid_jpy.json", `"currency": "JPY"`, `"currency": "XAU"`), 422, "amount.currency"},
		{"paidAt not a time", replaced(t, "paid.json", `"2024-03-20T09:14:37+00:00"`, `"yesterday"`), 422, "paidAt"},
		{"paidAt a number", replaced(t, "paid.json", `"2024-03-20T09:14:37+00:00"`, `1710926077`), 400, "paidAt"},
		{"a repeated key", replaced(t, "paid.json", `"order_id": "12345"`, `"k": 1, "k": 2`), 400, "*"},
		{"a case-variant key", replaced(t, "paid.json", `"status": "paid",`, `"status": "paid", "Status": "open",`), 400, "status"},
		{"amountCaptured with too many decimals", replaced(t, "captured.json", `"value": "30.00"`, `"value": "30.005"`), 422, "amountCaptured.value"},
		{"_embedded not an object", replaced(t, "refunded.json", `"_embedded": {`, `"_embedded": [], "x": {`), 400, "_embedded"},
		{"refunds not an array", replaced(t, "paid.json", `"refunds": []`, `"refunds": {}`), 400, "_embedded.refunds"},
		{"a refund of another payment", replaced(t, "refunded.json", `"paymentId": "tr_Rf8nD2kWq4"`, `"paymentId": "tr_WDqYK6vllg"`), 422, refund + ".paymentId"},
		{"a refund with a payment's id", replaced(t, "refunded.json", `"id": "re_4qqhO89gsT"`, `"id": "tr_4qqhO89gsT"`), 422, refund + ".id"},
		{"a refund not a refund", replaced(t, "refunded.json", `"resource": "refund"`, `"resource": "chargeback"`), 422, refund + ".resource"},
		{"a refund status unknown", replaced(t, "refunded.json", `"status": "refunded"`, `"status": "done"`), 422, refund + ".status"},
		{"a refund without an amount", replaced(t, "refunded.json", `"amount": {
          "value": "5.95",
          "currency": "EUR"
        },`, ``), 422, refund + ".amount"},
		{"a refund a string", replaced(t, "paid.json", `"refunds": []`, `"refunds": ["re_4qqhO89gsT"]`), 400, refund},
		{"a chargeback without createdAt", replaced(t, "chargeback.json", `"createdAt": "2024-04-20T08:30:00+00:00",`, ``), 422, "_embedded.chargebacks[0].createdAt"},
		{"a chargeback's reversedAt not a time", replaced(t, "chargeback_reversed.json", `"reversedAt": "2024-04-24T09:13:37+00:00"`, `"reversedAt": "soon"`), 422, "_embedded.chargebacks[0].reversedAt"},
		{"a chargeback with a refund's id", replaced(t, "chargeback.json", `"id": "chb_n9z0tp"`, `"id": "re_n9z0tp"`), 422, "_embedded.chargebacks[0].id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := a.Adapt(tc.body, "")
			providertest.CheckAdapted(t, got, err)
			providertest.WantRefused(t, err, tc.status, tc.field)
		})
	}
}

func TestAmountsAreConvertedExactlyByTheCurrencysExponent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value, currency string
		want            int64 // 0: refused
	}{
		{"10.00", "EUR", 1000},
		{"10", "EUR", 1000},
		{"10.5", "EUR", 1050},
		{"0.01", "EUR", 1},
		{"1000", "JPY", 1000},
		{"1.234", "BHD", 1234},
		{"1.2", "BHD", 1200},
		{"1000.00", "ISK", 0}, // ISK has no minor unit
		{"10.001", "EUR", 0},
		{"1.5", "JPY", 0},
		{"", "EUR", 0},
		{".50", "EUR", 0},
		{"10.", "EUR", 0},
		{"+10.00", "EUR", 0},
		{"10,00", "EUR", 0},
		{" 10.00", "EUR", 0},
		{"10.00", "", 0},
		{"10.00", "Eur", 0},
		{"999999999999999999.99", "EUR", 0},
	} {
		got, err := minorUnits(tc.value, tc.currency, "amount.value", "amount.currency")
		switch {
		case tc.want == 0 && err == nil:
			t.Errorf("%q %s = %d, want it refused", tc.value, tc.currency, got)
		case tc.want != 0 && (err != nil || got != tc.want):
			t.Errorf("%q %s = %d, %v; want %d", tc.value, tc.currency, got, err, tc.want)
		case err != nil:
			providertest.WantRefused(t, err, 422, "*")
		}
	}
}

// TestEveryStateIsTypedAndNoneLeftOut: the source records every lifecycle
// state it understands, so the loader has nothing to warn about, and
// every kind the adapter records is named.
func TestEveryStateIsTypedAndNoneLeftOut(t *testing.T) {
	t.Parallel()
	var typed provider.Typed = newAdapter(t)
	if left := provider.LeftOut(typed); len(left) != 0 {
		t.Errorf("LeftOut = %q, want none", left)
	}
	kinds := map[lifecycle.Kind]bool{}
	for _, e := range typed.Types() {
		if !e.Kind.Valid() || !e.Recorded || !strings.Contains(e.Name, ".") {
			t.Errorf("type %q: kind %q recorded %v", e.Name, e.Kind, e.Recorded)
		}
		kinds[e.Kind] = true
	}
	for _, d := range (Provider{}).Samples().Deliveries {
		for _, e := range d.Events {
			if !kinds[e.Kind] {
				t.Errorf("%s: kind %q is recorded but no type names it", d.Name, e.Kind)
			}
		}
	}
}
