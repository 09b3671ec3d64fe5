package signature

import (
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultTolerance is the tolerance [NewVerifier] uses when given 0: the
// five minutes that both Stripe and Standard Webhooks recommend.
const DefaultTolerance = 5 * time.Minute

// Header names, in the canonical form [http.Header] stores them in.
const (
	HeaderWebhookID        = "Webhook-Id"
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	HeaderWebhookSignature = "Webhook-Signature"
	HeaderStripeSignature  = "Stripe-Signature"
)

// Limits on what a request may send. They are far above what a PSP sends and
// bound the work an unauthenticated request can cause.
const (
	maxHeaderBytes  = 4 << 10 // per signature header
	maxIDBytes      = 256     // webhook-id
	maxSignatures   = 10      // signature entries per header, of any version
	maxTimestampLen = 12      // decimal digits of unix seconds (year 33658)
	macSize         = 32      // HMAC-SHA256
)

// Verifier checks webhook signatures for one scheme against one or more
// secrets (several during a rotation). It is immutable and safe for
// concurrent use.
type Verifier struct {
	scheme    Scheme
	spec      *SchemeSpec
	secrets   []Secret
	tolerance time.Duration
	now       func() time.Time
	macs      []*sync.Pool                // SchemeStandard: per secret, keyed HMAC states (newMACPools)
	verify    func(Check) (Result, error) // SchemeSpec.Configure's; nil: spec.Verify
	precheck  func(Check) error           // SchemeSpec.Configure's; nil: spec.Precheck
}

// NewVerifier returns a Verifier for scheme that accepts a signature made
// with any of secrets, whose timestamp is at most tolerance away from the
// clock (DefaultTolerance when tolerance is 0). Adyen signs no timestamp:
// for SchemeAdyen the tolerance must not be negative but is not used.
//
// It returns an error for an unknown scheme (wrapping [ErrUnknownScheme]), no secrets, a zero Secret, a
// Secret parsed for another scheme, or a negative tolerance.
func NewVerifier(scheme Scheme, secrets []Secret, tolerance time.Duration) (*Verifier, error) {
	spec, err := lookupScheme(scheme)
	if err != nil {
		return nil, err
	}
	if len(secrets) == 0 {
		return nil, errors.New("signature: no secrets")
	}
	for i, s := range secrets {
		if s.k == nil {
			return nil, fmt.Errorf("signature: secret %d of %d is the zero Secret", i+1, len(secrets))
		}
		if s.k.scheme != scheme {
			return nil, fmt.Errorf("signature: secret %d of %d (%s) was parsed for scheme %q, not %q", i+1, len(secrets), s, s.k.scheme, scheme)
		}
	}
	if tolerance < 0 {
		return nil, fmt.Errorf("signature: negative tolerance %v", tolerance)
	}
	if tolerance == 0 {
		tolerance = DefaultTolerance
	}
	v := &Verifier{
		scheme:    scheme,
		spec:      spec,
		secrets:   append([]Secret(nil), secrets...),
		tolerance: tolerance,
		now:       time.Now,
	}
	if scheme == SchemeStandard {
		v.macs = newMACPools(v.secrets)
	}
	return v, nil
}

// NewVerifierWith is [NewVerifier] for a source whose settings (its
// provider's sources-file keys, as JSON) configure the scheme: a scheme
// with a SchemeSpec.Configure verifies as that returns; the others ignore
// settings. Its error is NewVerifier's, or Configure's.
func NewVerifierWith(scheme Scheme, secrets []Secret, tolerance time.Duration, settings map[string]json.RawMessage) (*Verifier, error) {
	v, err := NewVerifier(scheme, secrets, tolerance)
	if err != nil || v.spec.Configure == nil {
		return v, err
	}
	if v.verify, v.precheck, err = v.spec.Configure(settings); err != nil {
		return nil, fmt.Errorf("signature: %s: %w", scheme, err)
	}
	return v, nil
}

// WithClock returns a copy of v that reads the time from now (time.Now when
// nil). It is meant for tests.
func (v *Verifier) WithClock(now func() time.Time) *Verifier {
	c := *v
	c.now = now
	if c.now == nil {
		c.now = time.Now
	}
	return &c
}

// Result describes a verified delivery.
type Result struct {
	// ID is the webhook-id header for SchemeStandard and "" for SchemeStripe
	// and SchemeAdyen (whose event ids are in the body).
	ID string
	// Timestamp is the signed timestamp, in UTC; the zero Time for
	// SchemeAdyen, which signs none.
	Timestamp time.Time
	// SecretIndex is the 0-based index of the configured secret that
	// matched; during a rotation it tells when the old secret is no longer
	// used. For SchemeAdyen each item is matched on its own, with the first
	// secret that fits it, and SecretIndex is the highest of those indexes
	// (Adyen signs all the items of a delivery with one key, so they
	// normally agree).
	SecretIndex int
}

// Verify checks the signature headers in h against the raw request body,
// exactly as received: call it before decoding anything. For SchemeAdyen h
// is not used: every notification item of the body carries its own
// signature, every one must match one of the secrets, and one item that does
// not fails the whole delivery.
//
// On success it returns the Result and a nil error. Otherwise it returns the
// zero Result and an error wrapping [ErrInvalid] and exactly one of
// [ErrMissingHeader], [ErrMalformed], [ErrTimestamp] or [ErrNoMatch], checked
// in that order: a delivery is only compared with the secrets once its
// headers parse and its timestamp is within tolerance. For SchemeAdyen the
// body is read whole first (ErrMalformed), then every item must have a
// signature (ErrMissingHeader) that is well formed (ErrMalformed), and only
// then are the items compared with the secrets (ErrNoMatch); there is no
// timestamp. Error texts never hold a header's value, a body's content or a
// secret.
//
// h is looked up with [http.Header.Values], so its keys must be canonical,
// as those of a request read by net/http are. A header repeated in h is
// malformed.
//
// A provider's scheme verifies as its SchemeSpec.Verify says.
func (v *Verifier) Verify(h http.Header, body []byte) (Result, error) {
	if v.spec == nil {
		return Result{}, fmt.Errorf("%w: verifier has unknown scheme %q", ErrInvalid, v.scheme)
	}
	if v.verify != nil {
		return v.verify(Check{Header: h, Body: body, v: v})
	}
	return v.spec.Verify(Check{Header: h, Body: body, v: v})
}

// Precheck refuses early, before the body is read, a delivery whose headers
// [Verifier.Verify] would refuse: it checks that the signature headers are
// present, single, within their size bounds and well formed, that they hold
// at least one signature of a checked version (ErrNoMatch otherwise) and
// that the timestamp is within tolerance. It returns nil or the error Verify
// would return for those headers, whatever the body, so [Reason] labels both
// alike.
//
// Precheck computes no MAC and is cheap; it is an early refusal, not a
// replacement: Verify checks everything again. For SchemeAdyen it returns
// nil, since the signatures are in the body.
//
// A provider's scheme prechecks as its SchemeSpec.Precheck says (nothing
// when it has none).
func (v *Verifier) Precheck(h http.Header) error {
	switch {
	case v.spec == nil:
		return fmt.Errorf("%w: verifier has unknown scheme %q", ErrInvalid, v.scheme)
	case v.precheck != nil:
		return v.precheck(Check{Header: h, v: v})
	case v.spec.Precheck == nil:
		return nil
	}
	return v.spec.Precheck(Check{Header: h, v: v})
}

// match returns the index of the first secret whose MAC over the signed
// content equals one of sigs, or -1. Each comparison is constant-time.
func (v *Verifier) match(sigs [][]byte, mac func(key []byte) []byte) int {
	for i, s := range v.secrets {
		want := mac(s.k.key())
		for _, sig := range sigs {
			if len(sig) == macSize && hmac.Equal(sig, want) {
				return i
			}
		}
	}
	return -1
}

// checkTime returns the timestamp ts parsed and checked against the clock.
func (v *Verifier) checkTime(ts int64) (time.Time, error) {
	t := time.Unix(ts, 0)
	age := v.now().Sub(t)
	switch {
	case age > v.tolerance:
		return time.Time{}, fmt.Errorf("%w: %v old, tolerance %v", ErrTimestamp, age.Truncate(time.Second), v.tolerance)
	case age < -v.tolerance:
		return time.Time{}, fmt.Errorf("%w: %v in the future, tolerance %v", ErrTimestamp, (-age).Truncate(time.Second), v.tolerance)
	}
	return t.UTC(), nil
}

// header returns the single value of the header name, ErrMissingHeader if it
// is absent or empty and ErrMalformed if it is repeated or longer than max.
func header(h http.Header, name string, max int) (string, error) {
	vals := h.Values(name)
	switch {
	case len(vals) == 0 || (len(vals) == 1 && vals[0] == ""):
		return "", fmt.Errorf("%w: %s", ErrMissingHeader, name)
	case len(vals) > 1:
		return "", malformed("%s: header repeated %d times", name, len(vals))
	case len(vals[0]) > max:
		return "", malformed("%s: %d bytes, more than %d", name, len(vals[0]), max)
	}
	return vals[0], nil
}

// parseTimestamp accepts unix seconds written as canonical decimal: digits
// only, no sign, no leading zero. The canonical form makes the signed text
// and the parsed number say the same thing, whatever a peer does with them.
func parseTimestamp(name, s string) (int64, error) {
	if s == "" || len(s) > maxTimestampLen || (s[0] == '0' && len(s) > 1) {
		return 0, malformed("%s: timestamp is not unix seconds", name)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, malformed("%s: timestamp is not unix seconds", name)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil { // unreachable with at most 12 digits
		return 0, malformed("%s: timestamp is not unix seconds", name)
	}
	return n, nil
}

// Sign returns the headers a PSP using scheme would send for body, signed
// with secret at ts (which must not be before 1970). id is the webhook-id for
// SchemeStandard and is ignored for SchemeStripe. It is used by
// `paylock sign`, tests and the load simulator. A provider's scheme signs
// as its SchemeSpec.Sign says.
//
// Sign panics if scheme is unknown or secret was not parsed for it (the zero
// Secret included): [ParseSecrets] already refuses an unknown scheme, so
// either is a programming error. It also panics for SchemeAdyen, and any
// scheme that puts no signature in headers (SchemeSpec.InBody): use
// [SignAdyenNotification].
func Sign(scheme Scheme, secret Secret, id string, ts time.Time, body []byte) http.Header {
	if secret.k == nil || secret.k.scheme != scheme {
		panic(fmt.Sprintf("signature: Sign(%q) with a secret not parsed for that scheme", scheme))
	}
	spec, err := lookupScheme(scheme)
	switch {
	case err != nil:
		panic(fmt.Sprintf("signature: Sign with unknown scheme %q", scheme))
	case spec.InBody:
		panic(fmt.Sprintf("signature: Sign(%s): %s signs inside the body; use SignAdyenNotification", scheme, scheme))
	}
	h, err := signWith(spec, secret, id, ts, body)
	if err != nil {
		panic(fmt.Sprintf("signature: Sign(%s): %v", scheme, err))
	}
	return h
}

// TrySign is Sign for a scheme that may be unable to sign (one whose
// signatures only its provider can make, such as PayPal's RSA): the
// scheme's error instead of a panic. It panics as Sign does on a secret
// not parsed for scheme, an unknown scheme or one that signs in the body.
func TrySign(scheme Scheme, secret Secret, id string, ts time.Time, body []byte) (http.Header, error) {
	if secret.k == nil || secret.k.scheme != scheme {
		panic(fmt.Sprintf("signature: TrySign(%q) with a secret not parsed for that scheme", scheme))
	}
	spec, err := lookupScheme(scheme)
	switch {
	case err != nil:
		panic(fmt.Sprintf("signature: TrySign with unknown scheme %q", scheme))
	case spec.InBody:
		panic(fmt.Sprintf("signature: TrySign(%s): %s signs inside the body; use SignAdyenNotification", scheme, scheme))
	}
	h, err := signWith(spec, secret, id, ts, body)
	if err != nil {
		return nil, fmt.Errorf("signature: signing with %s: %w", scheme, err)
	}
	return h, nil
}

// signWith signs body with secret as spec says.
func signWith(spec *SchemeSpec, secret Secret, id string, ts time.Time, body []byte) (http.Header, error) {
	var token []byte
	if secret.k.token != nil {
		token = secret.k.token()
	}
	h, _, err := spec.Sign(secret.k.key(), token, id, ts, body)
	return h, err
}

// SignStandard returns the Standard Webhooks headers for body, signed at ts
// with every one of secrets in order: webhook-signature carries one
// "v1,<signature>" entry per secret, space-separated, so a receiver holding
// any one of them accepts the message (secret rotation). It panics as Sign
// does if secrets is empty or one was not parsed for SchemeStandard.
func SignStandard(secrets []Secret, id string, ts time.Time, body []byte) http.Header {
	if len(secrets) == 0 {
		panic("signature: SignStandard with no secret")
	}
	h := Sign(SchemeStandard, secrets[0], id, ts, body)
	if len(secrets) == 1 {
		return h
	}
	sigs := []string{h.Get(HeaderWebhookSignature)}
	for _, s := range secrets[1:] {
		sigs = append(sigs, Sign(SchemeStandard, s, id, ts, body).Get(HeaderWebhookSignature))
	}
	h.Set(HeaderWebhookSignature, strings.Join(sigs, " "))
	return h
}
