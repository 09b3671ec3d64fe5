package gocardless

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

const (
	secretOld = "gocardless-old-endpoint-secret-0123456789"
	secretNew = "gocardless-new-endpoint-secret-0123456789"
)

// verifier verifies with the secrets csv, as a source's secrets_env holds
// them.
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

// signed is body's headers signed with the secret entry.
func signed(t testing.TB, entry string, body []byte) http.Header {
	t.Helper()
	secrets, err := signature.ParseSecrets(Scheme, entry)
	if err != nil {
		t.Fatal(err)
	}
	return signature.Sign(Scheme, secrets[0], "", time.Now(), body)
}

// TestWebhookSignatureIsTheHexHMACOfTheRawBody: a known answer, computed
// apart from this package (openssl dgst -sha256 -hmac <secret>), verifies,
// and Sign writes it.
func TestWebhookSignatureIsTheHexHMACOfTheRawBody(t *testing.T) {
	t.Parallel()
	body := []byte(`{"events":[]}`)
	const want = "787d770235681d85b74bcf10837bd4f48ddb72d34bbf623f19031252b5a28a5d"
	if got := signed(t, sampleSecret, body).Get(HeaderSignature); got != want {
		t.Fatalf("Sign wrote %s = %q, want %q", HeaderSignature, got, want)
	}
	for _, sig := range []string{want, strings.ToUpper(want)} {
		if res, err := verifier(t, sampleSecret).Verify(http.Header{HeaderSignature: {sig}}, body); err != nil || res.SecretIndex != 0 {
			t.Errorf("Verify(%s) = %+v, %v", sig, res, err)
		}
	}
}

func TestWebhookSignatureRefusesWhatGoCardlessDidNotSign(t *testing.T) {
	t.Parallel()
	body := sample("webhook_batch.json")
	v := verifier(t, secretOld)
	good := signed(t, secretOld, body)
	if res, err := v.Verify(good, body); err != nil || res.SecretIndex != 0 {
		t.Fatalf("authentic delivery: %+v, %v", res, err)
	}
	with := func(change func(h http.Header)) http.Header {
		h := good.Clone()
		change(h)
		return h
	}
	forged := []byte(strings.Replace(string(body), `"PM0PAYLOCK0007"`, `"PM0PAYLOCK0008"`, 1))
	for _, tc := range []struct {
		name string
		h    http.Header
		body []byte
		want error
	}{
		{"a payment id of the body changed", good, forged, signature.ErrNoMatch},
		{"a byte appended to the body", good, append(append([]byte{}, body...), ' '), signature.ErrNoMatch},
		{"signed with another secret", signed(t, secretNew, body), body, signature.ErrNoMatch},
		{"signed with no secret at all", with(func(h http.Header) { h.Set(HeaderSignature, strings.Repeat("0", 64)) }), body, signature.ErrNoMatch},
		{"Webhook-Signature missing", with(func(h http.Header) { h.Del(HeaderSignature) }), body, signature.ErrMissingHeader},
		{"Webhook-Signature empty", with(func(h http.Header) { h.Set(HeaderSignature, "") }), body, signature.ErrMissingHeader},
		{"Webhook-Signature repeated", with(func(h http.Header) { h.Add(HeaderSignature, good.Get(HeaderSignature)) }), body, signature.ErrMalformed},
		{"Webhook-Signature not hex", with(func(h http.Header) { h.Set(HeaderSignature, strings.Repeat("zz", 32)) }), body, signature.ErrMalformed},
		{"Webhook-Signature too short", with(func(h http.Header) { h.Set(HeaderSignature, good.Get(HeaderSignature)[:62]) }), body, signature.ErrMalformed},
		{"Webhook-Signature too long", with(func(h http.Header) { h.Set(HeaderSignature, good.Get(HeaderSignature)+"00") }), body, signature.ErrMalformed},
		{"Webhook-Signature base64", with(func(h http.Header) { h.Set(HeaderSignature, "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80=") }), body, signature.ErrMalformed},
		{"Webhook-Signature with a scheme prefix", with(func(h http.Header) { h.Set(HeaderSignature, "sha256="+good.Get(HeaderSignature)) }), body, signature.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := v.Verify(tc.h, tc.body)
			if !errors.Is(err, tc.want) || !errors.Is(err, signature.ErrInvalid) || res != (signature.Result{}) {
				t.Fatalf("Verify = %+v, %v; want %v", res, err, tc.want)
			}
			if strings.Contains(err.Error(), secretOld) || strings.Contains(err.Error(), good.Get(HeaderSignature)) {
				t.Errorf("error %q reveals the secret or the signature", err)
			}
		})
	}
}

