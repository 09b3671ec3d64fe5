package forward_test

import (
	"testing"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/forward/sinktest"
)

// harnesses holds each registered sink's conformance harness, by scheme:
// a sink's test file adds its own in an init function.
var harnesses = map[string]func(t *testing.T) sinktest.Harness{}

// Every registered sink runs the conformance table; one without a harness
// fails here.
func TestEverySinkPassesTheConformanceTable(t *testing.T) {
	t.Parallel()
	for _, scheme := range forward.Schemes() {
		newHarness, ok := harnesses[scheme]
		if !ok {
			t.Errorf("sink %q has no conformance harness: add one to harnesses in its test file (see http_test.go)", scheme)
			continue
		}
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			sinktest.Run(t, newHarness)
		})
	}
}
