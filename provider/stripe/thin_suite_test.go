package stripe_test

import (
	"testing"

	"github.com/paylock/paylock/provider/providertest"
	"github.com/paylock/paylock/provider/stripe"
)

// A stripe source of thin events passes the notifier suite: each thin
// event fetches the PaymentIntent it names and records what Stripe's API
// says of it, through the real pipeline.
func TestThinEventsPassTheConformanceSuite(t *testing.T) {
	t.Parallel()
	providertest.RunSamples(t, "stripe", stripe.ThinSamples())
}
