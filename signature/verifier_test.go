package signature_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

var (
	now  = time.Unix(1_700_000_000, 0)
	body = []byte(`{"id":"evt_1","type":"payment_intent.succeeded","amount":1234}`)

	sentinels = map[error]string{
		signature.ErrMissingHeader: "missing_header",
		signature.ErrMalformed:     "malformed",
		signature.ErrTimestamp:     "timestamp",
		signature.ErrNoMatch:       "no_match",
	}
)

// bundle is a verifier configured with two secrets (the old one first, as
// during a rotation) and a third secret it does not know.
type bundle struct {
	scheme   signature.Scheme
	old, cur signature.Secret
	other    signature.Secret
	verifier *signature.Verifier
}

func setup(t *testing.T, scheme signature.Scheme) bundle {
	t.Helper()
	var csv [3]string
	for i := range csv {
		switch scheme {
		case signature.SchemeStandard:
			key := make([]byte, 32)
			_, _ = rand.Read(key)
			csv[i] = "whsec_" + base64.StdEncoding.EncodeToString(key)
		case signature.SchemeStripe:
			csv[i] = fmt.Sprintf("whsec_stripe_test_secret_%d", i)
		}
	}
	secrets, err := signature.ParseSecrets(scheme, strings.Join(csv[:], ", "))
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(scheme, secrets[:2], 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return bundle{
		scheme:   scheme,
		old:      secrets[0],
		cur:      secrets[1],
		other:    secrets[2],
		verifier: v.WithClock(func() time.Time { return now }),
	}
}

// sig returns only the signature value (base64 or hex) that s gives body at
// ts, for building headers by hand.
func (b bundle) sig(s signature.Secret, id string, ts time.Time, body []byte) string {
	h := signature.Sign(b.scheme, s, id, ts, body)
	if b.scheme == signature.SchemeStandard {
		return strings.TrimPrefix(h.Get(signature.HeaderWebhookSignature), "v1,")
	}
	_, v1, _ := strings.Cut(h.Get(signature.HeaderStripeSignature), ",v1=")
	return v1
}

func standardHeaders(id, ts, sig string) http.Header {
	h := http.Header{}
	h.Set(signature.HeaderWebhookID, id)
	h.Set(signature.HeaderWebhookTimestamp, ts)
	h.Set(signature.HeaderWebhookSignature, sig)
	return h
}

func stripeHeader(v string) http.Header {
	h := http.Header{}
	h.Set(signature.HeaderStripeSignature, v)
	return h
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

type verifyCase struct {
	name    string
	headers func(b bundle) http.Header
	body    []byte // body given to Verify; nil means body
	want    error  // nil for success
	index   int    // SecretIndex on success
}

func TestVerifyStandard(t *testing.T) {
	t.Parallel()
	const id = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
	signed := func(s func(b bundle) signature.Secret, ts time.Time) func(b bundle) http.Header {
		return func(b bundle) http.Header { return signature.Sign(b.scheme, s(b), id, ts, body) }
	}
	old := func(b bundle) signature.Secret { return b.old }
	cur := func(b bundle) signature.Secret { return b.cur }
	other := func(b bundle) signature.Secret { return b.other }
	with := func(f func(b bundle) http.Header, key, value string) func(b bundle) http.Header {
		return func(b bundle) http.Header { h := f(b); h.Set(key, value); return h }
	}
	without := func(key string) func(b bundle) http.Header {
		return func(b bundle) http.Header { h := signed(cur, now)(b); h.Del(key); return h }
	}
	sigHeader := func(f func(b bundle) string) func(b bundle) http.Header {
		return func(b bundle) http.Header { return standardHeaders(id, unix(now), f(b)) }
	}
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))

	cases := []verifyCase{
		{name: "valid, first secret", headers: signed(old, now), index: 0},
		{name: "valid, second of two secrets", headers: signed(cur, now), index: 1},
		{name: "wrong secret", headers: signed(other, now), want: signature.ErrNoMatch},
		{name: "several signatures, one valid", headers: sigHeader(func(b bundle) string {
			return "v1," + b.sig(b.other, id, now, body) + " v1a,c29tZSBlZDI1NTE5IHNpZw== v1," + b.sig(b.cur, id, now, body)
		}), index: 1},
		{name: "runs of spaces between signatures", headers: sigHeader(func(b bundle) string {
			return "  v2,x   v1," + b.sig(b.old, id, now, body) + "  "
		}), index: 0},
		{name: "ten signatures, the last valid", headers: sigHeader(func(b bundle) string {
			return strings.Repeat("v1,"+b.sig(b.other, id, now, body)+" ", 9) + "v1," + b.sig(b.cur, id, now, body)
		}), index: 1},
		{name: "only other versions", headers: sigHeader(func(b bundle) string {
			return "v1a," + b.sig(b.cur, id, now, body) + " v2," + b.sig(b.cur, id, now, body)
		}), want: signature.ErrNoMatch},
		{name: "only spaces", headers: sigHeader(func(bundle) string { return "   " }), want: signature.ErrNoMatch},
		{name: "as old as the tolerance", headers: signed(cur, now.Add(-5*time.Minute)), index: 1},
		{name: "as far ahead as the tolerance", headers: signed(cur, now.Add(5*time.Minute)), index: 1},
		{name: "timestamp too old", headers: signed(cur, now.Add(-5*time.Minute-time.Second)), want: signature.ErrTimestamp},
		{name: "timestamp too far ahead", headers: signed(cur, now.Add(5*time.Minute+time.Second)), want: signature.ErrTimestamp},
		{name: "timestamp of a wrong secret too old", headers: signed(other, now.Add(-time.Hour)), want: signature.ErrTimestamp},
		{name: "body tampered", headers: signed(cur, now), body: append([]byte(body), ' '), want: signature.ErrNoMatch},
		{name: "body emptied", headers: signed(cur, now), body: []byte{}, want: signature.ErrNoMatch},
		{name: "id tampered", headers: with(signed(cur, now), signature.HeaderWebhookID, "msg_other"), want: signature.ErrNoMatch},
		{name: "timestamp tampered", headers: with(signed(cur, now), signature.HeaderWebhookTimestamp, unix(now.Add(time.Second))), want: signature.ErrNoMatch},
		{name: "no headers", headers: func(bundle) http.Header { return http.Header{} }, want: signature.ErrMissingHeader},
		{name: "missing id", headers: without(signature.HeaderWebhookID), want: signature.ErrMissingHeader},
		{name: "missing timestamp", headers: without(signature.HeaderWebhookTimestamp), want: signature.ErrMissingHeader},
		{name: "missing signature", headers: without(signature.HeaderWebhookSignature), want: signature.ErrMissingHeader},
		{name: "empty id", headers: with(signed(cur, now), signature.HeaderWebhookID, ""), want: signature.ErrMissingHeader},
		{name: "empty timestamp", headers: with(signed(cur, now), signature.HeaderWebhookTimestamp, ""), want: signature.ErrMissingHeader},
		{name: "empty signature", headers: with(signed(cur, now), signature.HeaderWebhookSignature, ""), want: signature.ErrMissingHeader},
		{name: "undecodable base64", headers: sigHeader(func(bundle) string { return "v1,!!not*base64!!" }), want: signature.ErrMalformed},
		{name: "base64 without padding", headers: sigHeader(func(b bundle) string {
			return "v1," + strings.TrimRight(b.sig(b.cur, id, now, body), "=")
		}), want: signature.ErrMalformed},
		{name: "undecodable base64 beside a valid signature", headers: sigHeader(func(b bundle) string {
			return "v1," + b.sig(b.cur, id, now, body) + " v1,%%%"
		}), want: signature.ErrMalformed},
		{name: "wrong-length signature", headers: sigHeader(func(bundle) string { return "v1," + short }), want: signature.ErrMalformed},
		{name: "hex instead of base64", headers: sigHeader(func(bundle) string { return "v1," + hex.EncodeToString(make([]byte, 32)) }), want: signature.ErrMalformed},
		{name: "entry without version", headers: sigHeader(func(b bundle) string { return b.sig(b.cur, id, now, body) }), want: signature.ErrMalformed},
		{name: "entry with empty version", headers: sigHeader(func(b bundle) string { return "," + b.sig(b.cur, id, now, body) }), want: signature.ErrMalformed},
		{name: "eleven signatures", headers: sigHeader(func(b bundle) string {
			return strings.Repeat("v1a,x ", 10) + "v1," + b.sig(b.cur, id, now, body)
		}), want: signature.ErrMalformed},
		{name: "signature header over 4 KiB", headers: sigHeader(func(b bundle) string {
			return "v1," + b.sig(b.cur, id, now, body) + " v2," + strings.Repeat("A", 4096)
		}), want: signature.ErrMalformed},
		{name: "id over 256 bytes", headers: func(b bundle) http.Header {
			long := strings.Repeat("m", 257)
			return signature.Sign(b.scheme, b.cur, long, now, body)
		}, want: signature.ErrMalformed},
		{name: "id of 256 bytes", headers: func(b bundle) http.Header {
			return signature.Sign(b.scheme, b.cur, strings.Repeat("m", 256), now, body)
		}, index: 1},
		{name: "repeated signature header", headers: func(b bundle) http.Header {
			h := signed(cur, now)(b)
			h.Add(signature.HeaderWebhookSignature, "v1,"+b.sig(b.other, id, now, body))
			return h
		}, want: signature.ErrMalformed},
		{name: "repeated id header", headers: func(b bundle) http.Header {
			h := signed(cur, now)(b)
			h.Add(signature.HeaderWebhookID, "msg_other")
			return h
		}, want: signature.ErrMalformed},
	}
	for _, ts := range []string{"abc", "+1700000000", "01700000000", "-1700000000", "1700000000.0", " 1700000000", "1700000000s", "1e9", "9999999999999999999999"} {
		cases = append(cases, verifyCase{
			name:    fmt.Sprintf("timestamp %q", ts),
			headers: with(signed(cur, now), signature.HeaderWebhookTimestamp, ts),
			want:    signature.ErrMalformed,
		})
	}
	runVerifyCases(t, signature.SchemeStandard, cases)
}

