package signature_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/paylock/paylock/signature"
)

func TestParseSecrets(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	b64 := base64.StdEncoding.EncodeToString(key)
	for _, tc := range []struct {
		name    string
		scheme  signature.Scheme
		csv     string
		wantN   int
		wantKey string // fingerprint source of the first secret, when wantN > 0
	}{
		{"standard with prefix", signature.SchemeStandard, "whsec_" + b64, 1, string(key)},
		{"standard without prefix", signature.SchemeStandard, b64, 1, string(key)},
		{"standard, two, spaces trimmed", signature.SchemeStandard, "  whsec_" + b64 + " ,\twhsec_YWJj ", 2, string(key)},
		{"stripe keeps whsec_", signature.SchemeStripe, "whsec_abc", 1, "whsec_abc"},
		{"stripe keeps base64 as text", signature.SchemeStripe, b64, 1, b64},
		{"stripe, two", signature.SchemeStripe, "whsec_old, whsec_new", 2, "whsec_old"},
		{"empty list", signature.SchemeStripe, "", 0, ""},
		{"only spaces", signature.SchemeStripe, "   ", 0, ""},
		{"empty entry", signature.SchemeStripe, "whsec_a,,whsec_b", 0, ""},
		{"trailing comma", signature.SchemeStandard, "whsec_" + b64 + ",", 0, ""},
		{"standard prefix only", signature.SchemeStandard, "whsec_", 0, ""},
		{"standard unpadded base64", signature.SchemeStandard, "whsec_YWJjZA", 0, ""},
		{"standard url-safe base64", signature.SchemeStandard, "whsec_-_-_", 0, ""},
		{"adyen upper-case hex", signature.SchemeAdyen, strings.ToUpper(hex.EncodeToString(key)), 1, string(key)},
		{"adyen lower-case hex, two", signature.SchemeAdyen, hex.EncodeToString(key) + ", 00ff", 2, string(key)},
		{"adyen odd number of digits", signature.SchemeAdyen, "abc", 0, ""},
		{"adyen not hex", signature.SchemeAdyen, "whsec_" + b64, 0, ""},
		{"adyen empty entry", signature.SchemeAdyen, "00ff,", 0, ""},
		{"unknown scheme", "svix", "whsec_" + b64, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := signature.ParseSecrets(tc.scheme, tc.csv)
			if tc.wantN == 0 {
				if err == nil {
					t.Fatalf("ParseSecrets = %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.wantN {
				t.Fatalf("got %d secrets, want %d", len(got), tc.wantN)
			}
			sum := sha256.Sum256([]byte(tc.wantKey))
			if fp := got[0].Fingerprint(); fp != hex.EncodeToString(sum[:4]) {
				t.Errorf("Fingerprint = %q, want the first 8 hex of sha256 of %q", fp, tc.wantKey)
			}
		})
	}
}

func TestParseSecretsErrorDoesNotRevealTheSecret(t *testing.T) {
	t.Parallel()
	for _, csv := range []string{
		"whsec_c3VwZXI*c2VjcmV0",
		"whsec_dmFsaWQ=, whsec_c3VwZXI*c2VjcmV0",
		"whsec_c3VwZXI c2VjcmV0",
	} {
		_, err := signature.ParseSecrets(signature.SchemeStandard, csv)
		if err == nil {
			t.Fatalf("ParseSecrets(%q) succeeded", csv)
		}
		for _, part := range []string{"c3VwZXI", "c2VjcmV0", "dmFsaWQ"} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("error %q reveals %q", err, part)
			}
		}
	}
}

func TestSecretsAreEqualWhenTheirKeysAre(t *testing.T) {
	t.Parallel()
	std, err := signature.ParseSecrets(signature.SchemeStandard, "whsec_"+base64.StdEncoding.EncodeToString([]byte("same-key"))+",whsec_b3RoZXI=")
	if err != nil {
		t.Fatal(err)
	}
	stripe, err := signature.ParseSecrets(signature.SchemeStripe, "same-key")
	if err != nil {
		t.Fatal(err)
	}
	adyen, err := signature.ParseSecrets(signature.SchemeAdyen, hex.EncodeToString([]byte("same-key")))
	if err != nil {
		t.Fatal(err)
	}
	if !std[0].Equal(stripe[0]) || !stripe[0].Equal(adyen[0]) || !adyen[0].Equal(std[0]) {
		t.Error("one key parsed for three schemes is not equal to itself")
	}
	if std[0].Equal(std[1]) || std[1].Equal(stripe[0]) {
		t.Error("different keys are equal")
	}
	var zero signature.Secret
	if !zero.Equal(signature.Secret{}) || zero.Equal(std[0]) || std[0].Equal(zero) {
		t.Error("the zero Secret equals another, or not itself")
	}
}

