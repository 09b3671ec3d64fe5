package testkit

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakereceiver"
	"github.com/paylock/paylock/signature"
)

// ReceiverSecret is the Standard Webhooks secret a Receiver verifies with
// when its config names no verifier.
const ReceiverSecret = "whsec_dGVzdGtpdC1yZWNlaXZlci1zZWNyZXQtMDEyMzQ1Njc4OQ=="

// ReceiverConfig configures StartReceiver. Its fields are those of
// fakereceiver.Config (see there), plus Front.
type ReceiverConfig struct {
	Verifier  *signature.Verifier // default: Standard Webhooks over ReceiverSecret
	FailFirst int
	// FailFirstRate fails the first attempt of this fraction of the
	// webhook-ids (fakereceiver.Config.FailFirstRate).
	FailFirstRate float64
	DropRate      float64
	Answers       []int
	OtherEvents   bool
	// Front, when set, wraps the receiver: it sees every request first (a
	// second verifier, a recorder) and passes it on.
	Front func(next http.Handler) http.Handler
}

// Receiver is a fakereceiver.Receiver served on a test server: a team's
// downstream service that verifies every delivery.
type Receiver struct {
	*fakereceiver.Receiver
	URL string // the server's base URL; any path receives
}

// StartReceiver serves a fake receiver configured by cfg until the test
// ends. It keeps every attempt (Attempts).
func StartReceiver(t testing.TB, cfg ReceiverConfig) *Receiver {
	t.Helper()
	if cfg.Verifier == nil {
		cfg.Verifier = Verifier(t, signature.SchemeStandard, ReceiverSecret)
	}
	r, err := fakereceiver.New(fakereceiver.Config{
		Verifier: cfg.Verifier, FailFirst: cfg.FailFirst, FailFirstRate: cfg.FailFirstRate, DropRate: cfg.DropRate,
		Answers: cfg.Answers, OtherEvents: cfg.OtherEvents, KeepAttempts: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = r
	if cfg.Front != nil {
		h = cfg.Front(r)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Receiver{Receiver: r, URL: srv.URL}
}

// WaitAttempts waits until the receiver has had n attempts (at most 15s)
// and returns them.
func (r *Receiver) WaitAttempts(t testing.TB, n int) []fakereceiver.Attempt {
	t.Helper()
	WaitFor(t, 15*time.Second, "the receiver's attempts", func() bool { return len(r.Attempts()) >= n })
	return r.Attempts()
}

// Verifier returns a verifier of scheme for secrets, written as the
// environment writes them (comma-separated), with the default tolerance.
func Verifier(t testing.TB, scheme signature.Scheme, secrets string) *signature.Verifier {
	t.Helper()
	s, err := signature.ParseSecrets(scheme, secrets)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(scheme, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
