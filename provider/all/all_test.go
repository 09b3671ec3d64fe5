package all_test

import (
	"testing"

	"github.com/paylock/paylock/provider"
	_ "github.com/paylock/paylock/provider/all"
	"github.com/paylock/paylock/provider/providertest"
)

// TestEveryProviderPassesTheConformanceSuite runs the one conformance suite
// over every registered provider, through the real pipeline.
func TestEveryProviderPassesTheConformanceSuite(t *testing.T) {
	t.Parallel()
	providertest.Run(t, provider.Names())
}
