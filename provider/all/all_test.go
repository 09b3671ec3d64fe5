package all_test

import (
	"slices"
	"testing"

	"github.com/paylock/paylock/provider"
	_ "github.com/paylock/paylock/provider/all"
	"github.com/paylock/paylock/provider/providertest"
)

// TestEveryProviderPassesTheConformanceSuite runs the one conformance suite
// over every registered provider, through the real pipeline. PayPal's
// runs in its own package (provider/paypal's TestTheConformanceSuite):
// its deliveries verify only against a certificate fetched from an
// allowlisted host, which there is that package's test CA and TLS server.
func TestEveryProviderPassesTheConformanceSuite(t *testing.T) {
	t.Parallel()
	providertest.Run(t, slices.DeleteFunc(provider.Names(), func(n string) bool { return n == "paypal" }))
}
