package signature

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
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

// adyenDecoded is what encoding/json, the decoder the adapters use, reads
// from the members parseAdyen signs.
type adyenDecoded struct {
	NotificationItems []struct {
		NotificationRequestItem struct {
			PSPReference        string `json:"pspReference"`
			OriginalReference   string `json:"originalReference"`
			MerchantAccountCode string `json:"merchantAccountCode"`
			MerchantReference   string `json:"merchantReference"`
			EventCode           string `json:"eventCode"`
			Success             string `json:"success"`
			Amount              *struct {
				Value    *int64 `json:"value"`
				Currency string `json:"currency"`
			} `json:"amount"`
			AdditionalData *struct {
				HMACSignature string `json:"hmacSignature"`
			} `json:"additionalData"`
		}
	} `json:"notificationItems"`
}

func FuzzParseAdyen(f *testing.F) {
	v, secrets := fuzzVerifier(f, SchemeAdyen, "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056, 00ff")

	raw, err := os.ReadFile("testdata/adyen/vectors.json")
	if err != nil {
		f.Fatal(err)
	}
	var file struct {
		Vectors []struct{ Body, UnsignedBody string } `json:"vectors"`
		Batch   struct{ Body string }                 `json:"batch"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		f.Fatal(err)
	}
	for _, vec := range file.Vectors {
		f.Add([]byte(vec.Body))
	}
	f.Add([]byte(file.Batch.Body))
	signed := []byte(file.Vectors[0].Body)
	for _, edit := range [][2]string{
		{`"value":1000`, `"value":1000.0`},
		{`"value":1000`, `"value":-0`},
		{`"value":1000`, `"value":"1000"`},
		{`"value":1000`, `"value":9007199254740992`},
		{`"pspReference":"`, `"pspReference":"x","pspReference":"`},
		{`"pspReference":"`, `"PspReference":"x","pspReference":"`},
		{`"success":"true"`, `"success":"true","ſuccess":"false"`},
		{`"success":"true"`, `"success":true`},
		{`"pspReference":"`, `"pspReference":"a:`},
		{`"hmacSignature":"`, `"hmacSignature":"A`},
		{`"hmacSignature":"`, `"hmacSignature":null,"x":"`},
		{`"hmacSignature"`, `"HMACSignature"`},
		{`"amount":{`, `"amount":null,"x":{`},
		{`"merchantReference":"`, `"merchantReference":"\ud800:\u00e9`},
		{`{"live"`, `{"notificationItems":[],"live"`},
	} {
		f.Add(bytes.Replace(signed, []byte(edit[0]), []byte(edit[1]), 1))
	}
	f.Add(append(append([]byte{}, signed...), '{', '}'))
	f.Add(signed[:len(signed)/2])
	f.Add([]byte(`{"notificationItems":[{"NotificationRequestItem":{}}]}`))
	f.Add([]byte(`{"notificationItems":[` + strings.Repeat(`{"NotificationRequestItem":{}},`, maxAdyenItems) + `{"NotificationRequestItem":{}}]}`))
	f.Add([]byte(`{"notificationItems":[{"NotificationRequestItem":{"x":[[[{"a":[1,{}]}]]]}}]}`))
	f.Add([]byte(`{"notificationItems":[{"NotificationRequestItem":{"pspReference":"\xff"}}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))

	f.Fuzz(func(t *testing.T, body []byte) {
		items, perr := parseAdyen(body)
		checkParseError(t, perr)
		if perr == nil {
			if len(items) == 0 || len(items) > maxAdyenItems {
				t.Fatalf("%d items accepted", len(items))
			}
			// encoding/json must read the signed members as parseAdyen
			// does: what is verified is what an adapter records.
			var d adyenDecoded
			if err := json.Unmarshal(body, &d); err != nil {
				t.Fatalf("parseAdyen accepted what encoding/json refuses: %v", err)
			}
			if len(d.NotificationItems) != len(items) {
				t.Fatalf("%d items, encoding/json reads %d", len(items), len(d.NotificationItems))
			}
			for i, got := range items {
				it := d.NotificationItems[i].NotificationRequestItem
				want := adyenFields{
					pspReference: it.PSPReference, originalReference: it.OriginalReference,
					merchantAccountCode: it.MerchantAccountCode, merchantReference: it.MerchantReference,
					eventCode: it.EventCode, success: it.Success,
				}
				if it.Amount != nil {
					want.currency = it.Amount.Currency
					if it.Amount.Value != nil {
						want.value = strconv.FormatInt(*it.Amount.Value, 10)
					}
				}
				if it.AdditionalData != nil {
					want.signature = it.AdditionalData.HMACSignature
				}
				if got != want {
					t.Fatalf("item %d: parseAdyen %+v, encoding/json %+v", i+1, got, want)
				}
				if strings.Count(got.signedData(), ":") != 7+strings.Count(got.merchantReference, ":") {
					t.Fatalf("item %d: a colon outside merchantReference: %q", i+1, got.signedData())
				}
			}
		}

		res, err := v.Verify(nil, body)
		checkVerifyError(t, err)
		if err == nil {
			if perr != nil || res.ID != "" || !res.Timestamp.IsZero() {
				t.Fatalf("Verify accepted %q with %+v", body, res)
			}
			for i := range items {
				sig, _ := standardEncoding.DecodeString(items[i].signature)
				if !matches(secrets, [][]byte{sig}, func(key []byte) []byte { return adyenMAC(key, &items[i]) }) {
					t.Fatalf("Verify accepted item %d unsigned", i+1)
				}
			}
		}

		out, serr := SignAdyenNotification(secrets[1], body)
		if (serr == nil) != (perr == nil) {
			t.Fatalf("SignAdyenNotification: %v, parseAdyen: %v", serr, perr)
		}
		if serr != nil {
			checkParseError(t, serr)
			return
		}
		res, err = v.Verify(nil, out)
		if err != nil || res.SecretIndex != 1 {
			t.Fatalf("Verify of the signed body = %+v, %v", res, err)
		}
		again, err := parseAdyen(out)
		if err != nil || len(again) != len(items) {
			t.Fatalf("parseAdyen of the signed body: %d items, %v", len(again), err)
		}
		for i := range items {
			a, b := items[i], again[i]
			a.signature, b.signature = "", ""
			if a != b {
				t.Fatalf("signing changed item %d: %+v to %+v", i+1, items[i], again[i])
			}
		}
	})
}
