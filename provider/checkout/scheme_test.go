package checkout

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

const (
	keyOld  = "checkout-old-secret-key-0123456789"
	keyNew  = "checkout-new-secret-key-0123456789"
	authOld = "Bearer old-authorization-value"
	authNew = "Bearer new-authorization-value"
)

// verifier verifies with the secrets csv, as a source's secrets_env holds
// them.
func verifier(t testing.TB, csv string) (*signature.Verifier, []signature.Secret) {
	t.Helper()
	secrets, err := signature.ParseSecrets(Scheme, csv)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(Scheme, secrets, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v, secrets
}

// signed is body's headers signed with the secret entry csv.
func signed(t testing.TB, csv string, body []byte) http.Header {
	t.Helper()
	secrets, err := signature.ParseSecrets(Scheme, csv)
	if err != nil {
		t.Fatal(err)
	}
	return signature.Sign(Scheme, secrets[0], "", time.Now(), body)
}

func TestCkoSignatureRefusesWhatCheckoutDidNotSign(t *testing.T) {
	t.Parallel()
	body := sample("payment_captured.json")
	v, _ := verifier(t, keyOld+"|"+authOld)
	good := signed(t, keyOld+"|"+authOld, body)
	if res, err := v.Verify(good, body); err != nil || res.SecretIndex != 0 {
		t.Fatalf("authentic delivery: %+v, %v", res, err)
	}
	with := func(change func(h http.Header)) http.Header {
		h := good.Clone()
		change(h)
		return h
	}
	forged := append([]byte(nil), body...)
	forged[len(forged)-3] = ' '
	for _, tc := range []struct {
		name string
		h    http.Header
		body []byte
		want error
	}{
		{"a byte of the body changed", good, forged, signature.ErrNoMatch},
		{"signed with another secret key", with(func(h http.Header) {
			h.Set(HeaderSignature, signed(t, keyNew+"|"+authOld, body).Get(HeaderSignature))
		}), body, signature.ErrNoMatch},
		{"Cko-Signature missing", with(func(h http.Header) { h.Del(HeaderSignature) }), body, signature.ErrMissingHeader},
		{"Cko-Signature empty", with(func(h http.Header) { h.Set(HeaderSignature, "") }), body, signature.ErrMissingHeader},
		{"Cko-Signature repeated", with(func(h http.Header) { h.Add(HeaderSignature, good.Get(HeaderSignature)) }), body, signature.ErrMalformed},
		{"Cko-Signature not hex", with(func(h http.Header) { h.Set(HeaderSignature, strings.Repeat("zz", 32)) }), body, signature.ErrMalformed},
		{"Cko-Signature too short", with(func(h http.Header) { h.Set(HeaderSignature, good.Get(HeaderSignature)[:62]) }), body, signature.ErrMalformed},
		{"Cko-Signature base64", with(func(h http.Header) { h.Set(HeaderSignature, "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80=") }), body, signature.ErrMalformed},
		{"Authorization wrong", with(func(h http.Header) { h.Set(HeaderAuthorization, authNew) }), body, signature.ErrNoMatch},
		{"Authorization a prefix of the value", with(func(h http.Header) { h.Set(HeaderAuthorization, authOld[:10]) }), body, signature.ErrNoMatch},
		{"Authorization missing", with(func(h http.Header) { h.Del(HeaderAuthorization) }), body, signature.ErrMissingHeader},
		{"Authorization repeated", with(func(h http.Header) { h.Add(HeaderAuthorization, authOld) }), body, signature.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := v.Verify(tc.h, tc.body)
			if !errors.Is(err, tc.want) || !errors.Is(err, signature.ErrInvalid) || res != (signature.Result{}) {
				t.Fatalf("Verify = %+v, %v; want %v", res, err, tc.want)
			}
			for _, secret := range []string{keyOld, authOld, authNew} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q reveals %q", err, secret)
				}
			}
		})
	}
}