func TestVerifyStripe(t *testing.T) {
	t.Parallel()
	signed := func(s func(b bundle) signature.Secret, ts time.Time) func(b bundle) http.Header {
		return func(b bundle) http.Header { return signature.Sign(b.scheme, s(b), "ignored", ts, body) }
	}
	old := func(b bundle) signature.Secret { return b.old }
	cur := func(b bundle) signature.Secret { return b.cur }
	other := func(b bundle) signature.Secret { return b.other }
	header := func(f func(b bundle) string) func(b bundle) http.Header {
		return func(b bundle) http.Header { return stripeHeader(f(b)) }
	}
	t0 := "t=" + unix(now)
	short := hex.EncodeToString(make([]byte, 16))

	cases := []verifyCase{
		{name: "valid, first secret", headers: signed(old, now), index: 0},
		{name: "valid, second of two secrets", headers: signed(cur, now), index: 1},
		{name: "wrong secret", headers: signed(other, now), want: signature.ErrNoMatch},
		{name: "several signatures and v0, one valid", headers: header(func(b bundle) string {
			return t0 + ",v1=" + b.sig(b.other, "", now, body) + ",v0=" + short + ",v1=" + b.sig(b.cur, "", now, body)
		}), index: 1},
		{name: "t after the signatures", headers: header(func(b bundle) string {
			return "v1=" + b.sig(b.old, "", now, body) + "," + t0
		}), index: 0},
		{name: "ten signatures, the last valid", headers: header(func(b bundle) string {
			return t0 + strings.Repeat(",v1="+b.sig(b.other, "", now, body), 9) + ",v1=" + b.sig(b.cur, "", now, body)
		}), index: 1},
		{name: "only v0", headers: header(func(b bundle) string { return t0 + ",v0=" + b.sig(b.cur, "", now, body) }), want: signature.ErrNoMatch},
		{name: "only t", headers: header(func(bundle) string { return t0 }), want: signature.ErrNoMatch},
		{name: "as old as the tolerance", headers: signed(cur, now.Add(-5*time.Minute)), index: 1},
		{name: "as far ahead as the tolerance", headers: signed(cur, now.Add(5*time.Minute)), index: 1},
		{name: "timestamp too old", headers: signed(cur, now.Add(-5*time.Minute-time.Second)), want: signature.ErrTimestamp},
		{name: "timestamp too far ahead", headers: signed(cur, now.Add(5*time.Minute+time.Second)), want: signature.ErrTimestamp},
		{name: "body tampered", headers: signed(cur, now), body: []byte(`{"id":"evt_1","type":"payment_intent.succeeded","amount":9999}`), want: signature.ErrNoMatch},
		{name: "timestamp tampered", headers: header(func(b bundle) string {
			return "t=" + unix(now.Add(time.Second)) + ",v1=" + b.sig(b.cur, "", now, body)
		}), want: signature.ErrNoMatch},
		{name: "missing header", headers: func(bundle) http.Header { return http.Header{} }, want: signature.ErrMissingHeader},
		{name: "empty header", headers: header(func(bundle) string { return "" }), want: signature.ErrMissingHeader},
		{name: "undecodable hex", headers: header(func(bundle) string { return t0 + ",v1=" + strings.Repeat("zz", 32) }), want: signature.ErrMalformed},
		{name: "odd-length hex", headers: header(func(b bundle) string { return t0 + ",v1=" + b.sig(b.cur, "", now, body) + "0" }), want: signature.ErrMalformed},
		{name: "undecodable hex beside a valid signature", headers: header(func(b bundle) string {
			return t0 + ",v1=" + b.sig(b.cur, "", now, body) + ",v1=xyz"
		}), want: signature.ErrMalformed},
		{name: "wrong-length signature", headers: header(func(bundle) string { return t0 + ",v1=" + short }), want: signature.ErrMalformed},
		{name: "base64 instead of hex", headers: header(func(bundle) string {
			return t0 + ",v1=" + base64.StdEncoding.EncodeToString(make([]byte, 32))
		}), want: signature.ErrMalformed},
		{name: "no t", headers: header(func(b bundle) string { return "v1=" + b.sig(b.cur, "", now, body) }), want: signature.ErrMalformed},
		{name: "t repeated", headers: header(func(b bundle) string { return t0 + "," + t0 + ",v1=" + b.sig(b.cur, "", now, body) }), want: signature.ErrMalformed},
		{name: "pair without =", headers: header(func(b bundle) string { return t0 + ",v1" }), want: signature.ErrMalformed},
		{name: "pair with empty key", headers: header(func(b bundle) string { return t0 + ",=abc" }), want: signature.ErrMalformed},
		{name: "trailing comma", headers: header(func(b bundle) string { return t0 + ",v1=" + b.sig(b.cur, "", now, body) + "," }), want: signature.ErrMalformed},
		{name: "eleven signatures", headers: header(func(b bundle) string {
			return t0 + strings.Repeat(",v0=x", 10) + ",v1=" + b.sig(b.cur, "", now, body)
		}), want: signature.ErrMalformed},
		{name: "header over 4 KiB", headers: header(func(b bundle) string {
			return t0 + ",v1=" + b.sig(b.cur, "", now, body) + ",v0=" + strings.Repeat("a", 4096)
		}), want: signature.ErrMalformed},
		{name: "repeated header", headers: func(b bundle) http.Header {
			h := signed(cur, now)(b)
			h.Add(signature.HeaderStripeSignature, t0+",v1="+b.sig(b.other, "", now, body))
			return h
		}, want: signature.ErrMalformed},
	}
	for _, ts := range []string{"", "abc", "+1700000000", "01700000000", "-1700000000", "1700000000.0", "9999999999999999999999"} {
		cases = append(cases, verifyCase{
			name: fmt.Sprintf("timestamp %q", ts),
			headers: header(func(b bundle) string {
				return "t=" + ts + ",v1=" + b.sig(b.cur, "", now, body)
			}),
			want: signature.ErrMalformed,
		})
	}
	runVerifyCases(t, signature.SchemeStripe, cases)
}

