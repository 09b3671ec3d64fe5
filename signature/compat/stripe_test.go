package compat

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/paylock/paylock/signature"
)

// Stripe signs with the whsec_ string's bytes as they are.
const (
	stripeOld = "whsec_paylock_compat_old_0123456789"
	stripeCur = "whsec_paylock_compat_cur_abcdefghij"
)

func stripeEvent(id string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","api_version":%q,"type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","object":"payment_intent","amount":1234,"currency":"eur"}}}`,
		id, stripe.APIVersion)
}

func stripeVerifier(t *testing.T) (*signature.Verifier, []signature.Secret) {
	t.Helper()
	secrets, err := signature.ParseSecrets(signature.SchemeStripe, stripeOld+","+stripeCur)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(signature.SchemeStripe, secrets, webhook.DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	return v, secrets
}

func TestStripeSignedPayloadIsAcceptedByVerifier(t *testing.T) {
	t.Parallel()
	v, _ := stripeVerifier(t)
	body := stripeEvent("evt_from_stripe_go")
	for i, secret := range []string{stripeOld, stripeCur} {
		ts := time.Now().Add(-time.Duration(i) * time.Minute)
		p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: ts})
		h := http.Header{}
		h.Set(signature.HeaderStripeSignature, p.Header)
		res, err := v.Verify(h, p.Payload)
		if err != nil {
			t.Fatalf("secret %d: Verify(%q): %v", i, p.Header, err)
		}
		if res.SecretIndex != i || res.Timestamp.Unix() != ts.Unix() || res.ID != "" {
			t.Errorf("secret %d: Result = %+v", i, res)
		}
	}
}

func TestStripeComputeSignatureEqualsSign(t *testing.T) {
	t.Parallel()
	_, secrets := stripeVerifier(t)
	body := stripeEvent("evt_1")
	ts := time.Unix(1_700_000_000, 0)
	got := signature.Sign(signature.SchemeStripe, secrets[1], "", ts, body).Get(signature.HeaderStripeSignature)
	want := "t=1700000000,v1=" + hex.EncodeToString(webhook.ComputeSignature(ts, body, stripeCur))
	if got != want {
		t.Errorf("Sign = %q, stripe-go computes %q", got, want)
	}
}

func TestSignIsAcceptedByStripeGo(t *testing.T) {
	t.Parallel()
	_, secrets := stripeVerifier(t)
	body := stripeEvent("evt_from_paylock")
	h := signature.Sign(signature.SchemeStripe, secrets[1], "", time.Now(), body)
	header := h.Get(signature.HeaderStripeSignature)

	if err := webhook.ValidatePayload(body, header, stripeCur); err != nil {
		t.Fatalf("ValidatePayload(%q): %v", header, err)
	}
	e, err := webhook.ConstructEventWithOptions(body, header, stripeCur, webhook.ConstructEventOptions{})
	if err != nil {
		t.Fatalf("ConstructEventWithOptions: %v", err)
	}
	if e.ID != "evt_from_paylock" || e.Type != "payment_intent.succeeded" {
		t.Errorf("event = %s %s", e.ID, e.Type)
	}
}

func TestStripeAndVerifierRejectTheSameForgeries(t *testing.T) {
	t.Parallel()
	v, secrets := stripeVerifier(t)
	body := stripeEvent("evt_1")
	now := time.Now()
	sign := func(secret signature.Secret, ts time.Time) string {
		return signature.Sign(signature.SchemeStripe, secret, "", ts, body).Get(signature.HeaderStripeSignature)
	}
	other, err := signature.ParseSecrets(signature.SchemeStripe, "whsec_not_configured")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		header    string
		body      []byte
		ours      error
		stripeErr error
	}{
		{"wrong secret", sign(other[0], now), body, signature.ErrNoMatch, webhook.ErrNoValidSignature},
		{"body tampered", sign(secrets[1], now), stripeEvent("evt_2"), signature.ErrNoMatch, webhook.ErrNoValidSignature},
		{"too old", sign(secrets[1], now.Add(-webhook.DefaultTolerance-time.Minute)), body, signature.ErrTimestamp, webhook.ErrTooOld},
		{"t tampered", "t=" + strconv.FormatInt(now.Unix()+1, 10) + sign(secrets[1], now)[len("t=")+len(strconv.FormatInt(now.Unix(), 10)):], body, signature.ErrNoMatch, webhook.ErrNoValidSignature},
		{"no signature", "", body, signature.ErrMissingHeader, webhook.ErrNotSigned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			h.Set(signature.HeaderStripeSignature, tc.header)
			if _, err := v.Verify(h, tc.body); !errors.Is(err, tc.ours) {
				t.Errorf("Verify: %v, want %v", err, tc.ours)
			}
			if err := webhook.ValidatePayload(tc.body, tc.header, stripeCur); !errors.Is(err, tc.stripeErr) {
				t.Errorf("stripe-go: %v, want %v", err, tc.stripeErr)
			}
		})
	}
}

// During a secret rotation Stripe sends one v1 signature per secret; both
// sides accept a header holding ours beside one they do not know.
func TestStripeRotationHeaderIsAcceptedByBoth(t *testing.T) {
	t.Parallel()
	v, _ := stripeVerifier(t)
	body := stripeEvent("evt_rotation")
	now := time.Now()
	header := fmt.Sprintf("t=%d,v1=%x,v1=%x,v0=%x", now.Unix(),
		webhook.ComputeSignature(now, body, "whsec_unknown"),
		webhook.ComputeSignature(now, body, stripeCur),
		webhook.ComputeSignature(now, body, "whsec_v0"))
	if err := webhook.ValidatePayload(body, header, stripeCur); err != nil {
		t.Fatalf("stripe-go: %v", err)
	}
	h := http.Header{}
	h.Set(signature.HeaderStripeSignature, header)
	res, err := v.Verify(h, body)
	if err != nil || res.SecretIndex != 1 {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
}