func TestSecretsHaveDistinctFingerprints(t *testing.T) {
	t.Parallel()
	s, err := signature.ParseSecrets(signature.SchemeStripe, "whsec_one,whsec_two")
	if err != nil {
		t.Fatal(err)
	}
	if s[0].Fingerprint() == s[1].Fingerprint() || len(s[0].Fingerprint()) != 8 {
		t.Errorf("fingerprints %q and %q", s[0].Fingerprint(), s[1].Fingerprint())
	}
	if (signature.Secret{}).Fingerprint() != "" || (signature.Secret{}).String() != "[redacted]" {
		t.Errorf("zero Secret: %q", signature.Secret{})
	}
}

func TestSecretIsRedactedEverywhere(t *testing.T) {
	t.Parallel()
	key := []byte("paylock-redaction-test-key-32byt")
	std := "whsec_" + base64.StdEncoding.EncodeToString(key)
	stripe := "whsec_paylock_stripe_redaction_secret"
	stdSecrets, err := signature.ParseSecrets(signature.SchemeStandard, std)
	if err != nil {
		t.Fatal(err)
	}
	stripeSecrets, err := signature.ParseSecrets(signature.SchemeStripe, stripe)
	if err != nil {
		t.Fatal(err)
	}
	adyenKey := []byte("paylock-adyen-redaction-key-32by")
	adyen := strings.ToUpper(hex.EncodeToString(adyenKey))
	adyenSecrets, err := signature.ParseSecrets(signature.SchemeAdyen, adyen)
	if err != nil {
		t.Fatal(err)
	}
	// Every form the key bytes could take in output.
	forbidden := []string{
		std, strings.TrimPrefix(std, "whsec_"), string(key), hex.EncodeToString(key), fmt.Sprint(key),
		stripe, strings.TrimPrefix(stripe, "whsec_"), hex.EncodeToString([]byte(stripe)), fmt.Sprint([]byte(stripe)),
		fmt.Sprintf("%q", key), fmt.Sprintf("%q", stripe),
		adyen, strings.ToLower(adyen), string(adyenKey), fmt.Sprint(adyenKey), fmt.Sprintf("%q", adyenKey),
	}
	// The key bytes as a Go string literal would print them one by one.
	forbidden = append(forbidden, strings.Trim(fmt.Sprintf("%v", []byte(key)[:8]), "[]"))

	type config struct { // a secret in an unexported field, printed by reflection
		name   string
		secret signature.Secret
	}
	type exported struct {
		Secret  signature.Secret
		Secrets []signature.Secret
		Ptr     *signature.Secret
	}

	for _, s := range []signature.Secret{stdSecrets[0], stripeSecrets[0], adyenSecrets[0]} {
		outputs := map[string]string{}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s"} {
			outputs[verb] = fmt.Sprintf(verb, s)
			outputs[verb+" pointer"] = fmt.Sprintf(verb, &s)
			outputs[verb+" slice"] = fmt.Sprintf(verb, []signature.Secret{s, s})
			outputs[verb+" unexported field"] = fmt.Sprintf(verb, config{"psp", s})
			outputs[verb+" exported field"] = fmt.Sprintf(verb, exported{s, []signature.Secret{s}, &s})
		}
		outputs["String"] = s.String()
		outputs["GoString"] = s.GoString()
		outputs["Sprint"] = fmt.Sprint(s, &s)
		outputs["Sprintln"] = fmt.Sprintln(s)

		for _, newHandler := range map[string]func(*bytes.Buffer) slog.Handler{
			"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
			"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		} {
			var buf bytes.Buffer
			log := slog.New(newHandler(&buf))
			log.Info("configured", "secret", s, "ptr", &s, "secrets", []signature.Secret{s},
				"exported", exported{s, []signature.Secret{s}, &s}, slog.Group("psp", "secret", s))
			outputs["slog "+buf.String()] = buf.String()
		}

		for name, v := range map[string]any{"value": s, "pointer": &s, "slice": []signature.Secret{s}, "struct": exported{s, []signature.Secret{s}, &s}, "map": map[string]signature.Secret{"k": s}} {
			out, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("json.Marshal(%s): %v", name, err)
			}
			outputs["json "+name] = string(out)
		}
		text, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		outputs["MarshalText"] = string(text)

		for name, out := range outputs {
			for _, f := range forbidden {
				if strings.Contains(out, f) {
					t.Errorf("%s: %q reveals %q", name, out, f)
				}
			}
			// fmt cannot call methods on an unexported field: it prints
			// an address there, which reveals nothing either.
			if !strings.Contains(out, "[redacted") && !strings.Contains(name, "%10.3s") && !strings.Contains(name, "unexported") {
				t.Errorf("%s: %q does not say [redacted", name, out)
			}
		}
		if want := "[redacted sha256:" + s.Fingerprint() + "]"; outputs["%v"] != want {
			t.Errorf("%%v = %q, want %q", outputs["%v"], want)
		}
		if want := `"[redacted sha256:` + s.Fingerprint() + `]"`; outputs["json value"] != want {
			t.Errorf("json = %s, want %s", outputs["json value"], want)
		}
	}
}
