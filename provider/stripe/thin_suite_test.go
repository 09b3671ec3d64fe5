package stripe_test

import (
	"testing"

	"github.com/paylock/paylock/provider/providertest"
	"github.com/paylock/paylock/provider/stripe"
)

// A stripe source of thin events passes the adapter conformance suite:
// each API answer reads into its events, each thin event names the
// PaymentIntent it is about, and each is signed as Stripe signs. Through
// the real pipeline, its notices fetch what they name from a fake of
// Stripe's API (handler's TestThinEventsPassThePipelineConformanceSuite).
func TestThinEventsPassTheConformanceSuite(t *testing.T) {
	t.Parallel()
	providertest.RunSamples(t, "stripe", stripe.ThinSamples())
}
