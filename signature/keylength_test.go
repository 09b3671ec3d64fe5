package signature_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/paylock/paylock/signature"
)

func TestKeysShorterThan16BytesOnceDecodedAreRefused(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		scheme signature.Scheme
		csv    string
		short  bool
	}{
		{signature.SchemeStandard, b64("sixteen-bytes-ok"), false},
		{signature.SchemeStandard, b64("fifteen-bytes!!"), true},                   // 20 characters of base64, 15 bytes of key
		{signature.SchemeStandard, b64("sixteen-bytes-ok") + "," + b64("x"), true}, // one short entry is enough
		{signature.SchemeStripe, "whsec_0123456789", false},                        // Stripe's key is the string, prefix included
		{signature.SchemeStripe, "whsec_012345678", true},
		{signature.SchemeAdyen, strings.Repeat("0A", 16), false},
		{signature.SchemeAdyen, strings.Repeat("0A", 15), true}, // 30 hex digits, 15 bytes
	} {
		secrets, err := signature.ParseSecrets(tc.scheme, tc.csv)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.scheme, tc.csv, err)
		}
		err = signature.CheckKeyLength(secrets)
		if got := errors.Is(err, signature.ErrShortKey); got != tc.short {
			t.Errorf("%s %q: %v, want short %v", tc.scheme, tc.csv, err, tc.short)
		}
		if err != nil && strings.Contains(err.Error(), strings.TrimPrefix(tc.csv, "whsec_")) {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}
