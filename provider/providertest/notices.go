package providertest

import (
	"slices"
	"testing"

	"github.com/paylock/paylock/provider"
)

// The suite of a Notifier provider (provider.Notifier), whose webhooks
// name payments that the pipeline fetches from the provider's API. Its
// Samples.Deliveries are the API's answers, each for its Ref; its
// Samples.Notices are the webhooks. The adapter alone reads each API
// answer into its events, byte for byte, each notice into its refs, and
// refuses each refused body; each notice's signature is checked as a
// delivery's is (suite.go). What the pipeline then does with them (fetch
// each named payment, record it once) is internal/testkit/pipelinetest's.

// noticesAlone checks the adapter on its own: each API answer becomes its
// events, each notice its refs, each refused body its error.
func noticesAlone(t *testing.T, s *Subject) {
	n, ok := s.Adapter(t).(provider.Notifier)
	if !ok {
		t.Fatal("the adapter is not a provider.Notifier")
	}
	for _, d := range s.Samples.Deliveries {
		got, err := n.Adapt(d.Body, "")
		if err != nil {
			t.Fatalf("API answer %q: %v", d.Name, err)
		}
		CheckAdapted(t, got, nil)
		WantEvents(t, got, Wanted(d))
	}
	for i, ns := range s.Samples.Notices {
		got, err := n.Notices(ns.Body, s.NoticeID(i))
		if err != nil {
			t.Fatalf("notice %q: %v", ns.Name, err)
		}
		refs := make([]string, len(got))
		for j, g := range got {
			refs[j] = g.Ref
		}
		if !slices.Equal(refs, ns.Refs) {
			t.Fatalf("notice %q names %q, want %q", ns.Name, refs, ns.Refs)
		}
	}
	for _, r := range s.Refusals() {
		got, err := n.Notices(r.Body, "")
		if got != nil || err == nil {
			t.Fatalf("refused sample %q: noticed %+v, %v", r.Name, got, err)
		}
		WantRefused(t, err, r.Status, "*")
	}
}
