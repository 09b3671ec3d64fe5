package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

const devSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// parseHeaders reads "name: value" lines as paylock sign prints them.
func parseHeaders(t *testing.T, out string) http.Header {
	t.Helper()
	h := http.Header{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("not a header line: %q", line)
		}
		h.Add(k, v)
	}
	return h
}

func TestSignPrintsHeadersThatVerify(t *testing.T) {
	body := `{"transaction_id":"tx-1","amount":1000,"currency":"JPY"}` + "\n"
	for _, c := range []struct {
		scheme signature.Scheme
		secret string
	}{
		{signature.SchemeStandard, devSecret},
		{signature.SchemeStripe, "whsec_stripe_style_secret"},
	} {
		t.Run(string(c.scheme), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), []string{"sign", "--scheme", string(c.scheme), "--secret", c.secret},
				envMap(nil), strings.NewReader(body), &out, &errb)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			secrets, err := signature.ParseSecrets(c.scheme, c.secret)
			if err != nil {
				t.Fatal(err)
			}
			v, err := signature.NewVerifier(c.scheme, secrets, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(parseHeaders(t, out.String()), []byte(body)); err != nil {
				t.Fatalf("printed headers do not verify: %v\n%s", err, out.String())
			}
		})
	}
}

func TestSignCurlCommandCarriesTheExactBody(t *testing.T) {
	body := `{"transaction_id":"it's","amount":1,"currency":"JPY"}`
	var out bytes.Buffer
	code := Main(context.Background(), []string{"sign", "--curl", "http://127.0.0.1:8080/webhooks/payments"},
		envMap(map[string]string{"PAYLOCK_WEBHOOK_SECRETS": devSecret + ",whsec_b3RoZXI="}), strings.NewReader(body), &out, io.Discard)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	cmd := out.String()
	for _, want := range []string{"curl -sS -X POST 'http://127.0.0.1:8080/webhooks/payments'", "webhook-signature: v1,", `--data-binary '{"transaction_id":"it'\''s"`} {
		if !strings.Contains(cmd, want) {
			t.Errorf("curl command lacks %q:\n%s", want, cmd)
		}
	}
}

func TestServeRefusesToStartUnsignedOrWithABadSecret(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		code int
		want string
	}{
		{"no secrets", map[string]string{"PAYLOCK_METRICS_ADDR": "off"}, 1, "PAYLOCK_ALLOW_UNSIGNED"},
		{"undecodable whsec secret", map[string]string{"PAYLOCK_WEBHOOK_SECRETS": "whsec_not*base64!"}, 2, "PAYLOCK_WEBHOOK_SECRETS"},
		{"unknown scheme", map[string]string{"PAYLOCK_SIGNATURE_SCHEME": "hmac"}, 2, "PAYLOCK_SIGNATURE_SCHEME"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			env := map[string]string{"PAYLOCK_LOG_LEVEL": "error", "DATABASE_URL": "postgres://127.0.0.1:1/none", "PAYLOCK_ADDR": "127.0.0.1:0"}
			for k, v := range c.env {
				env[k] = v
			}
			code := Main(context.Background(), []string{"serve"}, envMap(env), nil, io.Discard, &stderr)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, stderr.String())
			}
			msg := strings.TrimSpace(stderr.String())
			if strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) {
				t.Fatalf("want one line naming %s, got %q", c.want, msg)
			}
			if strings.Contains(stderr.String(), "not*base64") {
				t.Fatalf("the secret leaked into the error: %s", stderr.String())
			}
		})
	}
}

func TestSignAdyenSignsEveryItemInTheBody(t *testing.T) {
	const key = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	body := `{"live":"false","notificationItems":[` +
		`{"NotificationRequestItem":{"amount":{"currency":"EUR","value":1000},"eventCode":"AUTHORISATION","merchantAccountCode":"Acme","merchantReference":"order-1","pspReference":"PSP1","success":"true"}},` +
		`{"NotificationRequestItem":{"amount":{"currency":"EUR","value":500},"eventCode":"REFUND","merchantAccountCode":"Acme","merchantReference":"order-2","originalReference":"PSP1","pspReference":"PSP2","success":"true"}}]}`
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"sign", "--scheme", "adyen", "--secret", key},
		envMap(nil), strings.NewReader(body), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	secrets, err := signature.ParseSecrets(signature.SchemeAdyen, key)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(signature.SchemeAdyen, secrets, 0)
	if err != nil {
		t.Fatal(err)
	}
	signed := bytes.TrimSpace(out.Bytes())
	if _, err := v.Verify(http.Header{}, signed); err != nil {
		t.Fatalf("the printed body does not verify: %v\n%s", err, signed)
	}
	if n := bytes.Count(signed, []byte("hmacSignature")); n != 2 {
		t.Fatalf("%d items signed, want 2:\n%s", n, signed)
	}

	out.Reset()
	if code := Main(context.Background(), []string{"sign", "--scheme", "adyen", "--secret", key, "--curl", "http://127.0.0.1:8080/webhooks/adyen"},
		envMap(nil), strings.NewReader(body), &out, &errb); code != 0 {
		t.Fatalf("--curl exit %d: %s", code, errb.String())
	}
	if cmd := out.String(); !strings.Contains(cmd, "hmacSignature") || strings.Contains(cmd, "webhook-signature") {
		t.Fatalf("curl command:\n%s", cmd)
	}
}

// TestSignNeverPanicsForARegisteredScheme: paylock sign with every
// registered scheme (a provider's too) prints headers or says why it
// cannot sign (a scheme whose signatures only its provider can make), with
// exit 1, and never panics.
func TestSignNeverPanicsForARegisteredScheme(t *testing.T) {
	body := `{"id":"evt-1"}` + "\n"
	for _, sc := range signature.Schemes() {
		if signature.SignsInBody(sc) {
			continue // TestSignAdyenSignsEveryItemInTheBody
		}
		t.Run(string(sc), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), []string{"sign", "--scheme", string(sc), "--secret", "secret-of-twenty-four-by"},
				envMap(nil), strings.NewReader(body), &out, &errb)
			switch {
			case code == 0 && out.Len() > 0:
			case code == 1 && strings.HasPrefix(errb.String(), "paylock sign: ") && out.Len() == 0:
			case code == 2 && strings.Contains(errb.String(), "secret"): // a secret in the wrong format for the scheme
			default:
				t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
			}
		})
	}
}
