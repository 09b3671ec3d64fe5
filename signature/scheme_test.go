package signature_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

// toyScheme is a provider's scheme as a provider registers it: header
// Toy-Signature, hex HMAC-SHA256 of the body; a secret "key" or
// "key|token", the token checked against the Toy-Token header.
const toyScheme signature.Scheme = "toy-registry-test"

func init() {
	signature.RegisterScheme(signature.SchemeSpec{
		Name: toyScheme,
		ParseSecret: func(entry string) ([]byte, []byte, error) {
			key, tok, ok := strings.Cut(entry, "|")
			if !ok {
				return []byte(key), nil, nil
			}
			return []byte(key), []byte(tok), nil
		},
		KeyFormat:   "the string as it is",
		MinKeyBytes: 20,
		Verify: func(c signature.Check) (signature.Result, error) {
			s, err := signature.SingleHeader(c.Header, "Toy-Signature", signature.MaxHeaderBytes)
			if err != nil {
				return signature.Result{}, err
			}
			sig, err := hex.DecodeString(s)
			if err != nil || len(sig) != signature.MACSize {
				return signature.Result{}, signature.Malformed("Toy-Signature: not hex of %d bytes", signature.MACSize)
			}
			i := c.Match([][]byte{sig}, func(key []byte) []byte { return toyMAC(key, c.Body) })
			if i < 0 || !c.TokenMatches(i, c.Header.Get("Toy-Token")) {
				return signature.Result{}, signature.ErrNoMatch
			}
			return signature.Result{SecretIndex: i}, nil
		},
		Sign: func(key, token []byte, _ string, _ time.Time, body []byte) (http.Header, []byte, error) {
			h := http.Header{"Toy-Signature": {hex.EncodeToString(toyMAC(key, body))}}
			if token != nil {
				h.Set("Toy-Token", string(token))
			}
			return h, body, nil
		},
	})
}

func toyMAC(key, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return m.Sum(nil)
}

