// Package providertest is the one conformance suite of paylock's
// providers: Run delivers each registered provider's Samples through the
// real webhook pipeline (package handler) to a real Postgres and Redis
// (internal/testkit: a schema and lock keys of the test's own), and checks
// what a provider's author promises:
//
//   - every sample delivery, signed with the provider's first scheme, is
//     accepted (2xx, or the provider's own acknowledgement) and records
//     exactly its events: transaction id, amount, currency, event id and
//     stored payload; delivered again, it records nothing more;
//   - the same delivery tampered with is refused 401 and writes nothing;
//   - every refused sample, and bodies no provider accepts (not JSON, an
//     array, trailing data), is answered with its 400 or 422 problem and
//     writes nothing, takes no lock;
//   - the adapter alone turns each sample into the same events, byte for
//     byte, and refuses each refused sample with its status.
//
// A Notifier provider's samples go through the notifier suite instead
// (notices.go): its webhooks name payments fetched from a fake of its API.
//
// A failure says which sample broke which promise, or what the samples
// still lack. The check helpers (WantEvents, WantRefused, CheckAdapted) are
// for a provider's own unit tests.
package providertest

import (
	"fmt"
	"testing"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

// Run runs the suite over the providers registered under names (all of
// them: provider.Names()), each in a parallel subtest of its own.
func Run(t *testing.T, names []string) {
	t.Helper()
	if len(names) == 0 {
		t.Fatal("providertest: no provider to run the suite on (import provider/all)")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, ok := provider.Lookup(name)
			if !ok {
				t.Fatalf("no provider is registered as %q", name)
			}
			runProvider(t, name, p)
		})
	}
}

// RunSamples runs the suite over the provider registered as name with
// samples s rather than its Samples: a second form of its sources (a
// stripe source of thin events, say).
func RunSamples(t *testing.T, name string, s provider.Samples) {
	t.Helper()
	p, ok := provider.Lookup(name)
	if !ok {
		t.Fatalf("no provider is registered as %q", name)
	}
	runSamples(t, name, p, s)
}

// runProvider is the suite of one provider.
func runProvider(t *testing.T, name string, p provider.Provider) {
	runSamples(t, name, p, p.Samples())
}

// runSamples is the suite of one provider with samples s: a notifier's
// (notices.go) when its adapter is a provider.Notifier.
func runSamples(t *testing.T, name string, p provider.Provider, s provider.Samples) {
	if a, err := p.New(provider.Config{Source: signedSource, Settings: s.Settings, Rules: payload.NewRules("", nil)}); err == nil {
		if _, ok := a.(provider.Notifier); ok {
			runNotifier(t, name, p, s)
			return
		}
	}
	e := start(t, name, p, s)
	t.Run("the adapter alone", func(t *testing.T) { e.adaptAlone(t) })
	for i, d := range s.Deliveries {
		t.Run("delivery "+d.Name, func(t *testing.T) {
			e.tampered(t, i, d)
			e.authentic(t, i, d)
		})
	}
	for _, r := range e.refusals() {
		t.Run("refused "+r.Name, func(t *testing.T) { e.refused(t, r) })
	}
}

// checkSamples fails unless s gives the suite what it needs, saying what
// is missing.
func checkSamples(t *testing.T, p provider.Provider, s provider.Samples) (signature.Scheme, signature.Secret) {
	t.Helper()
	if len(p.Schemes()) == 0 {
		t.Fatal("Schemes is empty: name the signature scheme(s) the provider's sources use")
	}
	scheme := p.Schemes()[0]
	secrets, err := signature.ParseSecrets(scheme, s.Secret)
	if err != nil || len(secrets) != 1 {
		t.Fatalf("Samples.Secret is not one secret of scheme %s (Schemes()[0]): %v", scheme, err)
	}
	recorded := false
	for _, d := range s.Deliveries {
		recorded = recorded || len(d.Events) > 0
		if inBody(scheme) && d.Tampered == nil {
			t.Fatalf("delivery %q: scheme %s signs inside the body: give Tampered, the body with a signed value changed", d.Name, scheme)
		}
		for _, e := range d.Events {
			if e.TransactionID == "" {
				t.Fatalf("delivery %q: an event without a transaction id", d.Name)
			}
		}
	}
	if !recorded {
		t.Fatal("Samples.Deliveries record nothing: add a delivery with the events it must record")
	}
	for _, r := range s.Refused {
		if r.Status != 400 && r.Status != 422 {
			t.Fatalf("refused sample %q: Status %d, want 400 or 422", r.Name, r.Status)
		}
	}
	return scheme, secrets[0]
}

// inBody reports whether scheme signs inside the body (Adyen) rather than
// in headers.
func inBody(scheme signature.Scheme) bool { return signature.SignsInBody(scheme) }

// refusals are the provider's refused samples, then bodies no provider
// accepts, built around its first delivery.
func (e *env) refusals() []provider.Refusal {
	first := e.samples.Deliveries[0].Body
	return append(append([]provider.Refusal{}, e.samples.Refused...),
		provider.Refusal{Name: "not JSON", Body: []byte(`{"a":`), Status: 400},
		provider.Refusal{Name: "an array", Body: append(append([]byte("["), first...), ']'), Status: 400},
		provider.Refusal{Name: "trailing data", Body: append(append([]byte{}, first...), "{}"...), Status: 400},
	)
}

// adaptAlone checks the adapter on its own: each delivery becomes its
// events byte for byte, each refused body its error.
func (e *env) adaptAlone(t *testing.T) {
	a, err := e.p.New(provider.Config{Source: signedSource, Settings: e.samples.Settings, Rules: payload.NewRules("", nil)})
	if err != nil {
		t.Fatalf("New(Samples.Settings): %v", err)
	}
	for i, d := range e.samples.Deliveries {
		got, err := a.Adapt(d.Body, e.headerID(i, d))
		if err != nil {
			t.Fatalf("delivery %q: %v", d.Name, err)
		}
		CheckAdapted(t, got, nil)
		WantEvents(t, got, wanted(d))
	}
	for _, r := range e.refusals() {
		got, err := a.Adapt(r.Body, "")
		if got != nil || err == nil {
			t.Fatalf("refused sample %q: adapted to %+v, %v", r.Name, got, err)
		}
		WantRefused(t, err, r.Status, "*")
	}
}

// wanted are d's events, an absent payload standing for the whole body.
func wanted(d provider.Delivery) []provider.Event {
	out := make([]provider.Event, len(d.Events))
	for i, ev := range d.Events {
		if ev.Payload == nil {
			ev.Payload = d.Body
		}
		out[i] = ev
	}
	return out
}

// headerID is the webhook-id the suite signs delivery i with, "" for a
// scheme whose headers carry none.
func (e *env) headerID(i int, d provider.Delivery) string {
	switch {
	case e.scheme != signature.SchemeStandard:
		return ""
	case d.HeaderID != "":
		return d.HeaderID
	}
	return fmt.Sprintf("msg_%s_sample_%d", e.name, i)
}