func runVerifyCases(t *testing.T, scheme signature.Scheme, cases []verifyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, scheme)
			h := tc.headers(b)
			in := body
			if tc.body != nil {
				in = tc.body
			}
			res, err := b.verifier.Verify(h, in)
			checkPrecheckAgrees(t, b.verifier, h, err)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v, want success", err)
				}
				if res.SecretIndex != tc.index {
					t.Errorf("SecretIndex = %d, want %d", res.SecretIndex, tc.index)
				}
				wantID := ""
				if scheme == signature.SchemeStandard {
					wantID = h.Get(signature.HeaderWebhookID)
				}
				if res.ID != wantID {
					t.Errorf("ID = %q, want %q", res.ID, wantID)
				}
				if res.Timestamp.IsZero() || res.Timestamp.Location() != time.UTC {
					t.Errorf("Timestamp = %v, want a UTC time", res.Timestamp)
				}
				if got := signature.Reason(err); got != "" {
					t.Errorf("Reason(nil) = %q", got)
				}
				return
			}
			assertSentinel(t, err, tc.want)
			if res != (signature.Result{}) {
				t.Errorf("Result = %+v on failure, want the zero Result", res)
			}
			for _, vals := range h {
				for _, v := range vals {
					if len(v) >= 8 && strings.Contains(err.Error(), v) {
						t.Errorf("error %q echoes a header value", err)
					}
				}
			}
		})
	}
}

