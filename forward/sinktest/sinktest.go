// Package sinktest is the conformance table every forward sink runs: a sink
// is tested by registering it (forward.RegisterSink) and giving the table a
// Harness, a live destination of its kind that can refuse on demand and say
// what it received.
//
// The table checks the sink on its own (a message arrives once with its
// headers, unsigned messages carry no signature, a refusal is retryable, a
// permanent refusal says so) and then inside the real forward worker, on
// River over a Postgres schema of the test's own (a recorded payment is
// delivered once; after refusals it is delivered with the same webhook-id
// on every attempt; a permanent refusal is not retried). Failures name
// what the sink must still do.
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
	// URL is the destination: its scheme picks the sink.
	URL string
	// TLS, when set, is what the sink connects with (a test server's roots).
	TLS *tls.Config
	// Received returns what the destination got so far, in arrival order,
	// refused messages included.
	Received func() []Received
	// Refuse makes the destination refuse the next n messages for now, as
	// a destination that is overloaded or failing does: the sink's Deliver
	// must return an error that is not forward.ErrPermanent.
	Refuse func(n int)
	// RefusePermanently makes the destination refuse the next message for
	// good: Deliver must return an error wrapping forward.ErrPermanent. nil
	// when nothing a destination of this kind answers is permanent (the
	// http sink tries every answer again); the cases that need it are then
	// skipped, saying so.
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
	Body   []byte
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
	t.Run("sink", func(t *testing.T) { runSink(t, newHarness(t)) })
	t.Run("worker", func(t *testing.T) { runWorker(t, newHarness(t)) })
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