func TestARegisteredSchemeIsReachedByName(t *testing.T) {
	t.Parallel()
	if !slices.Contains(signature.Schemes(), toyScheme) {
		t.Fatalf("Schemes() = %q, want it to list %q", signature.Schemes(), toyScheme)
	}
	if got := signature.Schemes()[:3]; !slices.Equal(got, []signature.Scheme{signature.SchemeStandard, signature.SchemeStripe, signature.SchemeAdyen}) {
		t.Errorf("Schemes() starts %q, want the built-in ones first", got)
	}
	if sc, err := signature.ParseScheme(string(toyScheme)); err != nil || sc != toyScheme {
		t.Fatalf("ParseScheme = %q, %v", sc, err)
	}
	secrets, err := signature.ParseSecrets(toyScheme, "old-toy-key-0123456789|tok-old, new-toy-key-0123456789|tok-new")
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(toyScheme, secrets, 0)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"evt_1"}`)
	for i, s := range secrets {
		res, err := v.Verify(signature.Sign(toyScheme, s, "", time.Now(), body), body)
		if err != nil || res.SecretIndex != i {
			t.Errorf("secret %d: Verify = %+v, %v; want SecretIndex %d", i, res, err, i)
		}
	}
	h := signature.Sign(toyScheme, secrets[1], "", time.Now(), body)
	h.Set("Toy-Token", "tok-old") // the other secret's token
	if _, err := v.Verify(h, body); !errors.Is(err, signature.ErrNoMatch) {
		t.Errorf("Verify with the other secret's token = %v, want ErrNoMatch", err)
	}
	if err := v.Precheck(http.Header{}); err != nil {
		t.Errorf("Precheck of a scheme without one = %v, want nil", err)
	}
}

func TestARegisteredSchemesMinimumKeyLengthIsItsOwn(t *testing.T) {
	t.Parallel()
	secrets, err := signature.ParseSecrets(toyScheme, "eighteen-byte-key!")
	if err != nil {
		t.Fatal(err)
	}
	err = signature.CheckKeyLength(secrets)
	if !errors.Is(err, signature.ErrShortKey) || !strings.Contains(err.Error(), "at least 20 bytes (the string as it is)") {
		t.Fatalf("CheckKeyLength = %v, want ErrShortKey at 20 bytes, saying how the key is read", err)
	}
	if strings.Contains(err.Error(), "eighteen") {
		t.Errorf("error %q reveals the secret", err)
	}
}

func TestAnUnknownSchemeIsRefusedByName(t *testing.T) {
	t.Parallel()
	_, err := signature.ParseScheme("svix")
	if !errors.Is(err, signature.ErrUnknownScheme) || !strings.Contains(err.Error(), `"svix"`) ||
		!strings.Contains(err.Error(), `"standard"`) || !strings.Contains(err.Error(), string(toyScheme)) {
		t.Fatalf("ParseScheme(svix) = %v, want ErrUnknownScheme naming it and the registered schemes", err)
	}
	if _, err := signature.ParseSecrets("svix", "whsec_abc"); !errors.Is(err, signature.ErrUnknownScheme) {
		t.Errorf("ParseSecrets(svix) = %v, want ErrUnknownScheme", err)
	}
	if _, err := signature.NewVerifier("svix", nil, 0); !errors.Is(err, signature.ErrUnknownScheme) {
		t.Errorf("NewVerifier(svix) = %v, want ErrUnknownScheme", err)
	}
	if signature.SignsInBody("svix") || signature.Timestamped("svix") {
		t.Error("an unknown scheme is said to sign in the body or a timestamp")
	}
}

func TestWhatTheBuiltInSchemesSign(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scheme            signature.Scheme
		inBody, timestamp bool
	}{
		{signature.SchemeStandard, false, true},
		{signature.SchemeStripe, false, true},
		{signature.SchemeAdyen, true, false},
		{toyScheme, false, false},
	} {
		if got := signature.SignsInBody(tc.scheme); got != tc.inBody {
			t.Errorf("SignsInBody(%s) = %v, want %v", tc.scheme, got, tc.inBody)
		}
		if got := signature.Timestamped(tc.scheme); got != tc.timestamp {
			t.Errorf("Timestamped(%s) = %v, want %v", tc.scheme, got, tc.timestamp)
		}
	}
}

func TestRegisterSchemeRefusesABadOrRepeatedScheme(t *testing.T) {
	t.Parallel()
	valid := func() signature.SchemeSpec {
		return signature.SchemeSpec{
			Name:        "never-registered",
			ParseSecret: func(string) ([]byte, []byte, error) { return nil, nil, nil },
			KeyFormat:   "x",
			Verify:      func(signature.Check) (signature.Result, error) { return signature.Result{}, nil },
			Sign: func([]byte, []byte, string, time.Time, []byte) (http.Header, []byte, error) {
				return nil, nil, nil
			},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*signature.SchemeSpec)
	}{
		{"registered twice (a built-in)", func(s *signature.SchemeSpec) { s.Name = signature.SchemeStripe }},
		{"registered twice (a provider's)", func(s *signature.SchemeSpec) { s.Name = toyScheme }},
		{"none, an unsigned source", func(s *signature.SchemeSpec) { s.Name = "none" }},
		{"not a token", func(s *signature.SchemeSpec) { s.Name = "Toy Scheme" }},
		{"no ParseSecret", func(s *signature.SchemeSpec) { s.ParseSecret = nil }},
		{"no Verify", func(s *signature.SchemeSpec) { s.Verify = nil }},
		{"no Sign", func(s *signature.SchemeSpec) { s.Sign = nil }},
		{"no KeyFormat", func(s *signature.SchemeSpec) { s.KeyFormat = "" }},
		{"negative MinKeyBytes", func(s *signature.SchemeSpec) { s.MinKeyBytes = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := valid()
			tc.change(&s)
			defer func() {
				if recover() == nil {
					t.Error("RegisterScheme did not panic")
				}
			}()
			signature.RegisterScheme(s)
		})
	}
	if _, err := signature.ParseScheme("never-registered"); !errors.Is(err, signature.ErrUnknownScheme) {
		t.Errorf("a refused registration left a scheme behind: %v", err)
	}
}