func TestPrecheckRefusesABadCkoSignatureBeforeTheBody(t *testing.T) {
	t.Parallel()
	v, _ := verifier(t, keyOld+"|"+authOld)
	if err := v.Precheck(http.Header{}); !errors.Is(err, signature.ErrMissingHeader) {
		t.Errorf("Precheck without Cko-Signature = %v, want ErrMissingHeader", err)
	}
	if err := v.Precheck(http.Header{HeaderSignature: {"abc"}}); !errors.Is(err, signature.ErrMalformed) {
		t.Errorf("Precheck of a short Cko-Signature = %v, want ErrMalformed", err)
	}
	body := sample("payment_captured.json")
	if err := v.Precheck(signed(t, keyNew, body)); err != nil {
		t.Errorf("Precheck of a well-formed Cko-Signature = %v, want nil (the MAC is Verify's)", err)
	}
}

// TestEitherSecretOfARotationVerifies: during a rotation the source holds
// both entries; each verifies with its own Authorization value, never with
// the other's.
func TestEitherSecretOfARotationVerifies(t *testing.T) {
	t.Parallel()
	body := sample("payment_refunded.json")
	v, _ := verifier(t, keyOld+"|"+authOld+", "+keyNew+"|"+authNew)
	for i, entry := range []string{keyOld + "|" + authOld, keyNew + "|" + authNew} {
		res, err := v.Verify(signed(t, entry, body), body)
		if err != nil || res.SecretIndex != i {
			t.Errorf("secret %d: Verify = %+v, %v; want SecretIndex %d", i, res, err, i)
		}
	}
	crossed := signed(t, keyNew+"|"+authOld, body)
	if _, err := v.Verify(crossed, body); !errors.Is(err, signature.ErrNoMatch) {
		t.Errorf("new key with the old Authorization = %v, want ErrNoMatch", err)
	}
}

// TestAnEntryWithoutAnAuthorizationValueChecksTheSignatureAlone: the
// Authorization check is optional, per secret.
func TestAnEntryWithoutAnAuthorizationValueChecksTheSignatureAlone(t *testing.T) {
	t.Parallel()
	body := sample("payment_approved.json")
	v, _ := verifier(t, keyOld)
	h := signed(t, keyOld, body)
	if h.Get(HeaderAuthorization) != "" {
		t.Fatalf("signed without a value, yet Authorization = %q", h.Get(HeaderAuthorization))
	}
	if _, err := v.Verify(h, body); err != nil {
		t.Fatalf("Verify = %v", err)
	}
	h.Set(HeaderAuthorization, "anything")
	if _, err := v.Verify(h, body); err != nil {
		t.Fatalf("Verify with an Authorization nobody asked for = %v", err)
	}
}

// TestAReplayVerifiesForever: Checkout.com signs no timestamp, so the
// scheme has no replay window; a replayed delivery is answered by the
// event id's deduplication (the conformance suite delivers each sample
// twice and checks the second records nothing).
func TestAReplayVerifiesForever(t *testing.T) {
	t.Parallel()
	if signature.Timestamped(Scheme) || signature.SignsInBody(Scheme) {
		t.Fatal("the checkout scheme says it signs a timestamp, or inside the body")
	}
	body := sample("payment_captured.json")
	v, _ := verifier(t, keyOld)
	h := signed(t, keyOld, body)
	later := v.WithClock(func() time.Time { return time.Now().Add(365 * 24 * time.Hour) })
	if _, err := later.Verify(h, body); err != nil {
		t.Fatalf("a year later: %v", err)
	}
}

func TestCheckoutSecretsParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, csv string
		ok        bool
	}{
		{"a key", keyOld, true},
		{"a key and its Authorization value", keyOld + "|" + authOld, true},
		{"spaces around the separator", keyOld + " | " + authOld, true},
		{"no key", "|" + authOld, false},
		{"an empty Authorization value", keyOld + "|", false},
		{"an empty entry", keyOld + ",", false},
	} {
		_, err := signature.ParseSecrets(Scheme, tc.csv)
		if (err == nil) != tc.ok {
			t.Errorf("%s: ParseSecrets = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && (strings.Contains(err.Error(), keyOld) || strings.Contains(err.Error(), authOld)) {
			t.Errorf("%s: error %q reveals the secret", tc.name, err)
		}
	}
	short, err := signature.ParseSecrets(Scheme, "short-key|"+authOld)
	if err != nil {
		t.Fatal(err)
	}
	if err := signature.CheckKeyLength(short); !errors.Is(err, signature.ErrShortKey) || strings.Contains(err.Error(), "short-key") {
		t.Errorf("CheckKeyLength of a 9-byte key = %v, want ErrShortKey without the key", err)
	}
}
