package signature_test

import (
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

// TestStandardVerifyAllocatesNothingOfItsOwn keeps the Standard Webhooks
// check of a delivery (Precheck, then Verify, as the handler runs them)
// free of allocations: pooled HMAC states per secret and a pooled scratch
// for the decoded signatures (issue #34: the signature was 15 allocations
// of a delivery's 150). A rotation's second secret is tried first and
// fails, so both secrets' paths are covered.
func TestStandardVerifyAllocatesNothingOfItsOwn(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	secrets, err := signature.ParseSecrets(signature.SchemeStandard,
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw,whsec_cGF5bG9jay1mb3J3YXJkLXF1aWNrc3RhcnQta2V5LTAx")
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(signature.SchemeStandard, secrets, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"transaction_id":"tx-allocs","amount":1000,"currency":"EUR"}`)
	h := signature.Sign(signature.SchemeStandard, secrets[1], "msg_tx-allocs", time.Now(), body)
	allocs := testing.AllocsPerRun(100, func() {
		if err := v.Precheck(h); err != nil {
			t.Fatal(err)
		}
		res, err := v.Verify(h, body)
		if err != nil || res.SecretIndex != 1 {
			t.Fatalf("Verify: %+v, %v", res, err)
		}
	})
	if allocs > 0 {
		t.Errorf("Precheck + Verify allocate %v times per delivery, want 0", allocs)
	}
}
