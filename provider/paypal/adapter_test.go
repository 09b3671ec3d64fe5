package paypal

import (
	"errors"
	"testing"

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
