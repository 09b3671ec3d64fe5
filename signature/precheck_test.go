package signature_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

// checkPrecheckAgrees checks that Precheck(h) refuses exactly what Verify
// refuses for its headers alone: the same sentinel, or nil when Verify
// succeeded or only the MAC comparison failed (ErrNoMatch, which Precheck
// also gives when no signature is of a checked version).
func checkPrecheckAgrees(t *testing.T, v *signature.Verifier, h http.Header, verifyErr error) {
	t.Helper()
	err := v.Precheck(h)
	switch {
	case err == nil && (verifyErr == nil || signature.Reason(verifyErr) == "no_match"):
	case err != nil && signature.Reason(err) == signature.Reason(verifyErr):
	default:
		t.Errorf("Precheck = %v, but Verify = %v", err, verifyErr)
	}
}

func TestPrecheck(t *testing.T) {
	t.Parallel()
	const id = "msg_precheck"
	for _, tc := range []struct {
		name    string
		scheme  signature.Scheme
		headers func(b bundle) http.Header
		want    error
	}{
		{"standard, valid", signature.SchemeStandard, func(b bundle) http.Header { return signature.Sign(b.scheme, b.cur, id, now, body) }, nil},
		{"standard, unknown secret: no MAC is computed", signature.SchemeStandard, func(b bundle) http.Header { return signature.Sign(b.scheme, b.other, id, now, body) }, nil},
		{"standard, no headers", signature.SchemeStandard, func(bundle) http.Header { return http.Header{} }, signature.ErrMissingHeader},
		{"standard, missing id", signature.SchemeStandard, func(b bundle) http.Header {
			h := signature.Sign(b.scheme, b.cur, id, now, body)
			h.Del(signature.HeaderWebhookID)
			return h
		}, signature.ErrMissingHeader},
		{"standard, empty signature", signature.SchemeStandard, func(bundle) http.Header { return standardHeaders(id, unix(now), "") }, signature.ErrMissingHeader},
		{"standard, repeated signature", signature.SchemeStandard, func(b bundle) http.Header {
			h := signature.Sign(b.scheme, b.cur, id, now, body)
			h.Add(signature.HeaderWebhookSignature, h.Get(signature.HeaderWebhookSignature))
			return h
		}, signature.ErrMalformed},
		{"standard, id over 256 bytes", signature.SchemeStandard, func(b bundle) http.Header {
			return signature.Sign(b.scheme, b.cur, strings.Repeat("m", 257), now, body)
		}, signature.ErrMalformed},
		{"standard, signature header over 4 KiB", signature.SchemeStandard, func(bundle) http.Header {
			return standardHeaders(id, unix(now), "v2,"+strings.Repeat("A", 4096))
		}, signature.ErrMalformed},
		{"standard, timestamp not canonical", signature.SchemeStandard, func(b bundle) http.Header {
			return standardHeaders(id, "0"+unix(now), "v1,"+b.sig(b.cur, id, now, body))
		}, signature.ErrMalformed},
		{"standard, signature not base64", signature.SchemeStandard, func(bundle) http.Header { return standardHeaders(id, unix(now), "v1,!!") }, signature.ErrMalformed},
		{"standard, eleven signatures", signature.SchemeStandard, func(b bundle) http.Header {
			return standardHeaders(id, unix(now), strings.Repeat("v1a,x ", 10)+"v1,"+b.sig(b.cur, id, now, body))
		}, signature.ErrMalformed},
		{"standard, too old", signature.SchemeStandard, func(b bundle) http.Header {
			return signature.Sign(b.scheme, b.cur, id, now.Add(-6*time.Minute), body)
		}, signature.ErrTimestamp},
		{"standard, too far ahead", signature.SchemeStandard, func(b bundle) http.Header {
			return signature.Sign(b.scheme, b.cur, id, now.Add(6*time.Minute), body)
		}, signature.ErrTimestamp},
		{"standard, only other versions", signature.SchemeStandard, func(b bundle) http.Header {
			return standardHeaders(id, unix(now), "v1a,"+b.sig(b.cur, id, now, body))
		}, signature.ErrNoMatch},

		{"stripe, valid", signature.SchemeStripe, func(b bundle) http.Header { return signature.Sign(b.scheme, b.cur, "", now, body) }, nil},
		{"stripe, unknown secret: no MAC is computed", signature.SchemeStripe, func(b bundle) http.Header { return signature.Sign(b.scheme, b.other, "", now, body) }, nil},
		{"stripe, no header", signature.SchemeStripe, func(bundle) http.Header { return http.Header{} }, signature.ErrMissingHeader},
		{"stripe, empty header", signature.SchemeStripe, func(bundle) http.Header { return stripeHeader("") }, signature.ErrMissingHeader},
		{"stripe, no t", signature.SchemeStripe, func(b bundle) http.Header { return stripeHeader("v1=" + b.sig(b.cur, "", now, body)) }, signature.ErrMalformed},
		{"stripe, signature not hex", signature.SchemeStripe, func(bundle) http.Header { return stripeHeader("t=" + unix(now) + ",v1=zz") }, signature.ErrMalformed},
		{"stripe, header over 4 KiB", signature.SchemeStripe, func(bundle) http.Header {
			return stripeHeader("t=" + unix(now) + ",v0=" + strings.Repeat("a", 4096))
		}, signature.ErrMalformed},
		{"stripe, too old", signature.SchemeStripe, func(b bundle) http.Header { return signature.Sign(b.scheme, b.cur, "", now.Add(-time.Hour), body) }, signature.ErrTimestamp},
		{"stripe, only v0", signature.SchemeStripe, func(b bundle) http.Header {
			return stripeHeader("t=" + unix(now) + ",v0=" + b.sig(b.cur, "", now, body))
		}, signature.ErrNoMatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.scheme)
			h := tc.headers(b)
			err := b.verifier.Precheck(h)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Precheck: %v, want nil", err)
				}
			} else {
				assertSentinel(t, err, tc.want)
			}
			_, verr := b.verifier.Verify(h, body)
			checkPrecheckAgrees(t, b.verifier, h, verr)
		})
	}
}

// Precheck is only an early refusal: headers it lets through are still
// checked against the body by Verify.
func TestPrecheckDoesNotReplaceVerify(t *testing.T) {
	t.Parallel()
	for _, scheme := range []signature.Scheme{signature.SchemeStandard, signature.SchemeStripe} {
		b := setup(t, scheme)
		h := signature.Sign(scheme, b.cur, "msg_1", now, body)
		if err := b.verifier.Precheck(h); err != nil {
			t.Fatalf("%s: Precheck: %v", scheme, err)
		}
		_, err := b.verifier.Verify(h, append([]byte(body), ' '))
		assertSentinel(t, err, signature.ErrNoMatch)
	}
}
