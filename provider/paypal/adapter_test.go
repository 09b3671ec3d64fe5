package paypal

import (
	"errors"
	"testing"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

func TestMinorUnitsAreExactByTheCurrencysExponent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value, code string
		want        int64
		ok          bool
	}{
		{"10.00", "USD", 1000, true},
		{"10", "USD", 1000, true},
		{"10.5", "USD", 1050, true},
		{"0.01", "USD", 1, true},
		{"1500", "JPY", 1500, true},
		{"1.234", "KWD", 1234, true},
		{"1500.5", "JPY", 0, false},
		{"10.001", "USD", 0, false},
		{"0.29", "EUR", 29, true},
		{"-1.00", "USD", 0, false},
		{"01.00", "USD", 0, false},
		{"1e3", "USD", 0, false},
		{"", "USD", 0, false},
		{"1.", "USD", 0, false},
		{"999999999999999999.99", "USD", 0, false},
		{"10.00", "XYZ", 0, false},
	} {
		got, err := minorUnits(tc.value, tc.code, "resource.amount.value")
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("minorUnits(%q, %s) = %d, %v; want %d, ok %v", tc.value, tc.code, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, payload.ErrInvalid) {
			t.Errorf("minorUnits(%q): %v does not wrap payload.ErrInvalid", tc.value, err)
		}
	}
}

