package signature

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

var fuzzNow = time.Unix(1_700_000_000, 0)

func fuzzVerifier(f *testing.F, scheme Scheme, csv string) (*Verifier, []Secret) {
	f.Helper()
	secrets, err := ParseSecrets(scheme, csv)
	if err != nil {
		f.Fatal(err)
	}
	v, err := NewVerifier(scheme, secrets, 0)
	if err != nil {
		f.Fatal(err)
	}
	return v.WithClock(func() time.Time { return fuzzNow }), secrets
}

// checkParseError fails unless err is nil or a malformed-header error.
func checkParseError(t *testing.T, err error) {
	t.Helper()
	if err != nil && (!errors.Is(err, ErrMalformed) || Reason(err) != "malformed") {
		t.Fatalf("parser error %v is not ErrMalformed", err)
	}
}

func checkSigs(t *testing.T, sigs [][]byte) {
	t.Helper()
	if len(sigs) > maxSignatures {
		t.Fatalf("%d signatures accepted", len(sigs))
	}
	for _, s := range sigs {
		if len(s) != macSize {
			t.Fatalf("signature of %d bytes accepted", len(s))
		}
	}
}

// matches reports whether one of sigs is the MAC under one of secrets.
func matches(secrets []Secret, sigs [][]byte, mac func(key []byte) []byte) bool {
	for _, s := range secrets {
		for _, sig := range sigs {
			if hmac.Equal(sig, mac(s.k.key())) {
				return true
			}
		}
	}
	return false
}

// checkVerifyError fails unless err is nil or one of the sentinels.
func checkVerifyError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Verify error %v does not wrap ErrInvalid", err)
	}
	switch Reason(err) {
	case "missing_header", "malformed", "timestamp", "no_match":
	default:
		t.Fatalf("Verify error %v has Reason %q", err, Reason(err))
	}
}

// checkPrecheck fails unless Precheck(h) gives the error Verify gave for
// h, or nil when Verify succeeded or found no matching signature.
func checkPrecheck(t *testing.T, v *Verifier, h http.Header, verifyErr error) {
	t.Helper()
	err := v.Precheck(h)
	checkVerifyError(t, err)
	if err == nil && verifyErr != nil && !errors.Is(verifyErr, ErrNoMatch) ||
		err != nil && Reason(err) != Reason(verifyErr) {
		t.Fatalf("Precheck = %v, Verify = %v", err, verifyErr)
	}
}

