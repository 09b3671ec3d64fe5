package all_test

import (
	"testing"

	"github.com/paylock/paylock/provider"
	_ "github.com/paylock/paylock/provider/all"
	"github.com/paylock/paylock/provider/providertest"
)

// TestEveryProviderPassesTheAdapterConformanceSuite runs the adapter
// conformance suite over every registered provider, with no server: its
// samples complete, its adapter alone, its signatures at the verifier.
// PayPal's signatures are left to its own package's tests (paylock cannot
// sign them without the test key they set); its samples and adapter are
// checked here. The same samples through the real pipeline, on three
// replicas, are handler's TestEveryProviderPassesThePipelineConformanceSuite.
func TestEveryProviderPassesTheAdapterConformanceSuite(t *testing.T) {
	t.Parallel()
	providertest.Run(t, provider.Names())
}
