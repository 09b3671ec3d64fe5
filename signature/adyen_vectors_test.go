package signature_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/paylock/paylock/signature"
)

// adyenVectors is testdata/adyen/vectors.json, computed with Adyen's own
// Node library by testdata/adyen/gen-vectors.sh.
type adyenVectors struct {
	Command string `json:"command"`
	Library string `json:"library"`
	Vectors []struct {
		Name          string `json:"name"`
		Key           string `json:"key"`
		DataToSign    string `json:"data_to_sign"`
		HMACSignature string `json:"hmac_signature"`
		UnsignedBody  string `json:"unsigned_body"`
		Body          string `json:"body"`
	} `json:"vectors"`
	Batch struct {
		Key  string `json:"key"`
		Body string `json:"body"`
	} `json:"batch"`
}

func readAdyenVectors(t testing.TB) adyenVectors {
	t.Helper()
	raw, err := os.ReadFile("testdata/adyen/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v adyenVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Vectors) == 0 || v.Batch.Body == "" || v.Library == "" {
		t.Fatal("testdata/adyen/vectors.json holds no vectors")
	}
	return v
}

func TestAdyenLibraryVectorsAreAcceptedAndReproduced(t *testing.T) {
	t.Parallel()
	file := readAdyenVectors(t)
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			secret := adyenSecret(t, v.Key)
			other := adyenSecret(t, testAdyenKeys[2])

			got, err := signature.SignAdyenNotification(secret, []byte(v.UnsignedBody))
			if err != nil {
				t.Fatal(err)
			}
			if sig := signatureOf(t, got); sig != v.HMACSignature {
				t.Errorf("SignAdyenNotification: hmacSignature %q, %s gave %q (made by %s)", sig, file.Library, v.HMACSignature, file.Command)
			}

			// The library's body as it is, with the key alone and as the
			// second key of a rotation.
			for want, secrets := range [][]signature.Secret{{secret}, {other, secret}} {
				ver, err := signature.NewVerifier(signature.SchemeAdyen, secrets, 0)
				if err != nil {
					t.Fatal(err)
				}
				res, err := ver.Verify(nil, []byte(v.Body))
				if err != nil {
					t.Fatalf("Verify rejected the signature of %s: %v", file.Library, err)
				}
				if res != (signature.Result{SecretIndex: want}) {
					t.Errorf("Result = %+v, want SecretIndex %d", res, want)
				}
			}
			ver, err := signature.NewVerifier(signature.SchemeAdyen, []signature.Secret{other}, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ver.Verify(nil, []byte(v.Body))
			assertSentinel(t, err, signature.ErrNoMatch)
		})
	}
}

func TestAdyenLibraryBatchIsAcceptedWhole(t *testing.T) {
	t.Parallel()
	file := readAdyenVectors(t)
	ver, err := signature.NewVerifier(signature.SchemeAdyen, []signature.Secret{adyenSecret(t, file.Batch.Key)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(file.Batch.Body)
	if _, err := ver.Verify(nil, body); err != nil {
		t.Fatalf("Verify rejected the batch signed by %s: %v", file.Library, err)
	}
	// The second item's value changed: the whole batch is refused.
	_, err = ver.Verify(nil, replace(t, body, `"value":1000},"eventCode":"REFUND"`, `"value":100},"eventCode":"REFUND"`))
	assertSentinel(t, err, signature.ErrNoMatch)
}
