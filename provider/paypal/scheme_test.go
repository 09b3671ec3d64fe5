package paypal

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

// verifier verifies with the webhook ids csv.
func verifier(t testing.TB, csv string) *signature.Verifier {
	t.Helper()
	secrets, err := signature.ParseSecrets(Scheme, csv)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(Scheme, secrets, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// signed is body's headers for webhookID, at ts, with the cert URL certURL.
func signed(t testing.TB, webhookID string, ts time.Time, body []byte, certURL string) http.Header {
	t.Helper()
	secrets, err := signature.ParseSecrets(Scheme, webhookID)
	if err != nil {
		t.Fatal(err)
	}
	h := signature.Sign(Scheme, secrets[0], "", ts, body)
	if certURL != "" {
		h.Set(HeaderCertURL, certURL)
	}
	return h
}

func TestPayPalSignatureRefusesWhatPayPalDidNotSign(t *testing.T) {
	t.Parallel()
	body := sample("payment_capture_completed.json")
	v := verifier(t, sampleWebhookID)
	good := signed(t, sampleWebhookID, time.Now(), body, "")
	if res, err := v.Verify(good, body); err != nil || res.SecretIndex != 0 {
		t.Fatalf("authentic delivery: %+v, %v", res, err)
	}
	u, _ := url.Parse(pki.srv.URL)
	off := pki.offlist.URL + "/v1/notifications/certs/CERT-offlist"
	with := func(change func(h http.Header)) http.Header {
		h := good.Clone()
		change(h)
		return h
	}
	setURL := func(s string) http.Header { return with(func(h http.Header) { h.Set(HeaderCertURL, s) }) }
	forged := append([]byte(nil), body...)
	forged[len(forged)-3] = ' '
	for _, tc := range []struct {
		name string
		h    http.Header
		body []byte
		want error
	}{
		{"a byte of the body changed", good, forged, signature.ErrNoMatch},
		{"another webhook id", signed(t, "9XX597110X687430LKGECATB", time.Now(), body, ""), body, signature.ErrNoMatch},
		{"transmission id changed", with(func(h http.Header) { h.Set(HeaderTransmissionID, "other") }), body, signature.ErrNoMatch},
		{"transmission time an hour old", signed(t, sampleWebhookID, time.Now().Add(-time.Hour), body, ""), body, signature.ErrTimestamp},
		{"transmission time not RFC 3339", with(func(h http.Header) { h.Set(HeaderTransmissionTime, "1764497102") }), body, signature.ErrMalformed},
		{"a certificate of another CA", setURL(pki.srv.URL + "/other"), body, ErrCert},
		{"a cert URL off the allowlist", setURL(off), body, ErrCertURL},
		{"an http cert URL", setURL("http://" + u.Host + "/v1/notifications/certs/CERT-sample"), body, ErrCertURL},
		{"a cert URL with userinfo", setURL("https://user:pw@" + u.Host + "/v1/notifications/certs/CERT-sample"), body, ErrCertURL},
		{"a cert URL on another port", setURL("https://" + u.Hostname() + ":1/v1/notifications/certs/CERT-sample"), body, ErrCertURL},
		{"a cert URL redirected off the allowlist", setURL(pki.srv.URL + "/redirect-off"), body, ErrCertFetch},
		{"an oversized certificate", setURL(pki.srv.URL + "/big"), body, ErrCertFetch},
		{"a cert URL not found", setURL(pki.srv.URL + "/nothing"), body, ErrCertFetch},
		{"another algorithm", with(func(h http.Header) { h.Set(HeaderAuthAlgo, "SHA1withRSA") }), body, signature.ErrMalformed},
		{"signature not base64", with(func(h http.Header) { h.Set(HeaderTransmissionSig, "!!") }), body, signature.ErrMalformed},
		{"signature missing", with(func(h http.Header) { h.Del(HeaderTransmissionSig) }), body, signature.ErrMissingHeader},
		{"cert URL repeated", with(func(h http.Header) { h.Add(HeaderCertURL, pki.sampleCert) }), body, signature.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := v.Verify(tc.h, tc.body)
			if !errors.Is(err, tc.want) || !errors.Is(err, signature.ErrInvalid) || res != (signature.Result{}) {
				t.Fatalf("Verify = %+v, %v; want %v", res, err, tc.want)
			}
			if strings.Contains(err.Error(), sampleWebhookID) {
				t.Errorf("error %q reveals the webhook id", err)
			}
		})
	}
	if n := hits("/v1/notifications/certs/CERT-offlist") + hits("/v1/notifications/certs/CERT-redirected"); n != 0 {
		t.Errorf("%d requests reached the host off the allowlist, want none", n)
	}
}

// TestACertURLOffTheAllowlistIsNeverFetched: refused by Precheck, before
// the body, and by Verify, with no request made.
func TestACertURLOffTheAllowlistIsNeverFetched(t *testing.T) {
	t.Parallel()
	body := sample("payment_capture_denied.json")
	v := verifier(t, sampleWebhookID)
	h := signed(t, sampleWebhookID, time.Now(), body, pki.offlist.URL+"/v1/notifications/certs/CERT-never")
	if err := v.Precheck(h); !errors.Is(err, ErrCertURL) {
		t.Errorf("Precheck = %v, want ErrCertURL", err)
	}
	if _, err := v.Verify(h, body); !errors.Is(err, ErrCertURL) {
		t.Errorf("Verify = %v, want ErrCertURL", err)
	}
	if n := hits("/v1/notifications/certs/CERT-never"); n != 0 {
		t.Fatalf("%d requests for a URL off the allowlist, want none", n)
	}
	if got := newFetcher(fetchConfig{}).hosts; len(got) != 4 || got[0] != "api.paypal.com" {
		t.Errorf("the default allowlist is %v, want PayPal's four hosts", got)
	}
}

// TestTheCertificateIsFetchedOnce: a second delivery naming the same URL
// verifies from the cache.
func TestTheCertificateIsFetchedOnce(t *testing.T) {
	t.Parallel()
	const path = "/v1/notifications/certs/CERT-cache"
	v := verifier(t, sampleWebhookID)
	for i, name := range []string{"payment_capture_completed.json", "payment_capture_refunded.json"} {
		body := sample(name)
		if _, err := v.Verify(signed(t, sampleWebhookID, time.Now(), body, pki.srv.URL+path), body); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	if n := hits(path); n != 1 {
		t.Fatalf("%d fetches of the certificate, want 1", n)
	}
}

// TestEitherWebhookIDOfARotationVerifies: the source lists two webhook
// ids; each verifies, and says which.
func TestEitherWebhookIDOfARotationVerifies(t *testing.T) {
	t.Parallel()
	const other = "3FX12345AB6789012CDEFGHJ"
	body := sample("payment_authorization_created.json")
	v := verifier(t, sampleWebhookID+","+other)
	for i, id := range []string{sampleWebhookID, other} {
		res, err := v.Verify(signed(t, id, time.Now(), body, ""), body)
		if err != nil || res.SecretIndex != i {
			t.Errorf("webhook id %d: %+v, %v", i, res, err)
		}
	}
	if !signature.Timestamped(Scheme) {
		t.Error("the paypal scheme does not say it signs a timestamp")
	}
}
