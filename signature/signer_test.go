package signature_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/paylock/paylock/signature"
)

// A StandardSigner writes the webhook-signature header SignStandard
// writes, with one secret or during a rotation, and a verifier holding
// any one of its secrets accepts what it signs, also when many goroutines
// sign at once (its HMAC states are shared).
func TestAStandardSignerSignsAsSignStandardDoes(t *testing.T) {
	b := setup(t, signature.SchemeStandard)
	for _, secrets := range [][]signature.Secret{{b.cur}, {b.cur, b.old}, {b.other, b.cur}} {
		signer, err := signature.NewStandardSigner(secrets)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 50 {
					id := "msg_" + strconv.Itoa(g) + "_" + strconv.Itoa(i)
					payload := append([]byte(id), body...)
					want := signature.SignStandard(secrets, id, now, payload)
					got := signer.Signature(id, strconv.FormatInt(now.Unix(), 10), payload)
					if got != want.Get(signature.HeaderWebhookSignature) {
						t.Errorf("%d secrets, %s: Signature %q, SignStandard %q", len(secrets), id, got, want.Get(signature.HeaderWebhookSignature))
						return
					}
					h := http.Header{}
					h.Set(signature.HeaderWebhookID, id)
					h.Set(signature.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
					h.Set(signature.HeaderWebhookSignature, got)
					_, err := b.verifier.Verify(h, payload)
					if knows := secrets[0] != b.other || len(secrets) > 1; knows != (err == nil) {
						t.Errorf("%d secrets, %s: the verifier (old, cur) answered %v", len(secrets), id, err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

// A StandardSigner is refused no secrets, a zero Secret and a secret of
// another scheme.
func TestAStandardSignerTakesOnlyStandardSecrets(t *testing.T) {
	stripe, err := signature.ParseSecrets(signature.SchemeStripe, "whsec_stripe_test")
	if err != nil {
		t.Fatal(err)
	}
	for name, secrets := range map[string][]signature.Secret{
		"none": nil, "zero": {{}}, "stripe": stripe,
	} {
		if s, err := signature.NewStandardSigner(secrets); err == nil || s != nil {
			t.Errorf("%s: NewStandardSigner = %v, %v; want an error", name, s, err)
		}
	}
}
