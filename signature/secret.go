package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Scheme names a webhook signing scheme.
type Scheme string

// The schemes this package ships; providers register others
// (RegisterScheme).
const (
	// SchemeStandard is the Standard Webhooks scheme (webhook-id,
	// webhook-timestamp and webhook-signature headers).
	SchemeStandard Scheme = "standard"
	// SchemeStripe is Stripe's scheme (the Stripe-Signature header).
	SchemeStripe Scheme = "stripe"
	// SchemeAdyen is Adyen's HMAC signature of standard notifications:
	// one signature per notification item, inside the JSON body.
	SchemeAdyen Scheme = "adyen"
)

const standardSecretPrefix = "whsec_"

// Secret is a configured signing secret, bound to the scheme it was parsed
// for.
//
// A Secret never reveals its key when printed, logged or marshalled:
// String, Format (every fmt verb), GoString, LogValue, MarshalText and
// MarshalJSON all give "[redacted sha256:xxxxxxxx]", where xxxxxxxx is the
// [Secret.Fingerprint]. fmt cannot call those methods on a Secret held in an
// unexported struct field and prints it by reflection instead, so the key is
// kept inside a closure, which reflection shows as an address, never as
// bytes.
//
// The zero Secret holds no key; [NewVerifier] refuses it and [Sign] panics
// on it.
type Secret struct {
	k *secretKey
}

type secretKey struct {
	scheme      Scheme
	fingerprint string
	// key returns the HMAC key, which callers must not modify. It is a
	// closure so that printing by reflection cannot reach the bytes.
	key func() []byte
	// token, when not nil, returns the static credential the scheme also
	// checks (SchemeSpec.ParseSecret), kept as key is.
	token func() []byte
}

func newSecret(scheme Scheme, key []byte) Secret { return newSecretToken(scheme, key, nil) }

// newSecretToken is a Secret holding key and token (nil: none).
func newSecretToken(scheme Scheme, key, token []byte) Secret {
	sum := sha256.Sum256(key)
	k := &secretKey{
		scheme:      scheme,
		fingerprint: hex.EncodeToString(sum[:4]),
		key:         func() []byte { return key },
	}
	if token != nil {
		k.token = func() []byte { return token }
	}
	return Secret{k: k}
}

// ParseSecrets parses a comma-separated list of secrets for scheme, as found
// in configuration. Entries are trimmed of spaces; an empty entry (or an
// empty list) is an error, and so is an unknown scheme ([ErrUnknownScheme]).
// Each entry is parsed by the scheme's SchemeSpec.ParseSecret:
//
// For SchemeStandard each entry loses an optional "whsec_" prefix and the
// rest is decoded as standard, padded base64; the decoded bytes, which must
// not be empty, are the HMAC key. For SchemeStripe the entry's bytes are the
// key as they are, "whsec_" included, as Stripe's own libraries use them.
// For SchemeAdyen each entry is an HMAC key as Adyen's Customer Area shows
// it, hex digits in either case (64 of them for Adyen's 32-byte keys); the
// decoded bytes are the key. A provider's scheme documents its own.
//
// Error messages give the entry's position, never its text.
func ParseSecrets(scheme Scheme, csv string) ([]Secret, error) {
	spec, err := lookupScheme(scheme)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(csv, ",")
	secrets := make([]Secret, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Errorf("signature: %s secret %d of %d is empty", scheme, i+1, len(parts))
		}
		key, token, err := spec.ParseSecret(p)
		if err != nil {
			return nil, fmt.Errorf("signature: %s secret %d of %d %v", scheme, i+1, len(parts), err)
		}
		secrets = append(secrets, newSecretToken(scheme, key, token))
	}
	return secrets, nil
}

// Fingerprint returns the first 8 hex digits of SHA-256 of the HMAC key, so
// operators can tell secrets apart without seeing them; "" for the zero
// Secret. For a Standard Webhooks secret the key is the base64-decoded value
// (echo -n "$b64" | base64 -d | sha256sum), for Stripe the string itself
// (echo -n "$secret" | sha256sum), for Adyen the hex-decoded bytes
// (echo -n "$hex" | xxd -r -p | sha256sum).
func (s Secret) Fingerprint() string {
	if s.k == nil {
		return ""
	}
	return s.k.fingerprint
}

// Equal reports whether s and o hold the same HMAC key, whatever scheme
// each was parsed for (a Standard Webhooks secret and an Adyen key that
// decode to the same bytes are equal), comparing in constant time. Two zero
// Secrets are equal; a zero Secret equals no other.
func (s Secret) Equal(o Secret) bool {
	if s.k == nil || o.k == nil {
		return s.k == o.k
	}
	return hmac.Equal(s.k.key(), o.k.key())
}

// String returns "[redacted sha256:<fingerprint>]", or "[redacted]" for the
// zero Secret.
func (s Secret) String() string {
	if s.k == nil {
		return "[redacted]"
	}
	return "[redacted sha256:" + s.k.fingerprint + "]"
}

// GoString is used by %#v; it is as redacted as String.
func (s Secret) GoString() string { return "signature.Secret(" + s.String() + ")" }

// Format writes the redacted form for every verb and flag, so %x, %q or %d
// cannot reach the key either.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, s.GoString())
		return
	}
	_, _ = io.WriteString(f, s.String())
}

// LogValue implements [slog.LogValuer].
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText implements [encoding.TextMarshaler] with the redacted form.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalJSON implements [json.Marshaler] with the redacted form, a JSON
// string.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MinKeyBytes is the shortest HMAC key paylock serves with: 16 bytes (128
// bits) once decoded, the floor of RFC 2104's advice (a key no shorter
// than the hash's output is best; Stripe's and Standard Webhooks' are 24
// to 32 bytes, Adyen's 32). A shorter one can be guessed offline from a
// single signed delivery.
const MinKeyBytes = 16

// ErrShortKey is wrapped by CheckKeyLength's error.
var ErrShortKey = errors.New("signature: secret too short")

// CheckKeyLength returns an error wrapping ErrShortKey when the key of one
// of secrets is shorter than its scheme's minimum (SchemeSpec.MinKeyBytes,
// by default MinKeyBytes) once decoded (a Standard Webhooks secret's base64
// after "whsec_", an Adyen key's hex, a Stripe secret's string as it is).
// The message gives the entry's position and length, never its text.
func CheckKeyLength(secrets []Secret) error {
	for i, s := range secrets {
		if s.k == nil {
			continue
		}
		spec, err := lookupScheme(s.k.scheme)
		if err != nil {
			return err // unreachable: ParseSecrets made s
		}
		if n := len(s.k.key()); n < spec.MinKeyBytes {
			return fmt.Errorf("%w: %s secret %d of %d is a %d-byte key, want at least %d bytes (%s)",
				ErrShortKey, s.k.scheme, i+1, len(secrets), n, spec.MinKeyBytes, spec.KeyFormat)
		}
	}
	return nil
}
