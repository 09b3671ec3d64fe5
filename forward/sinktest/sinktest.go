// Package sinktest is the conformance table every forward sink runs: a sink
// is tested by registering it with its capabilities (forward.RegisterSink,
// forward.Capabilities) and giving the table a Harness, a live destination
// of its kind that can refuse on demand and say what it received.
//
// Every case runs on every sink; none is skipped. Where a case depends on
// a capability, the table checks the capability's promise on a sink that
// declares it and the promise of its absence on one that does not:
//
//   - PermanentRefusals: a permanent refusal says so (forward.ErrPermanent)
//     and the worker does not retry it; without it, no refusal is
//     permanent, and the worker retries a refused forward until its last
//     attempt.
//   - OrderedPerKey: messages of one key arrive in the order they were
//     delivered, in one lane (a Kafka partition); without it, messages of
//     one key delivered at once each arrive once, in any order.
//   - Network: a destination that does not answer is a failed attempt,
//     not an error at opening; without it, a destination that is not
//     there is refused at opening.
//   - Signs: the worker refuses the destination without a secret, and
//     signs every attempt; without it, a worker without a secret sends
//     it unsigned messages.
//
// The table first checks that the harness matches the capabilities (it
// can refuse for good exactly when the sink declares PermanentRefusals,
// NeedsSignature agrees with Signs, TLS only for a networked sink). It
// checks the sink on its own (a message arrives once with its headers,
// unsigned messages carry no signature, a refusal is retryable, then the
// capabilities' cases) and then inside the real forward worker, on River
// over a Postgres schema of the test's own (a recorded payment is
// delivered once; after refusals it is delivered with the same webhook-id
// on every attempt; then the capabilities' cases). Failures name what the
// sink must still do.
package sinktest

import (
	"crypto/tls"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/signature"
)

// Harness is one live destination of the sink under test.
type Harness struct {
	// URL is the destination: its scheme picks the sink. Its host names
	// the destination (host:port for a networked sink, a name for one in
	// this process): the table replaces it to reach one that is not there.
	URL string
	// TLS, when set, is what the sink connects with (a test server's
	// roots). A sink without forward.Capabilities.Network has none.
	TLS *tls.Config
	// Received returns what the destination got so far, in arrival order,
	// refused messages included.
	Received func() []Received
	// Refuse makes the destination refuse the next n messages for now, as
	// a destination that is overloaded or failing does: the sink's Deliver
	// must return an error wrapping forward.ErrRejected, not
	// forward.ErrPermanent. A harness may refuse each time differently
	// (the http one answers 400, 404, 410, 413, 422, 500 in turn), so
	// that the table's "no refusal is permanent" covers them.
	Refuse func(n int)
	// RefusePermanently makes the destination refuse the next message for
	// good: Deliver must return an error wrapping forward.ErrPermanent.
	// Set exactly when the sink declares
	// forward.Capabilities.PermanentRefusals; nil when nothing a
	// destination of this kind answers is permanent (the http sink tries
	// every answer again). The table fails on a mismatch.
	RefusePermanently func()
	// Keyed is true when the destination keeps Message.Key (a broker's
	// partition key); Received.Key is then checked.
	Keyed bool
}

// Received is one message as the destination got it.
type Received struct {
	// Header holds the message's headers by lower-case name
	// (webhook-id, webhook-timestamp, webhook-signature).
	Header map[string]string
	Key    string // Keyed destinations only
	// Lane is where the destination keeps the message in order, for one
	// that keeps more than one order (a Kafka partition: "0", "1"...);
	// "" for one with a single order (a JetStream stream, memory) or none
	// (an http receiver).
	Lane string
	Body []byte
	// Accepted is false for a message the destination refused.
	Accepted bool
}

// Secret signs the table's messages; Verifier checks them.
var Secret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("paylock-sinktest-secret-0123456789"))

func secret(t *testing.T) signature.Secret {
	t.Helper()
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, Secret)
	if err != nil {
		t.Fatal(err)
	}
	return secrets[0]
}

// verify checks r's signature with Secret, as a receiver would.
func verify(t *testing.T, r Received) error {
	t.Helper()
	v, err := signature.NewVerifier(signature.SchemeStandard, []signature.Secret{secret(t)}, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	for k, val := range r.Header {
		h.Set(k, val)
	}
	_, err = v.Verify(h, r.Body)
	return err
}

// Run runs the table over the sink of newHarness's URL. newHarness is
// called once for the sink-level cases and once for the worker's.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	t.Run("sink", func(t *testing.T) {
		h := newHarness(t)
		runSink(t, h, capabilities(t, h))
	})
	t.Run("worker", func(t *testing.T) {
		h := newHarness(t)
		runWorker(t, h, capabilities(t, h))
	})
}

// capabilities returns what the sink of h.URL declared, and fails the test
// when h does not match it: every mismatch is named.
func capabilities(t *testing.T, h Harness) forward.Capabilities {
	t.Helper()
	caps, ok := forward.CapabilitiesOf(h.URL)
	if !ok {
		t.Fatalf("no sink registered for %s: register it with forward.RegisterSink", forward.Redact(h.URL))
	}
	if h.Received == nil || h.Refuse == nil {
		t.Errorf("the harness of %s lacks Received or Refuse: every case needs them", forward.Redact(h.URL))
	}
	if caps.PermanentRefusals && h.RefusePermanently == nil {
		t.Errorf("the sink of %s declares PermanentRefusals, but its harness has no RefusePermanently: give the harness a way to refuse for good, or do not declare it", forward.Redact(h.URL))
	}
	if !caps.PermanentRefusals && h.RefusePermanently != nil {
		t.Errorf("the harness of %s has RefusePermanently, but its sink does not declare PermanentRefusals: declare it (forward.RegisterSink), or drop RefusePermanently", forward.Redact(h.URL))
	}
	if got := forward.NeedsSignature(h.URL); got != caps.Signs {
		t.Errorf("forward.NeedsSignature(%s) = %v, but its sink declares Signs %v: NeedsSignature must read the capabilities", forward.Redact(h.URL), got, caps.Signs)
	}
	if !caps.Network && h.TLS != nil {
		t.Errorf("the harness of %s has a TLS configuration, but its sink does not declare Network", forward.Redact(h.URL))
	}
	if t.Failed() {
		t.FailNow()
	}
	return caps
}

// since returns what h received after the first n messages.
func since(h Harness, n int) []Received {
	got := h.Received()
	if n > len(got) {
		return nil
	}
	return got[n:]
}

// byID returns what h received under webhook-id id.
func byID(h Harness, id string) []Received {
	var out []Received
	for _, r := range h.Received() {
		if r.Header[forward.HeaderID] == id {
			out = append(out, r)
		}
	}
	return out
}