func FuzzParseStandardSignature(f *testing.F) {
	v, secrets := fuzzVerifier(f, SchemeStandard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	const id, ts = "msg_p5jXN8AQM9LWM0D4loKWxJek", "1700000000"
	body := []byte(`{"test": 2432232314}`)
	valid := Sign(SchemeStandard, secrets[0], id, fuzzNow, body).Get(HeaderWebhookSignature)
	zero := "v1," + base64.StdEncoding.EncodeToString(make([]byte, macSize))
	for _, s := range []string{
		valid,
		"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		zero + " " + valid,
		"v1a,abc " + valid + " v2,xyz",
		"  " + valid + "  ",
		"",
		" ",
		",",
		"v1,",
		"v1",
		"v1,====",
		"v1,!!",
		"v1," + base64.StdEncoding.EncodeToString(make([]byte, 31)),
		"v1," + strings.TrimRight(valid[3:], "="),
		strings.Repeat(zero+" ", maxSignatures) + valid,
		strings.Repeat("v", maxHeaderBytes+1),
		"v1,\x00\xff",
	} {
		f.Add(id, ts, s, body)
	}
	f.Add("", ts, valid, body)
	f.Add(id, "", valid, body)
	f.Add(id, "01700000000", valid, body)
	f.Add(id, "-1", valid, body)
	f.Add(id, "99999999999999999999", valid, body)
	f.Add(strings.Repeat("i", maxIDBytes+1), ts, valid, body)
	f.Add(id, ts, valid, []byte{})

	f.Fuzz(func(t *testing.T, id, ts, sigHeader string, body []byte) {
		sigs, perr := parseStandardSignature(sigHeader)
		checkParseError(t, perr)
		if perr == nil {
			checkSigs(t, sigs)
			for _, s := range sigs {
				if !strings.Contains(sigHeader, "v1,"+base64.StdEncoding.EncodeToString(s)) {
					t.Fatalf("signature %x is not in %q", s, sigHeader)
				}
			}
		}

		h := http.Header{}
		h.Set(HeaderWebhookID, id)
		h.Set(HeaderWebhookTimestamp, ts)
		h.Set(HeaderWebhookSignature, sigHeader)
		res, err := v.Verify(h, body)
		checkVerifyError(t, err)
		checkPrecheck(t, v, h, err)
		if err == nil {
			// Accepted only if it really is signed, and only what the
			// parsers accept.
			if perr != nil || len(id) > maxIDBytes || !matches(secrets, sigs, func(key []byte) []byte { return standardMAC(key, id, ts, body) }) {
				t.Fatalf("Verify accepted id %q ts %q sig %q", id, ts, sigHeader)
			}
			if res.ID != id || res.Timestamp.Unix() > fuzzNow.Add(DefaultTolerance).Unix() || res.Timestamp.Unix() < fuzzNow.Add(-DefaultTolerance).Unix() {
				t.Fatalf("Result %+v", res)
			}
		}
	})
}

func FuzzParseStripeSignature(f *testing.F) {
	v, secrets := fuzzVerifier(f, SchemeStripe, "whsec_paylock_fuzz_secret")
	body := []byte(`{"id":"evt_1","object":"event"}`)
	valid := Sign(SchemeStripe, secrets[0], "", fuzzNow, body).Get(HeaderStripeSignature)
	sig := valid[strings.Index(valid, ",v1=")+4:]
	zero := hex.EncodeToString(make([]byte, macSize))
	for _, s := range []string{
		valid,
		"t=1700000000,v1=" + zero + ",v0=" + zero + ",v1=" + sig,
		"v1=" + sig + ",t=1700000000",
		"t=1700000000",
		"t=1700000000,v0=" + sig,
		"t=1700000000,t=1700000000,v1=" + sig,
		"v1=" + sig,
		"",
		",",
		"=",
		"t",
		"t=,v1=" + sig,
		"t=01700000000,v1=" + sig,
		"t=+1700000000,v1=" + sig,
		"t=1700000000,v1=" + sig[:63],
		"t=1700000000,v1=" + sig[:62],
		"t=1700000000,v1=zz" + sig[2:],
		"t=1700000000" + strings.Repeat(",v1="+zero, maxSignatures) + ",v1=" + sig,
		"t=1700000000,v0=" + strings.Repeat("a", maxHeaderBytes),
		"t=1700000000, v1=" + sig,
		"t=1700000000,v1=" + strings.ToUpper(sig),
	} {
		f.Add(s, body)
	}
	f.Add(valid, []byte{})

	f.Fuzz(func(t *testing.T, header string, body []byte) {
		ts, sigs, perr := parseStripeSignature(header)
		checkParseError(t, perr)
		if perr == nil {
			checkSigs(t, sigs)
			if !strings.Contains(header, "t="+ts) {
				t.Fatalf("t %q is not in %q", ts, header)
			}
		}

		h := http.Header{}
		h.Set(HeaderStripeSignature, header)
		res, err := v.Verify(h, body)
		checkVerifyError(t, err)
		checkPrecheck(t, v, h, err)
		if err == nil {
			if perr != nil || !matches(secrets, sigs, func(key []byte) []byte { return stripeMAC(key, ts, body) }) {
				t.Fatalf("Verify accepted %q", header)
			}
			if res.ID != "" || res.Timestamp.Unix() > fuzzNow.Add(DefaultTolerance).Unix() || res.Timestamp.Unix() < fuzzNow.Add(-DefaultTolerance).Unix() {
				t.Fatalf("Result %+v", res)
			}
		}
	})
}
