package compat

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paylock/paylock/signature"
)

const (
	// The secret of the Standard Webhooks libraries' own tests.
	standardOld = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	standardCur = "whsec_q0Rt5nN6c8e9cG0yYJ3QyzV2Ij9oP3LwZ0k2mXc1bE8="
)

var standardBody = []byte(`{"type":"payment.succeeded","data":{"payment_id":"pay_1","amount":1234,"currency":"EUR"}}`)

func standardVerifier(t *testing.T) (*signature.Verifier, []signature.Secret) {
	t.Helper()
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, standardOld+","+standardCur)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(signature.SchemeStandard, secrets, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v, secrets
}

func newWebhook(t *testing.T, secret string) *standardwebhooks.Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

func TestStandardWebhooksSignatureIsAcceptedByVerifier(t *testing.T) {
	t.Parallel()
	v, _ := standardVerifier(t)
	for i, secret := range []string{standardOld, standardCur} {
		id := "msg_compat_" + strconv.Itoa(i)
		ts := time.Now().Add(-time.Duration(i) * time.Minute)
		sig, err := newWebhook(t, secret).Sign(id, ts, standardBody)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set(standardwebhooks.HeaderWebhookID, id)
		h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
		h.Set(standardwebhooks.HeaderWebhookSignature, sig)
		res, err := v.Verify(h, standardBody)
		if err != nil {
			t.Fatalf("secret %d: Verify(%q): %v", i, sig, err)
		}
		if res.SecretIndex != i || res.ID != id || res.Timestamp.Unix() != ts.Unix() {
			t.Errorf("secret %d: Result = %+v", i, res)
		}
	}
}

func TestSignIsAcceptedByStandardWebhooks(t *testing.T) {
	t.Parallel()
	_, secrets := standardVerifier(t)
	for i, secret := range []string{standardOld, standardCur} {
		h := signature.Sign(signature.SchemeStandard, secrets[i], "msg_from_paylock", time.Now(), standardBody)
		if err := newWebhook(t, secret).Verify(standardBody, h); err != nil {
			t.Errorf("secret %d: standardwebhooks Verify(%v): %v", i, h, err)
		}
		// The library without the whsec_ prefix, and with the raw key.
		if err := newWebhook(t, secret[len("whsec_"):]).Verify(standardBody, h); err != nil {
			t.Errorf("secret %d without prefix: %v", i, err)
		}
	}
}

func TestStandardWebhooksAndVerifierRejectTheSameForgeries(t *testing.T) {
	t.Parallel()
	v, secrets := standardVerifier(t)
	wh := newWebhook(t, standardCur)
	other, err := signature.ParseSecrets(signature.SchemeStandard, "whsec_bm90IGNvbmZpZ3VyZWQgYW55d2hlcmU=")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	signed := func(s signature.Secret, ts time.Time) http.Header {
		return signature.Sign(signature.SchemeStandard, s, "msg_1", ts, standardBody)
	}
	set := func(h http.Header, k, v string) http.Header { h.Set(k, v); return h }
	for _, tc := range []struct {
		name   string
		h      http.Header
		body   []byte
		ours   error
		theirs error
	}{
		{"wrong secret", signed(other[0], now), standardBody, signature.ErrNoMatch, standardwebhooks.ErrNoMatchingSignature},
		{"body tampered", signed(secrets[1], now), []byte(`{}`), signature.ErrNoMatch, standardwebhooks.ErrNoMatchingSignature},
		{"id tampered", set(signed(secrets[1], now), "webhook-id", "msg_2"), standardBody, signature.ErrNoMatch, standardwebhooks.ErrNoMatchingSignature},
		{"timestamp tampered", set(signed(secrets[1], now), "webhook-timestamp", strconv.FormatInt(now.Unix()+1, 10)), standardBody, signature.ErrNoMatch, standardwebhooks.ErrNoMatchingSignature},
		{"too old", signed(secrets[1], now.Add(-10*time.Minute)), standardBody, signature.ErrTimestamp, standardwebhooks.ErrMessageTooOld},
		{"too new", signed(secrets[1], now.Add(10*time.Minute)), standardBody, signature.ErrTimestamp, standardwebhooks.ErrMessageTooNew},
		{"missing id", set(signed(secrets[1], now), "webhook-id", ""), standardBody, signature.ErrMissingHeader, standardwebhooks.ErrRequiredHeaders},
		{"timestamp not a number", set(signed(secrets[1], now), "webhook-timestamp", "soon"), standardBody, signature.ErrMalformed, standardwebhooks.ErrInvalidHeaders},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Verify(tc.h, tc.body); !errors.Is(err, tc.ours) {
				t.Errorf("Verify: %v, want %v", err, tc.ours)
			}
			if err := wh.Verify(tc.body, tc.h); !errors.Is(err, tc.theirs) {
				t.Errorf("standardwebhooks: %v, want %v", err, tc.theirs)
			}
		})
	}
}

// A sender with several active secrets sends one v1 signature per secret;
// both sides accept the list when one of them is theirs.
func TestStandardSignatureListIsAcceptedByBoth(t *testing.T) {
	t.Parallel()
	v, _ := standardVerifier(t)
	now := time.Now()
	unknown, err := newWebhook(t, "whsec_bm90IGNvbmZpZ3VyZWQgYW55d2hlcmU=").Sign("msg_list", now, standardBody)
	if err != nil {
		t.Fatal(err)
	}
	known, err := newWebhook(t, standardCur).Sign("msg_list", now, standardBody)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_list")
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", unknown+" v1a,c29tZSBhc3ltbWV0cmljIHNpZw== "+known)
	if err := newWebhook(t, standardCur).Verify(standardBody, h); err != nil {
		t.Fatalf("standardwebhooks: %v", err)
	}
	res, err := v.Verify(h, standardBody)
	if err != nil || res.SecretIndex != 1 {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
}
