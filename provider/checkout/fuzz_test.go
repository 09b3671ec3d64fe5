package checkout

import (
	"bytes"
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"

	"github.com/paylock/paylock/signature"
)

// FuzzCkoSignature feeds the verifier any Cko-Signature and Authorization
// header and body: it never panics, every refusal wraps ErrInvalid, and it
// accepts only the true MAC of the body with the configured Authorization.
func FuzzCkoSignature(f *testing.F) {
	body := sample("payment_captured.json")
	good := signed(f, keyOld+"|"+authOld, body)
	f.Add(good.Get(HeaderSignature), authOld, body)
	f.Add(good.Get(HeaderSignature), authNew, body)
	f.Add(good.Get(HeaderSignature), "", body)
	f.Add("", authOld, body)
	f.Add("zz", authOld, []byte(`{}`))
	f.Add(good.Get(HeaderSignature)+"00", authOld, body)
	f.Add(string(bytes.ToUpper([]byte(good.Get(HeaderSignature)))), authOld, body)
	v, _ := verifier(f, keyOld+"|"+authOld)
	key := []byte(keyOld)
	f.Fuzz(func(t *testing.T, sig, auth string, b []byte) {
		h := http.Header{}
		if sig != "" {
			h.Set(HeaderSignature, sig)
		}
		if auth != "" {
			h.Set(HeaderAuthorization, auth)
		}
		res, err := v.Verify(h, b)
		if err != nil {
			if !errors.Is(err, signature.ErrInvalid) {
				t.Fatalf("Verify error %v does not wrap ErrInvalid", err)
			}
			return
		}
		got, decErr := hex.DecodeString(sig)
		if decErr != nil || !hmac.Equal(got, signature.BodyMAC(key, b)) || auth != authOld || res.SecretIndex != 0 {
			t.Fatalf("Verify accepted sig %q auth %q for a body it does not match", sig, auth)
		}
	})
}
