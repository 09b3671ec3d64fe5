package cli

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestEachSourceSaysWhereItsPaymentsNameTheirOrder(t *testing.T) {
	file := exampleSources + `
  stripe-eu: {adapter: stripe, signature: stripe, secrets_env: STRIPE_EU_SECRETS, orders: {pointer: /data/object/metadata/cart~1id}}
  beta:
    adapter: mapped
    signature: standard
    secrets_env: BETA_SECRETS
    fields: {transaction_id: /id, amount: /amount, currency: /currency}
    orders: {pointer: /order/ref}
  cko: {adapter: checkout, signature: checkout, secrets_env: CKO_SECRETS}
`
	specs, _, _, err := sourcesSetup(t, file, map[string]string{
		"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret,
		"STRIPE_WEBHOOK_SECRETS":  stripeSecret,
		"STRIPE_EU_SECRETS":       "whsec_stripe-eu-secret",
		"ADYEN_HMAC_KEYS":         adyenKey,
		"ACME_WEBHOOK_SECRETS":    acmeSecret,
		"BETA_SECRETS":            "whsec_YmV0YS1zZWNyZXQtMDEyMzQ1Njc4OQ==",
		"CKO_SECRETS":             "cko-webhook-secret-key-0123456789",
		"PAYLOCK_LOAN_SECRETS":    loansSecret,
		"PAYLOCK_FORWARD_SECRETS": forwardSecret,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := orderPointers(specs)
	want := map[string]string{
		"payments":  "order_id",
		"stripe":    "data/object/metadata/order_id",
		"stripe-eu": "data/object/metadata/cart/id", // the file overrides the default; ~1 is a slash inside a token
		"adyen":     "merchantReference",
		"beta":      "order/ref",
		"cko":       "data/reference", // the provider's own default (provider.OrderNamer)
		// acme (mapped, no orders key) and loans name no order.
	}
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("sources linking orders: %v; want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for name, w := range want {
		if g := strings.Join(got[name], "/"); g != w {
			t.Errorf("%s: tokens %q; want %q", name, g, w)
		}
	}
	if tok := got["stripe-eu"]; len(tok) != 4 || tok[3] != "cart/id" {
		t.Errorf("stripe-eu's last token %q; want the unescaped cart/id", tok)
	}
}