// assertSentinel checks that err is want, and so ErrInvalid, is none of the
// other sentinels, and has want's Reason.
func assertSentinel(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
	if !errors.Is(err, signature.ErrInvalid) {
		t.Errorf("err = %v does not wrap ErrInvalid", err)
	}
	for other := range sentinels {
		if other != want && errors.Is(err, other) {
			t.Errorf("err = %v is also %v", err, other)
		}
	}
	if got := signature.Reason(err); got != sentinels[want] {
		t.Errorf("Reason(%v) = %q, want %q", err, got, sentinels[want])
	}
}

func TestTimestampIsCheckedBeforeTheSignature(t *testing.T) {
	t.Parallel()
	// A replayed delivery with a valid signature is a timestamp failure,
	// not a match: the tolerance is what stops the replay.
	b := setup(t, signature.SchemeStripe)
	h := signature.Sign(b.scheme, b.cur, "", now.Add(-time.Hour), body)
	_, err := b.verifier.Verify(h, body)
	assertSentinel(t, err, signature.ErrTimestamp)
}

func TestDefaultToleranceIsFiveMinutes(t *testing.T) {
	t.Parallel()
	b := setup(t, signature.SchemeStandard)
	v, err := signature.NewVerifier(b.scheme, []signature.Secret{b.cur}, 0)
	if err != nil {
		t.Fatal(err)
	}
	v = v.WithClock(func() time.Time { return now })
	for offset, want := range map[time.Duration]error{
		-signature.DefaultTolerance:               nil,
		signature.DefaultTolerance:                nil,
		-signature.DefaultTolerance - time.Second: signature.ErrTimestamp,
		signature.DefaultTolerance + time.Second:  signature.ErrTimestamp,
	} {
		_, err := v.Verify(signature.Sign(b.scheme, b.cur, "msg_1", now.Add(offset), body), body)
		if !errors.Is(err, want) {
			t.Errorf("offset %v: err = %v, want %v", offset, err, want)
		}
	}
	if signature.DefaultTolerance != 5*time.Minute {
		t.Errorf("DefaultTolerance = %v", signature.DefaultTolerance)
	}
}

func TestNewVerifierRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	std, err := signature.ParseSecrets(signature.SchemeStandard, "whsec_"+base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		scheme    signature.Scheme
		secrets   []signature.Secret
		tolerance time.Duration
	}{
		{"unknown scheme", "svix", std, 0},
		{"empty scheme", "", std, 0},
		{"no secrets", signature.SchemeStandard, nil, 0},
		{"zero secret", signature.SchemeStandard, []signature.Secret{std[0], {}}, 0},
		{"secret of another scheme", signature.SchemeStripe, std, 0},
		{"negative tolerance", signature.SchemeStandard, std, -time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := signature.NewVerifier(tc.scheme, tc.secrets, tc.tolerance)
			if err == nil || v != nil {
				t.Fatalf("NewVerifier = %v, %v; want an error", v, err)
			}
			if strings.Contains(err.Error(), "0123456789abcdef") {
				t.Errorf("error %q reveals the secret", err)
			}
		})
	}
}

func TestVerifierCopiesItsSecrets(t *testing.T) {
	t.Parallel()
	b := setup(t, signature.SchemeStripe)
	secrets := []signature.Secret{b.cur}
	v, err := signature.NewVerifier(b.scheme, secrets, 0)
	if err != nil {
		t.Fatal(err)
	}
	secrets[0] = b.other
	if _, err := v.WithClock(func() time.Time { return now }).Verify(signature.Sign(b.scheme, b.cur, "", now, body), body); err != nil {
		t.Errorf("changing the caller's slice changed the verifier: %v", err)
	}
}

