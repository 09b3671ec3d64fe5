package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// SchemeSpec describes a signature scheme to [RegisterScheme]: how its
// secrets parse, how strong their keys must be, how a delivery's headers
// and raw body are verified, whether it signs a timestamp (its replay
// window) and how a delivery is signed. A provider whose deliveries are
// signed in a way of its own registers its scheme from its package's init
// function, next to its adapter; the rest of paylock reaches it by name,
// through [ParseSecrets], [NewVerifier] and [Sign], as it reaches the
// schemes this package ships (standard, stripe, adyen).
//
// What stays here, shared by every scheme: the secret lists and their
// rotation ([Verifier] accepts any configured secret and says which one
// matched), the redaction of [Secret], the constant-time comparison
// ([Check.Match], [Check.TokenMatches]), the bounds on headers
// ([SingleHeader]) and the timestamp window ([Check.Time]).
type SchemeSpec struct {
	// Name is the scheme's name: the sources file's signature value. It
	// is a lower-case token and not "none" (an unsigned source).
	Name Scheme
	// ParseSecret turns one entry of a secrets list (trimmed of spaces,
	// never empty) into its HMAC key and, for a scheme that also checks a
	// static credential (Checkout.com's Authorization header), its token;
	// nil when the entry carries none. Its error completes the sentence
	// "<scheme> secret 2 of 3 ..." ("is not valid base64") and never
	// quotes the entry.
	ParseSecret func(entry string) (key, token []byte, err error)
	// KeyFormat says how an entry becomes its key, for the message of a
	// key that is too short ("the string as it is").
	KeyFormat string
	// MinKeyBytes is the shortest key [CheckKeyLength] accepts; 0 means
	// [MinKeyBytes].
	MinKeyBytes int
	// Timestamped says the scheme signs a timestamp, which Verify checks
	// with [Check.Time] against the verifier's tolerance: its replay
	// window. A scheme without one (Adyen, Checkout.com) verifies a
	// captured delivery forever; replays are for the idempotency layer
	// (the event id's deduplication) alone.
	Timestamped bool
	// InBody says the signatures are inside the body (Adyen's items):
	// Sign returns the signed body and no headers, and [Sign] refuses the
	// scheme.
	InBody bool
	// Verify checks a delivery: c.Header and c.Body, exactly as received.
	// Its errors wrap one of [ErrMissingHeader], [ErrMalformed],
	// [ErrTimestamp] or [ErrNoMatch], and hold no header value, body
	// content or secret.
	Verify func(c Check) (Result, error)
	// Precheck, optional, checks what Verify would of c.Header alone
	// (c.Body is nil), computing no MAC; nil when the scheme has nothing
	// to check before the body is read.
	Precheck func(c Check) error
	// Sign returns the headers, and the body, a sender using the scheme
	// would send for body signed with key (and token) at ts; id is the
	// delivery id of a scheme whose headers carry one. It is for
	// `paylock sign`, tests and simulators.
	Sign func(key, token []byte, id string, ts time.Time, body []byte) (http.Header, []byte, error)
	// Configure, optional, is for a scheme whose verification depends on
	// its source's settings (the sources-file keys of the source's
	// provider, as JSON): it returns the Verify and Precheck a verifier
	// made by [NewVerifierWith] uses instead of the spec's (a nil one
	// keeps the spec's). Its error names the setting and never quotes a
	// secret. [NewVerifier] does not call it: the spec's own functions are
	// the scheme with no settings.
	Configure func(settings map[string]json.RawMessage) (verify func(Check) (Result, error), precheck func(Check) error, err error)
}

// ErrUnknownScheme is wrapped by the error of [ParseScheme], [ParseSecrets]
// and [NewVerifier] for a scheme no one registered.
var ErrUnknownScheme = errors.New("signature: unknown scheme")

var (
	schemesMu sync.RWMutex
	schemes   = map[Scheme]*SchemeSpec{}
	// builtin are this package's schemes, in the order Schemes lists them
	// first.
	builtin = []Scheme{SchemeStandard, SchemeStripe, SchemeAdyen}
)

// schemeName is what a scheme may be called.
var schemeName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// RegisterScheme makes the scheme s describes available under s.Name. It
// is meant to be called from an init function (the provider's package);
// it panics, as database/sql's Register does, if the name is not a
// lower-case token or is "none", if ParseSecret, Verify or Sign is nil,
// KeyFormat empty or MinKeyBytes negative, or if a scheme of that name is
// already registered.
func RegisterScheme(s SchemeSpec) {
	switch {
	case !schemeName.MatchString(string(s.Name)) || s.Name == "none":
		panic(fmt.Sprintf("signature: RegisterScheme(%q): want a lower-case token (a-z, 0-9, _ and -), not none", s.Name))
	case s.ParseSecret == nil || s.Verify == nil || s.Sign == nil:
		panic(fmt.Sprintf("signature: RegisterScheme(%q): ParseSecret, Verify and Sign are required", s.Name))
	case s.KeyFormat == "" || s.MinKeyBytes < 0:
		panic(fmt.Sprintf("signature: RegisterScheme(%q): KeyFormat is required and MinKeyBytes must not be negative", s.Name))
	}
	schemesMu.Lock()
	defer schemesMu.Unlock()
	if _, dup := schemes[s.Name]; dup {
		panic(fmt.Sprintf("signature: RegisterScheme called twice for scheme %q", s.Name))
	}
	if s.MinKeyBytes == 0 {
		s.MinKeyBytes = MinKeyBytes
	}
	schemes[s.Name] = &s
}

