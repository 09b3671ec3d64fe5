package checkout

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/paylock/paylock/signature"
)

// Scheme is Checkout.com's webhook signature, registered with package
// signature by this package:
//
//   - header Cko-Signature: the hex HMAC-SHA256 of the raw body, keyed
//     with the webhook's secret key (its text as it is, at least 16
//     bytes);
//   - optionally, header Authorization: the static value the webhook was
//     given in Checkout.com's dashboard ("authorization header key"),
//     compared in constant time. A secret entry of "<secret key>" checks
//     the signature alone; "<secret key>|<authorization value>" checks
//     both, so the value is a secret read from the source's secrets_env
//     like the key, never written in the sources file. During a rotation
//     each entry pairs a key with its own value: a delivery verifies when
//     its signature matches one entry's key and its Authorization that
//     entry's value.
//
// Checkout.com signs no timestamp, so there is no replay window: a
// captured delivery verifies forever, and a replay is answered by the
// event-id deduplication (the event's "id", recorded once per source), as
// for Adyen.
const Scheme signature.Scheme = "checkout"

// Header names, canonical.
const (
	HeaderSignature     = "Cko-Signature"
	HeaderAuthorization = "Authorization"
)

// tokenSeparator separates a secret entry's key from its Authorization
// value.
const tokenSeparator = "|"

func init() {
	signature.RegisterScheme(signature.SchemeSpec{
		Name:        Scheme,
		ParseSecret: parseSecret,
		KeyFormat:   "the secret key's text as it is, before any " + tokenSeparator,
		Verify:      verify,
		Precheck: func(c signature.Check) error {
			_, err := signatureOf(c.Header)
			return err
		},
		Sign: sign,
	})
}

// parseSecret reads "<key>" or "<key>|<authorization value>".
func parseSecret(entry string) (key, token []byte, err error) {
	k, tok, withToken := strings.Cut(entry, tokenSeparator)
	k, tok = strings.TrimSpace(k), strings.TrimSpace(tok)
	switch {
	case k == "":
		return nil, nil, errors.New("has no secret key before " + tokenSeparator)
	case withToken && tok == "":
		return nil, nil, errors.New("has an empty Authorization value after " + tokenSeparator + " (omit the " + tokenSeparator + " instead)")
	case !withToken:
		return []byte(k), nil, nil
	}
	return []byte(k), []byte(tok), nil
}

// signatureOf returns the decoded Cko-Signature of h: one header, 64 hex
// digits.
func signatureOf(h http.Header) ([]byte, error) { return signature.HexMACHeader(h, HeaderSignature) }

// verify checks Cko-Signature over the raw body, then the matching
// secret's Authorization value, if it has one.
func verify(c signature.Check) (signature.Result, error) {
	sig, err := signatureOf(c.Header)
	if err != nil {
		return signature.Result{}, err
	}
	i := c.Match([][]byte{sig}, func(key []byte) []byte { return signature.BodyMAC(key, c.Body) })
	if i < 0 {
		return signature.Result{}, signature.ErrNoMatch
	}
	if c.HasToken(i) {
		auth, err := signature.SingleHeader(c.Header, HeaderAuthorization, signature.MaxHeaderBytes)
		if err != nil {
			return signature.Result{}, err
		}
		if !c.TokenMatches(i, auth) {
			return signature.Result{}, fmt.Errorf("%w: %s is not the secret's value", signature.ErrNoMatch, HeaderAuthorization)
		}
	}
	return signature.Result{SecretIndex: i}, nil
}

// sign is what Checkout.com sends: Cko-Signature, and Authorization when
// the secret has a value for it.
func sign(key, token []byte, _ string, _ time.Time, body []byte) (http.Header, []byte, error) {
	h := http.Header{}
	h.Set(HeaderSignature, hex.EncodeToString(signature.BodyMAC(key, body)))
	if token != nil {
		h.Set(HeaderAuthorization, string(token))
	}
	return h, body, nil
}
