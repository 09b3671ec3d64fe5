package checkout

import (
	"testing"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// TestAPaymentNamesItsOrderInItsReference: the default order pointer reads
// data.reference of Checkout.com's payment events.
func TestAPaymentNamesItsOrderInItsReference(t *testing.T) {
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
		"payment_approved.json": "ORD-5023-4E89",
		"payment_captured.json": "ORD-5023-4E89",
		"payment_voided.json":   "ORD-5024-77AA",
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
