// Package pipelinetest is the pipeline conformance suite of paylock's
// providers: Run delivers each registered provider's Samples through the
// real webhook pipeline, three replicas of package handler sharing one
// Postgres database and one Redis (internal/testkit/paylocktest: a schema
// and lock keys of the test's own), and checks what a provider's author
// promises:
//
//   - every sample delivery, signed with the provider's first scheme, is
//     accepted (2xx, or the provider's own acknowledgement) and records
//     exactly its events: transaction id, amount, currency, event id and
//     stored payload; delivered again, to another replica, it records
//     nothing more;
//   - the same delivery tampered with is refused 401 and writes nothing,
//     takes no lock;
//   - every refused sample, and bodies no provider accepts (not JSON, an
//     array, trailing data), is answered with its 400 or 422 problem and
//     writes nothing, takes no lock.
//
// Delivery i, its tampered form and refused body i go to replica i%3, and
// a delivery delivered again to the next replica: the promises hold across
// processes, not only within one.
//
// A Notifier provider's samples go through the notifier suite instead
// (notices.go): its webhooks name payments fetched from a fake of its API.
//
// What needs no server (the samples complete, the adapter alone, the
// signatures at the verifier) is provider/providertest's, whose Subject
// this suite reads the samples through. This package imports every
// provider (through paylocktest), so no provider package's tests may
// import it; handler's tests run it.
package pipelinetest

import (
	"testing"

	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

// replicas is how many replicas each provider's samples are delivered to.
const replicas = 3

// Run runs the suite over the providers registered under names, each in
// a parallel subtest of its own.
func Run(t *testing.T, names []string) {
	t.Helper()
	if len(names) == 0 {
		t.Fatal("pipelinetest: no provider to run the suite on")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := providertest.Lookup(t, name)
			run(t, providertest.NewSubject(t, name, p, p.Samples()))
		})
	}
}

// RunSamples runs the suite over the provider registered as name with
// samples s rather than its Samples: a second form of its sources (a
// stripe source of thin events, say).
func RunSamples(t *testing.T, name string, s provider.Samples) {
	t.Helper()
	run(t, providertest.NewSubject(t, name, providertest.Lookup(t, name), s))
}

// run is the suite of one subject: a notifier's (notices.go) when its
// adapter is a provider.Notifier.
func run(t *testing.T, s *providertest.Subject) {
	if s.Notifier {
		runNotifier(t, s)
		return
	}
	e := start(t, s)
	for i, d := range s.Samples.Deliveries {
		t.Run("delivery "+d.Name, func(t *testing.T) {
			e.tampered(t, i, d)
			e.authentic(t, i, d)
		})
	}
	for i, r := range s.Refusals() {
		t.Run("refused "+r.Name, func(t *testing.T) { e.refused(t, i, r) })
	}
}