func TestWithClockLeavesTheOriginalOnTheRealClock(t *testing.T) {
	t.Parallel()
	b := setup(t, signature.SchemeStripe)
	v, err := signature.NewVerifier(b.scheme, []signature.Secret{b.cur}, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = v.WithClock(func() time.Time { return now })
	if _, err := v.Verify(signature.Sign(b.scheme, b.cur, "", time.Now(), body), body); err != nil {
		t.Errorf("original verifier: %v", err)
	}
	if _, err := v.WithClock(nil).Verify(signature.Sign(b.scheme, b.cur, "", time.Now(), body), body); err != nil {
		t.Errorf("WithClock(nil): %v", err)
	}
}

func TestVerifierIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	b := setup(t, signature.SchemeStandard)
	h := signature.Sign(b.scheme, b.cur, "msg_1", now, body)
	done := make(chan error)
	for range 8 {
		go func() {
			var err error
			for range 100 {
				if _, e := b.verifier.Verify(h, body); e != nil {
					err = e
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestSignPanicsOnASecretOfAnotherScheme(t *testing.T) {
	t.Parallel()
	b := setup(t, signature.SchemeStripe)
	for _, tc := range []struct {
		name   string
		scheme signature.Scheme
		secret signature.Secret
	}{
		{"secret of another scheme", signature.SchemeStandard, b.cur},
		{"zero secret", signature.SchemeStripe, signature.Secret{}},
		{"unknown scheme", "svix", b.cur},
		{"adyen, which signs in the body", signature.SchemeAdyen, adyenSecret(t, testAdyenKeys[0])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Sign did not panic")
				}
			}()
			signature.Sign(tc.scheme, tc.secret, "msg_1", now, body)
		})
	}
}

func TestSignProducesThePSPHeaders(t *testing.T) {
	t.Parallel()
	std := setup(t, signature.SchemeStandard)
	h := signature.Sign(std.scheme, std.cur, "msg_1", now, body)
	if len(h) != 3 || h.Get("webhook-id") != "msg_1" || h.Get("webhook-timestamp") != "1700000000" ||
		!strings.HasPrefix(h.Get("webhook-signature"), "v1,") || len(h.Get("webhook-signature")) != 3+44 {
		t.Errorf("standard headers = %v", h)
	}
	str := setup(t, signature.SchemeStripe)
	h = signature.Sign(str.scheme, str.cur, "msg_1", now, body)
	if len(h) != 1 || !strings.HasPrefix(h.Get("Stripe-Signature"), "t=1700000000,v1=") || len(h.Get("Stripe-Signature")) != 16+64 {
		t.Errorf("stripe headers = %v", h)
	}
}

func TestReason(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]string{
		nil:                        "",
		signature.ErrMissingHeader: "missing_header",
		signature.ErrMalformed:     "malformed",
		signature.ErrTimestamp:     "timestamp",
		signature.ErrNoMatch:       "no_match",
		fmt.Errorf("handler: %w", signature.ErrNoMatch): "no_match",
		errors.New("signature: invalid"):                "other",
		signature.ErrInvalid:                            "other",
	} {
		if got := signature.Reason(err); got != want {
			t.Errorf("Reason(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestParseScheme(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]signature.Scheme{"standard": signature.SchemeStandard, "stripe": signature.SchemeStripe, "adyen": signature.SchemeAdyen} {
		if got, err := signature.ParseScheme(in); err != nil || got != want {
			t.Errorf("ParseScheme(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "Stripe", "svix", "Adyen"} {
		if _, err := signature.ParseScheme(in); err == nil {
			t.Errorf("ParseScheme(%q) succeeded", in)
		}
	}
}
