// Package providertest is the adapter conformance suite of paylock's
// providers: Run checks each registered provider's Samples against its
// adapter and its signature scheme alone, with no server, no Postgres and
// no Redis, so that a provider's own `go test` runs it. It checks what a
// provider's author promises:
//
//   - the samples are complete: a scheme and a secret of it (none for a
//     provider.SignsNothing provider), a delivery that records something,
//     refusals of status 400 or 422, and for a Notifier notices whose refs
//     its API's answers cover; a failure says what is still missing;
//   - the adapter alone turns each sample delivery into exactly its
//     events, byte for byte, and refuses each refused sample, and bodies
//     no provider accepts (not JSON, an array, trailing data), with its
//     status; a Notifier's adapter reads each API answer into its events,
//     each notice into the refs it names, and refuses each refused body;
//   - the signature: each sample delivery (a Notifier's: each notice)
//     signed with signature.Sign and Samples.Secret verifies with
//     signature.NewVerifier over its raw bytes, and the same body with a
//     byte added (or Delivery.Tampered) does not, with one of signature's
//     errors (ErrMissingHeader, ErrMalformed, ErrTimestamp, ErrNoMatch).
//     A scheme that signs inside the body (Adyen) verifies the sample
//     bodies as they come, signed already, and every delivery must give
//     Tampered. A provider that signs nothing has nothing to verify.
//
// A scheme paylock cannot sign with (signature.TrySign's error: PayPal's
// RSA, whose private key only PayPal holds) has its signatures checked by
// its own package's tests, which sign with a test key: where signing
// fails, Run checks the provider's samples and adapter and logs that it
// checked no signature.
//
// The same samples through the real webhook pipeline (package handler,
// Postgres, Redis, three replicas) are the pipeline conformance,
// internal/testkit/pipelinetest, which reads them through the same
// Subject. A provider package's tests cannot import it: it imports every
// provider.
//
// The check helpers (WantEvents, WantRefused, CheckAdapted) are for a
// provider's own unit tests.
package providertest

import (
	"errors"
	"slices"
	"testing"

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
			p := Lookup(t, name)
			run(t, NewSubject(t, name, p, p.Samples()))
		})
	}
}

// RunSamples runs the suite over the provider registered as name with
// samples s rather than its Samples: a second form of its sources (a
// stripe source of thin events, say).
func RunSamples(t *testing.T, name string, s provider.Samples) {
	t.Helper()
	run(t, NewSubject(t, name, Lookup(t, name), s))
}

// run is the suite of one subject: a notifier's (notices.go) when its
// adapter is a provider.Notifier.
func run(t *testing.T, s *Subject) {
	if s.Notifier {
		t.Run("the adapter alone", func(t *testing.T) { noticesAlone(t, s) })
	} else {
		t.Run("the adapter alone", func(t *testing.T) { adaptAlone(t, s) })
	}
	signed := signedBodies(s)
	if len(signed) == 0 {
		return // a provider that signs nothing
	}
	if _, err := s.Sign(signed[0].id, signed[0].body); err != nil {
		t.Logf("no signature checked: %v (the provider's own tests sign with a test key)", err)
		return
	}
	v := s.Verifier(t)
	for _, b := range signed {
		t.Run("signature of "+b.name, func(t *testing.T) { checkSignature(t, s, v, b) })
	}
}

// adaptAlone checks the adapter on its own: each delivery becomes its
// events byte for byte, each refused body its error.
func adaptAlone(t *testing.T, s *Subject) {
	a := s.Adapter(t)
	for i, d := range s.Samples.Deliveries {
		got, err := a.Adapt(d.Body, s.DeliveryID(i))
		if err != nil {
			t.Fatalf("delivery %q: %v", d.Name, err)
		}
		CheckAdapted(t, got, nil)
		WantEvents(t, got, Wanted(d))
	}
	for _, r := range s.Refusals() {
		got, err := a.Adapt(r.Body, "")
		if got != nil || err == nil {
			t.Fatalf("refused sample %q: adapted to %+v, %v", r.Name, got, err)
		}
		WantRefused(t, err, r.Status, "*")
	}
}

// signedBody is a body the provider signs: a delivery, or a Notifier's
// notice, with the webhook-id it is signed with and itself tampered with.
type signedBody struct {
	name           string
	id             string
	body, tampered []byte
}

// signedBodies are the bodies of s whose signature the suite checks: none
// for a provider that signs nothing.
func signedBodies(s *Subject) []signedBody {
	if !s.Signed {
		return nil
	}
	var out []signedBody
	if s.Notifier {
		for i, n := range s.Samples.Notices {
			out = append(out, signedBody{name: "notice " + n.Name, id: s.NoticeID(i), body: n.Body,
				tampered: append(append([]byte{}, n.Body...), ' ')})
		}
		return out
	}
	for i, d := range s.Samples.Deliveries {
		out = append(out, signedBody{name: "delivery " + d.Name, id: s.DeliveryID(i), body: d.Body, tampered: Tampered(d)})
	}
	return out
}

// verifyErrors are the errors a refused signature wraps, one of them.
var verifyErrors = []error{signature.ErrMissingHeader, signature.ErrMalformed, signature.ErrTimestamp, signature.ErrNoMatch}

// checkSignature checks b at the verifier: signed with Samples.Secret
// (headers, or the body itself for a scheme that signs inside it), its raw
// bytes verify; the tampered body under the same headers does not.
func checkSignature(t *testing.T, s *Subject, v *signature.Verifier, b signedBody) {
	h, err := s.Sign(b.id, b.body)
	if err != nil {
		t.Fatalf("signing with %s: %v", s.Scheme, err)
	}
	if _, err := v.Verify(h.Clone(), b.body); err != nil {
		t.Fatalf("signed with Samples.Secret, it does not verify: %v", err)
	}
	_, err = v.Verify(h.Clone(), b.tampered)
	if err == nil {
		t.Fatal("tampered with, it still verifies")
	}
	if !slices.ContainsFunc(verifyErrors, func(want error) bool { return errors.Is(err, want) }) {
		t.Fatalf("tampered with, it is refused with %v, which wraps none of signature's errors", err)
	}
}