// lookupScheme returns the registered scheme named s, or an error wrapping
// ErrUnknownScheme that names the registered ones.
func lookupScheme(s Scheme) (*SchemeSpec, error) {
	schemesMu.RLock()
	spec, ok := schemes[s]
	schemesMu.RUnlock()
	if !ok {
		names := Schemes()
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = fmt.Sprintf("%q", n)
		}
		return nil, fmt.Errorf("%w %q (want %s)", ErrUnknownScheme, s, strings.Join(quoted, ", "))
	}
	return spec, nil
}

// Schemes returns the registered schemes: SchemeStandard, SchemeStripe and
// SchemeAdyen, in that order, then those providers registered, sorted.
func Schemes() []Scheme {
	schemesMu.RLock()
	defer schemesMu.RUnlock()
	var others []Scheme
	for n := range schemes {
		if !slices.Contains(builtin, n) {
			others = append(others, n)
		}
	}
	slices.Sort(others)
	return append(append([]Scheme(nil), builtin...), others...)
}

// ParseScheme returns the registered Scheme named by s, or an error
// wrapping [ErrUnknownScheme] that names the registered ones.
func ParseScheme(s string) (Scheme, error) {
	if _, err := lookupScheme(Scheme(s)); err != nil {
		return "", err
	}
	return Scheme(s), nil
}

// SignsInBody reports whether scheme puts its signatures inside the body
// (Adyen) rather than in headers; false for an unknown scheme.
func SignsInBody(scheme Scheme) bool {
	spec, err := lookupScheme(scheme)
	return err == nil && spec.InBody
}

// Timestamped reports whether scheme signs a timestamp, checked within a
// verifier's tolerance (its replay window); false for an unknown scheme.
func Timestamped(scheme Scheme) bool {
	spec, err := lookupScheme(scheme)
	return err == nil && spec.Timestamped
}

// Check is one delivery as a scheme's Verify and Precheck see it, with
// the verifier's secrets behind it: the scheme reads the headers and body
// and asks Check to compare, never seeing more of a secret than its MAC
// function is given.
type Check struct {
	// Header holds the request's headers, canonical keys.
	Header http.Header
	// Body is the raw body as received; nil in Precheck.
	Body []byte
	v    *Verifier
}

// Match returns the index of the first configured secret whose MAC over
// the signed content (mac of its key) equals one of sigs, or -1. Each
// comparison is constant-time; a signature that is not 32 bytes matches
// nothing.
func (c *Check) Match(sigs [][]byte, mac func(key []byte) []byte) int { return c.v.match(sigs, mac) }

// Time returns the signed unix timestamp unix as a UTC time, or an error
// wrapping [ErrTimestamp] when it is further from the verifier's clock
// than its tolerance, in the past or in the future.
func (c *Check) Time(unix int64) (time.Time, error) { return c.v.checkTime(unix) }

// HasToken reports whether configured secret i carries a token.
func (c *Check) HasToken(i int) bool {
	return i >= 0 && i < len(c.v.secrets) && c.v.secrets[i].k.token != nil
}

// TokenMatches reports whether got is the token of secret i, compared in
// constant time; true when secret i carries no token.
func (c *Check) TokenMatches(i int, got string) bool {
	if i < 0 || i >= len(c.v.secrets) {
		return false
	}
	tok := c.v.secrets[i].k.token
	return tok == nil || subtle.ConstantTimeCompare([]byte(got), tok()) == 1
}

// MaxHeaderBytes bounds a signature header's value ([SingleHeader]'s
// usual max): far above what a provider sends.
const MaxHeaderBytes = maxHeaderBytes

// MACSize is the size of an HMAC-SHA256.
const MACSize = macSize

// HexMACHeader returns the MAC the header name of h carries as MACSize
// bytes of hex digits (Checkout.com's Cko-Signature, GoCardless's
// Webhook-Signature): an error wrapping [ErrMissingHeader] when it is
// absent, [ErrMalformed] when it is repeated, too long, of another length
// or not hex.
func HexMACHeader(h http.Header, name string) ([]byte, error) {
	s, err := header(h, name, MaxHeaderBytes)
	if err != nil {
		return nil, err
	}
	if len(s) != hex.EncodedLen(MACSize) {
		return nil, malformed("%s: not %d hex digits", name, hex.EncodedLen(MACSize))
	}
	sig, err := hex.DecodeString(s)
	if err != nil {
		return nil, malformed("%s: not hex", name)
	}
	return sig, nil
}

// BodyMAC is HMAC-SHA256(key, body): what a scheme that signs the raw body
// alone (Checkout.com's, GoCardless's) sends, and compares with
// [Check.Match].
func BodyMAC(key, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	_, _ = m.Write(body)
	return m.Sum(nil)
}

// SingleHeader returns the single value of the header name in h, an error
// wrapping [ErrMissingHeader] if it is absent or empty, and one wrapping
// [ErrMalformed] if it is repeated or longer than max bytes.
func SingleHeader(h http.Header, name string, max int) (string, error) { return header(h, name, max) }

// Malformed returns an error wrapping [ErrMalformed] with the text format
// gives; it must hold no header value, body content or secret.
func Malformed(format string, args ...any) error { return malformed(format, args...) }

// ParseUnixTimestamp accepts unix seconds written as canonical decimal
// (digits only, no sign, no leading zero, at most 12 digits); otherwise
// an error wrapping [ErrMalformed] naming the header name.
func ParseUnixTimestamp(name, s string) (int64, error) { return parseTimestamp(name, s) }
