package providertest

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

// A Subject is one provider under a conformance suite: its samples,
// checked complete, and how the suites sign them. This package's Run and
// the pipeline conformance (internal/testkit/pipelinetest) both build on
// it, so that the two read a provider's samples alike.
type Subject struct {
	// Name is the name the provider is registered under.
	Name     string
	Provider provider.Provider
	Samples  provider.Samples
	// Notifier says the provider's adapter is a provider.Notifier: its
	// Samples.Deliveries are its API's answers, each for its Ref, and its
	// Samples.Notices the webhooks that name them.
	Notifier bool
	// Signed is false for a provider that signs nothing
	// (provider.SignsNothing); Scheme and Secret are then zero. Otherwise
	// Scheme is the provider's first scheme and Secret Samples.Secret
	// parsed for it.
	Signed bool
	Scheme signature.Scheme
	Secret signature.Secret
}

// adapterSource is the source name the suites' adapters are built with
// (provider.Config.Source, for messages).
const adapterSource = "conformance"

// NewSubject returns the provider p, registered as name, under samples s
// (its own Samples, or a second form of its sources such as Stripe's thin
// events). It fails t, saying what is missing, unless s gives the suites
// what they need: see checkDeliveries and checkNotices.
func NewSubject(t testing.TB, name string, p provider.Provider, s provider.Samples) *Subject {
	t.Helper()
	sub := &Subject{Name: name, Provider: p, Samples: s}
	_, sub.Notifier = sub.Adapter(t).(provider.Notifier)
	if sub.Notifier {
		sub.checkNotices(t)
	} else {
		sub.checkDeliveries(t)
	}
	return sub
}

// Lookup returns the provider registered as name, failing t if there is
// none.
func Lookup(t testing.TB, name string) provider.Provider {
	t.Helper()
	p, ok := provider.Lookup(name)
	if !ok {
		t.Fatalf("no provider is registered as %q", name)
	}
	return p
}

// Adapter returns the adapter of a source of the provider with
// Samples.Settings, under payment rules with no default currency that
// admit no non-tender code.
func (s *Subject) Adapter(t testing.TB) provider.Adapter {
	t.Helper()
	a, err := s.Provider.New(provider.Config{Source: adapterSource, Settings: s.Samples.Settings, Rules: payload.NewRules("", nil)})
	if err != nil {
		t.Fatalf("New(Samples.Settings): %v", err)
	}
	return a
}