// TestTheAdapterReadsEachSample: alone, each sample gives its events.
func TestTheAdapterReadsEachSample(t *testing.T) {
	t.Parallel()
	a, err := Provider{}.New(provider.Config{Source: "paypal"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range sampleDeliveries() {
		got, err := a.Adapt(d.Body, "")
		providertest.CheckAdapted(t, got, err)
		for i := range d.Events {
			d.Events[i].Payload = d.Body
		}
		providertest.WantEvents(t, got, d.Events)
	}
}

// TestAResolvedDisputeIsWonOrLostByItsOutcomeCode: every documented
// outcome_code, at every stage; NONE and unknown codes or stages are
// refused.
func TestAResolvedDisputeIsWonOrLostByItsOutcomeCode(t *testing.T) {
	t.Parallel()
	a, err := Provider{}.New(provider.Config{Source: "paypal"})
	if err != nil {
		t.Fatal(err)
	}
	resolved := func(code, stage string) []byte {
		return replaced("customer_dispute_resolved.json",
			`"RESOLVED_SELLER_FAVOUR"`, `"`+code+`"`, `"dispute_life_cycle_stage": "CHARGEBACK"`, `"dispute_life_cycle_stage": "`+stage+`"`)
	}
	for code, want := range map[string]lifecycle.Kind{
		"RESOLVED_BUYER_FAVOUR":  lifecycle.DisputeLost,
		"ACCEPTED":               lifecycle.DisputeLost,
		"RESOLVED_SELLER_FAVOUR": lifecycle.DisputeWon,
		"CANCELED_BY_BUYER":      lifecycle.DisputeWon,
		"DENIED":                 lifecycle.DisputeWon,
		"RESOLVED_WITH_PAYOUT":   lifecycle.DisputeWon,
	} {
		for stage, wantStage := range map[string]int{"INQUIRY": 1, "CHARGEBACK": 1, "PRE_ARBITRATION": 2, "ARBITRATION": 3} {
			got, err := a.Adapt(resolved(code, stage), "")
			if err != nil || len(got) != 1 {
				t.Fatalf("%s at %s: %v, %v", code, stage, got, err)
			}
			if got[0].Kind != want || got[0].Stage != wantStage || got[0].TransactionID != capA || got[0].Amount != 6540 {
				t.Errorf("%s at %s: %s stage %d on %s for %d; want %s stage %d on %s for 6540",
					code, stage, got[0].Kind, got[0].Stage, got[0].TransactionID, got[0].Amount, want, wantStage, capA)
			}
		}
	}
	for name, body := range map[string][]byte{
		"NONE":             resolved("NONE", "CHARGEBACK"),
		"an unknown code":  resolved("RESOLVED_SOMEHOW", "CHARGEBACK"),
		"an unknown stage": resolved("DENIED", "APPEAL"),
		"no outcome":       replaced("customer_dispute_resolved.json", `"dispute_outcome"`, `"outcome"`),
		"no stage":         replaced("customer_dispute_resolved.json", `"dispute_life_cycle_stage"`, `"stage"`),
	} {
		if _, err := a.Adapt(body, ""); !errors.Is(err, payload.ErrInvalid) {
			t.Errorf("%s: %v; want payload.ErrInvalid (422)", name, err)
		}
	}
}

// TestAnAppealsOutcomeDecidesOverTheClaims: a dispute won at the claim
// stage and lost on appeal (PRE_ARBITRATION) is lost, whichever came
// first; lost at the claim and won at arbitration, it is won.
func TestAnAppealsOutcomeDecidesOverTheClaims(t *testing.T) {
	t.Parallel()
	a, err := Provider{}.New(provider.Config{Source: "paypal"})
	if err != nil {
		t.Fatal(err)
	}
	event := func(id, code, stage string) lifecycle.Event {
		t.Helper()
		got, err := a.Adapt(replaced("customer_dispute_resolved.json", "WH-2W7154467N658993B-0AL83124PS6405224", id,
			`"RESOLVED_SELLER_FAVOUR"`, `"`+code+`"`, `"dispute_life_cycle_stage": "CHARGEBACK"`, `"dispute_life_cycle_stage": "`+stage+`"`), "")
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %v, %v", id, got, err)
		}
		e := got[0]
		return lifecycle.Event{Kind: e.Kind, ID: e.EventID, Amount: e.Amount, Currency: e.Currency, Stage: e.Stage, At: e.At}
	}
	captured := lifecycle.Event{Kind: lifecycle.Succeeded, ID: capA, Amount: 6540, Currency: "USD"}
	for _, tc := range []struct {
		name   string
		claim  lifecycle.Event
		appeal lifecycle.Event
		want   lifecycle.Dispute
	}{
		{"won, then lost on appeal", event("WH-1", "RESOLVED_SELLER_FAVOUR", "CHARGEBACK"), event("WH-2", "RESOLVED_BUYER_FAVOUR", "PRE_ARBITRATION"), lifecycle.Lost},
		{"lost, then won at arbitration", event("WH-1", "RESOLVED_BUYER_FAVOUR", "PRE_ARBITRATION"), event("WH-2", "DENIED", "ARBITRATION"), lifecycle.Won},
	} {
		for _, order := range [][]lifecycle.Event{{tc.claim, tc.appeal}, {tc.appeal, tc.claim}} {
			if got := lifecycle.Fold(append([]lifecycle.Event{captured}, order...)).Dispute; got != tc.want {
				t.Errorf("%s (%s first): %v; want %v", tc.name, order[0].ID, got, tc.want)
			}
		}
	}
}

// TestADisputeNamesOneCapture: no seller_transaction_id, or two distinct
// ones, is refused; the same one twice is that capture.
func TestADisputeNamesOneCapture(t *testing.T) {
	t.Parallel()
	a, err := Provider{}.New(provider.Config{Source: "paypal"})
	if err != nil {
		t.Fatal(err)
	}
	const d = "customer_dispute_created.json"
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"none", replaced(d, `"seller_transaction_id": "42311647XV020574X",`, ``), payload.ErrInvalid},
		{"an empty list", replaced(d, `"disputed_transactions": [`, `"disputed_transactions": [], "x": [`), payload.ErrInvalid},
		{"no list", replaced(d, `"disputed_transactions"`, `"transactions"`), payload.ErrInvalid},
		{"two", replaced(d, `"items": [],`, `"items": []}, {"seller_transaction_id": "7NW873794T343360M",`), payload.ErrInvalid},
		{"a number", replaced(d, `"42311647XV020574X"`, `42`), payload.ErrMalformed},
		{"the same twice", replaced(d, `"items": [],`, `"items": []}, {"seller_transaction_id": "42311647XV020574X",`), nil},
	} {
		got, err := a.Adapt(tc.body, "")
		if tc.want == nil {
			if err != nil || len(got) != 1 || got[0].TransactionID != capA || got[0].Kind != lifecycle.DisputeOpened {
				t.Errorf("%s: %v, %v; want one dispute_opened on %s", tc.name, got, err, capA)
			}
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, err, tc.want)
		}
	}
}

// TestAPaymentNamesItsOrderInItsCustomID: the default order pointer reads
// resource.custom_id.
func TestAPaymentNamesItsOrderInItsCustomID(t *testing.T) {
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
	for name, want := range map[string]string{
		"payment_capture_completed.json":     "ORD-5023-4E89",
		"payment_capture_refunded.json":      "ORD-5023-4E89",
		"payment_authorization_created.json": "ORD-5025-0B12",
	} {
		root, err := payload.Decode(sample(name))
		if err != nil {
			t.Fatal(err)
		}
		n, err := ptr.Resolve(root)
		if err != nil || n == nil || n.Kind() != payload.String || n.Text() != want {
			t.Errorf("%s: %s resolves to %v, %v; want %q", name, ptr, n, err, want)
		}
	}
}

// TestTheConformanceSuite runs the adapter conformance suite over paypal
// where its signatures can be made: its samples signed with the test key
// verify against the certificate the allowlisted test host serves, and
// each tampered with does not. Through the real pipeline, a delivery is
// tested by pipeline_test.go.
func TestTheConformanceSuite(t *testing.T) {
	providertest.Run(t, []string{"paypal"})
}
