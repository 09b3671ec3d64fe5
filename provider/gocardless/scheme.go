package gocardless

import (
	"encoding/hex"
	"net/http"
	"time"

	"github.com/paylock/paylock/signature"
)

// Scheme is GoCardless's webhook signature, registered with package
// signature by this package: header Webhook-Signature, the hex
// HMAC-SHA256 of the raw body keyed with the webhook endpoint's secret
// (its text as it is, at least 16 bytes).
//
// GoCardless signs no timestamp, so there is no replay window: a captured
// delivery verifies forever, and what a replay names is fetched again
// from GoCardless's API, whose answer records nothing new (the events'
// ids are derived from the payment's state, recorded once per source).
// GoCardless asks receivers to answer a bad signature with 498; paylock
// answers 401, as for every scheme: either is a refusal GoCardless
// retries.
const Scheme signature.Scheme = "gocardless"

// HeaderSignature is the signature's header, canonical.
const HeaderSignature = "Webhook-Signature"

func init() {
	signature.RegisterScheme(signature.SchemeSpec{
		Name:        Scheme,
		ParseSecret: func(entry string) (key, token []byte, err error) { return []byte(entry), nil, nil },
		KeyFormat:   "the webhook endpoint secret's text as it is",
		Verify:      verify,
		Precheck: func(c signature.Check) error {
			_, err := signatureOf(c.Header)
			return err
		},
		Sign: sign,
	})
}

// signatureOf returns the decoded Webhook-Signature of h: one header, 64 hex
// digits.
func signatureOf(h http.Header) ([]byte, error) { return signature.HexMACHeader(h, HeaderSignature) }

// verify checks Webhook-Signature over the raw body with each configured
// secret.
func verify(c signature.Check) (signature.Result, error) {
	sig, err := signatureOf(c.Header)
	if err != nil {
		return signature.Result{}, err
	}
	i := c.Match([][]byte{sig}, func(key []byte) []byte { return signature.BodyMAC(key, c.Body) })
	if i < 0 {
		return signature.Result{}, signature.ErrNoMatch
	}
	return signature.Result{SecretIndex: i}, nil
}

// sign is what GoCardless sends: Webhook-Signature.
func sign(key, _ []byte, _ string, _ time.Time, body []byte) (http.Header, []byte, error) {
	h := http.Header{}
	h.Set(HeaderSignature, hex.EncodeToString(signature.BodyMAC(key, body)))
	return h, body, nil
}
