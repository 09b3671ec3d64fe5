package paypal

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

// FuzzPayPalHeaders feeds the verifier any transmission id, time,
// signature and cert URL: it never panics, every refusal wraps
// ErrInvalid, it fetches nothing off the allowlist, and it accepts only
// the authentic delivery's headers.
func FuzzPayPalHeaders(f *testing.F) {
	body := sample("payment_capture_completed.json")
	good := signed(f, sampleWebhookID, time.Now(), body, "")
	g := func(k string) string { return good.Get(k) }
	f.Add(g(HeaderTransmissionID), g(HeaderTransmissionTime), g(HeaderTransmissionSig), g(HeaderCertURL))
	f.Add("a|b", g(HeaderTransmissionTime), g(HeaderTransmissionSig), g(HeaderCertURL))
	f.Add(g(HeaderTransmissionID), "2025-13-01T00:00:00Z", "", "https://evil.example/cert")
	f.Add(g(HeaderTransmissionID), g(HeaderTransmissionTime), "AAAA", "http://169.254.169.254/latest")
	f.Add("", "", "", "https://user@api.paypal.com:8443/x")
	v := verifier(f, sampleWebhookID)
	f.Fuzz(func(t *testing.T, id, ts, sig, certURL string) {
		h := http.Header{}
		for k, val := range map[string]string{HeaderTransmissionID: id, HeaderTransmissionTime: ts,
			HeaderTransmissionSig: sig, HeaderCertURL: certURL, HeaderAuthAlgo: AuthAlgo} {
			if val != "" {
				h.Set(k, val)
			}
		}
		if _, err := currentFetcher().allowed(certURL); err != nil {
			// A URL off the allowlist must be refused with no fetch; the
			// test hosts' counters are the proof in the scheme tests, here
			// the refusal's kind is.
			if _, verr := v.Verify(h, body); !errors.Is(verr, ErrCertURL) && !errors.Is(verr, signature.ErrInvalid) {
				t.Fatalf("Verify of an off-list URL = %v", verr)
			}
			return
		}
		_, err := v.Verify(h, body)
		if err != nil {
			if !errors.Is(err, signature.ErrInvalid) {
				t.Fatalf("Verify error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if id != g(HeaderTransmissionID) || ts != g(HeaderTransmissionTime) || sig != g(HeaderTransmissionSig) {
			t.Fatalf("Verify accepted headers PayPal did not sign: %q %q %q", id, ts, sig)
		}
	})
}