// checkDeliveries fails t unless the samples of a provider whose webhooks
// carry payments are complete: a first scheme and one secret of it, a
// delivery that records something, transaction ids on every event,
// Tampered on every delivery of a scheme that signs inside the body, and
// refusals of status 400 or 422.
func (s *Subject) checkDeliveries(t testing.TB) {
	t.Helper()
	if len(s.Provider.Schemes()) == 0 {
		t.Fatal("Schemes is empty: name the signature scheme(s) the provider's sources use")
	}
	s.parseSecret(t)
	recorded := false
	for _, d := range s.Samples.Deliveries {
		recorded = recorded || len(d.Events) > 0
		if s.InBody() && d.Tampered == nil {
			t.Fatalf("delivery %q: scheme %s signs inside the body: give Tampered, the body with a signed value changed", d.Name, s.Scheme)
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
	s.checkRefused(t)
}

// checkNotices fails t unless a Notifier's samples are complete: notices,
// each API answer for a Ref of its own, every ref a notice names answered,
// at least one named, refusals of status 400 or 422, and a first scheme
// and one secret of it unless the provider signs nothing.
func (s *Subject) checkNotices(t testing.TB) {
	t.Helper()
	if len(s.Samples.Notices) == 0 {
		t.Fatal("a Notifier's Samples.Notices is empty: add the webhooks it sends, with the refs each names")
	}
	refs := map[string]bool{}
	for _, d := range s.Samples.Deliveries {
		if d.Ref == "" || refs[d.Ref] {
			t.Fatalf("delivery %q: a Notifier's deliveries are its API's answers, each for its own Ref (got %q)", d.Name, d.Ref)
		}
		refs[d.Ref] = true
	}
	named := false
	for _, n := range s.Samples.Notices {
		for _, r := range n.Refs {
			if !refs[r] {
				t.Fatalf("notice %q names %q, which no delivery answers", n.Name, r)
			}
			named = true
		}
	}
	if !named {
		t.Fatal("no notice names a payment: add one the API answers")
	}
	s.checkRefused(t)
	if _, ok := s.Provider.(provider.SignsNothing); ok {
		if len(s.Provider.Schemes()) != 0 || s.Samples.Secret != "" {
			t.Fatal("a provider that signs nothing has no Schemes and no Samples.Secret")
		}
		return
	}
	if len(s.Provider.Schemes()) == 0 {
		t.Fatal("Schemes is empty: name the signature scheme(s) the provider's sources use, or implement provider.SignsNothing")
	}
	s.parseSecret(t)
}

// parseSecret sets Scheme and Secret, failing t unless Samples.Secret is
// one secret of the provider's first scheme.
func (s *Subject) parseSecret(t testing.TB) {
	t.Helper()
	scheme := s.Provider.Schemes()[0]
	secrets, err := signature.ParseSecrets(scheme, s.Samples.Secret)
	if err != nil || len(secrets) != 1 {
		t.Fatalf("Samples.Secret is not one secret of scheme %s (Schemes()[0]): %v", scheme, err)
	}
	s.Signed, s.Scheme, s.Secret = true, scheme, secrets[0]
}

// checkRefused fails t unless every refused sample's status is 400 or 422.
func (s *Subject) checkRefused(t testing.TB) {
	t.Helper()
	for _, r := range s.Samples.Refused {
		if r.Status != http.StatusBadRequest && r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("refused sample %q: Status %d, want 400 or 422", r.Name, r.Status)
		}
	}
}

// InBody reports whether the provider's scheme signs inside the body
// (Adyen) rather than in headers: its sample bodies come signed.
func (s *Subject) InBody() bool { return s.Signed && signature.SignsInBody(s.Scheme) }

// Verifier returns the verifier of the provider's sources: its scheme,
// Samples.Secret, the default tolerance. It fails t for a provider that
// signs nothing.
func (s *Subject) Verifier(t testing.TB) *signature.Verifier {
	t.Helper()
	if !s.Signed {
		t.Fatalf("%s signs nothing: its sources have no verifier", s.Name)
	}
	v, err := signature.NewVerifier(s.Scheme, []signature.Secret{s.Secret}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Sign returns the signature headers of body for delivery id, signed now
// with Samples.Secret: none for a provider that signs nothing or a scheme
// that signs inside the body. Its error is signature.TrySign's, for a
// scheme paylock cannot sign with (PayPal's, outside its package's tests).
func (s *Subject) Sign(id string, body []byte) (http.Header, error) {
	if !s.Signed || s.InBody() {
		return http.Header{}, nil
	}
	return signature.TrySign(s.Scheme, s.Secret, id, time.Now(), body)
}

// DeliveryID is the webhook-id the suites sign delivery i with: "" for a
// scheme whose headers carry none, else the delivery's HeaderID or one
// the suite makes up.
func (s *Subject) DeliveryID(i int) string {
	switch d := s.Samples.Deliveries[i]; {
	case s.Scheme != signature.SchemeStandard:
		return ""
	case d.HeaderID != "":
		return d.HeaderID
	}
	return fmt.Sprintf("msg_%s_sample_%d", s.Name, i)
}

// NoticeID is the webhook-id the suites sign notice i with, as
// DeliveryID.
func (s *Subject) NoticeID(i int) string {
	switch n := s.Samples.Notices[i]; {
	case s.Scheme != signature.SchemeStandard:
		return ""
	case n.HeaderID != "":
		return n.HeaderID
	}
	return fmt.Sprintf("msg_%s_notice_%d", s.Name, i)
}

// Refusals are the bodies the suites deliver for refusal: the refused
// samples, then, for a provider whose webhooks carry payments, bodies no
// provider accepts (not JSON, an array, trailing data) built around its
// first delivery.
func (s *Subject) Refusals() []provider.Refusal {
	out := append([]provider.Refusal{}, s.Samples.Refused...)
	if s.Notifier || len(s.Samples.Deliveries) == 0 {
		return out
	}
	first := s.Samples.Deliveries[0].Body
	return append(out,
		provider.Refusal{Name: "not JSON", Body: []byte(`{"a":`), Status: http.StatusBadRequest},
		provider.Refusal{Name: "an array", Body: append(append([]byte("["), first...), ']'), Status: http.StatusBadRequest},
		provider.Refusal{Name: "trailing data", Body: append(append([]byte{}, first...), "{}"...), Status: http.StatusBadRequest},
	)
}

// Wanted are d's events, an absent payload standing for the whole body.
func Wanted(d provider.Delivery) []provider.Event {
	out := make([]provider.Event, len(d.Events))
	for i, ev := range d.Events {
		if ev.Payload == nil {
			ev.Payload = d.Body
		}
		out[i] = ev
	}
	return out
}

// Tampered is d's body with a signed value changed: d.Tampered, or the
// body with a byte added (enough for every scheme that signs the whole
// body).
func Tampered(d provider.Delivery) []byte {
	if d.Tampered != nil {
		return d.Tampered
	}
	return append(append([]byte{}, d.Body...), ' ')
}