func TestPrecheckRefusesABadWebhookSignatureBeforeTheBody(t *testing.T) {
	t.Parallel()
	v := verifier(t, secretOld)
	if err := v.Precheck(http.Header{}); !errors.Is(err, signature.ErrMissingHeader) {
		t.Errorf("Precheck without Webhook-Signature = %v, want ErrMissingHeader", err)
	}
	if err := v.Precheck(http.Header{HeaderSignature: {"abc"}}); !errors.Is(err, signature.ErrMalformed) {
		t.Errorf("Precheck of a short Webhook-Signature = %v, want ErrMalformed", err)
	}
	if err := v.Precheck(signed(t, secretNew, sample("webhook_confirmed.json"))); err != nil {
		t.Errorf("Precheck of a well-formed Webhook-Signature = %v, want nil (the MAC is Verify's)", err)
	}
}

// TestEitherSecretOfARotationVerifies: while an endpoint's secret is
// rotated the source holds both; each verifies, and says which it was.
func TestEitherSecretOfARotationVerifies(t *testing.T) {
	t.Parallel()
	body := sample("webhook_refund.json")
	v := verifier(t, secretOld+", "+secretNew)
	for i, entry := range []string{secretOld, secretNew} {
		res, err := v.Verify(signed(t, entry, body), body)
		if err != nil || res.SecretIndex != i {
			t.Errorf("secret %d: Verify = %+v, %v; want SecretIndex %d", i, res, err, i)
		}
	}
	if _, err := v.Verify(signed(t, "gocardless-third-endpoint-secret-0123", body), body); !errors.Is(err, signature.ErrNoMatch) {
		t.Errorf("a third secret = %v, want ErrNoMatch", err)
	}
}

// TestAReplayVerifiesForever: GoCardless signs no timestamp, so the scheme
// has no replay window; what a replay names is fetched again, and the
// state-derived event ids record nothing more.
func TestAReplayVerifiesForever(t *testing.T) {
	t.Parallel()
	if signature.Timestamped(Scheme) || signature.SignsInBody(Scheme) {
		t.Fatal("the gocardless scheme says it signs a timestamp, or inside the body")
	}
	body := sample("webhook_confirmed.json")
	h := signed(t, secretOld, body)
	later := verifier(t, secretOld).WithClock(func() time.Time { return time.Now().Add(365 * 24 * time.Hour) })
	if _, err := later.Verify(h, body); err != nil {
		t.Fatalf("a year later: %v", err)
	}
}

func TestGoCardlessSecretsParse(t *testing.T) {
	t.Parallel()
	secrets, err := signature.ParseSecrets(Scheme, secretOld+","+secretNew)
	if err != nil || len(secrets) != 2 {
		t.Fatalf("two secrets: %d, %v", len(secrets), err)
	}
	if _, err := signature.ParseSecrets(Scheme, secretOld+","); err == nil || strings.Contains(err.Error(), secretOld) {
		t.Errorf("an empty entry: %v, want an error without the secret", err)
	}
	short, err := signature.ParseSecrets(Scheme, "short-secret")
	if err != nil {
		t.Fatal(err)
	}
	if err := signature.CheckKeyLength(short); !errors.Is(err, signature.ErrShortKey) || strings.Contains(err.Error(), "short-secret") {
		t.Errorf("CheckKeyLength of a 12-byte secret = %v, want ErrShortKey without the secret", err)
	}
	if err := signature.CheckKeyLength(secrets); err != nil {
		t.Errorf("CheckKeyLength of 41-byte secrets = %v", err)
	}
}
