package handler_test

import (
	"slices"
	"testing"

	"github.com/paylock/paylock/internal/testkit/pipelinetest"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/stripe"
)

// notConformed are the registered providers the pipeline suite leaves
// out: PayPal, whose deliveries verify only against the test CA of its own
// package's TestMain, so that its pipeline is tested there
// (provider/paypal's pipeline_test.go), and this package's own test
// provider (notice_test.go), which has no samples.
var notConformed = []string{"paypal", "noticetest"}

// TestEveryProviderPassesThePipelineConformanceSuite delivers every
// registered provider's samples through three replicas sharing one
// database and one Redis: each recorded exactly once, whichever replica a
// copy reaches, and nothing written for a tampered or refused body.
func TestEveryProviderPassesThePipelineConformanceSuite(t *testing.T) {
	t.Parallel()
	pipelinetest.Run(t, slices.DeleteFunc(provider.Names(), func(n string) bool { return slices.Contains(notConformed, n) }))
}

// TestThinEventsPassThePipelineConformanceSuite: a stripe source of thin
// events records, through three replicas, what a fake of Stripe's API
// says of each PaymentIntent a thin event names, once.
func TestThinEventsPassThePipelineConformanceSuite(t *testing.T) {
	t.Parallel()
	pipelinetest.RunSamples(t, "stripe", stripe.ThinSamples())
}
