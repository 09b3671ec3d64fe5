package forward

import (
	"context"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

func TestAMessageCarriesItsIDKeyAndSignedStandardWebhooksHeaders(t *testing.T) {
	t.Parallel()
	raw := "whsec_" + base64.StdEncoding.EncodeToString([]byte("message-test-secret-0123456789"))
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, raw)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewStandardSigner(secrets)
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{cfg: Config{Secret: secrets[0]}, signer: signer}
	a := store.ForwardArgs{ID: store.DisbursementForwardID("L-1", 2, store.StatusPaid), Type: "disbursement.paid",
		Disbursement: &store.ForwardedDisbursement{LoanID: "L-1", Tranche: 2, Status: store.StatusPaid}}
	now := time.Unix(1_800_000_000, 0)
	m, err := w.message(context.Background(), a, now)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != a.ID || m.Type != a.Type || !m.Timestamp.Equal(now) || m.Key != "disbursement:L-1:2" {
		t.Errorf("message %+v", m)
	}
	if len(m.Header) != 3 || m.Header[HeaderID] != a.ID || m.Header[HeaderTimestamp] != "1800000000" || m.Header[HeaderSignature] == "" {
		t.Fatalf("headers %v: want webhook-id, webhook-timestamp and webhook-signature, by lower-case name", m.Header)
	}
	v, err := signature.NewVerifier(signature.SchemeStandard, secrets, 100*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	for k, val := range m.Header {
		h.Set(k, val)
	}
	if _, err := v.Verify(h, m.Body); err != nil {
		t.Errorf("the message does not verify: %v", err)
	}
	if got := messageKey(store.ForwardArgs{Source: "stripe", TransactionID: "pi_1"}); got != "stripe:pi_1" {
		t.Errorf("a payment's key %q, want stripe:pi_1", got)
	}
}
