package signature

import (
	"errors"
	"fmt"
)

// Errors returned by [Verifier.Verify] and [Verifier.Precheck]. Every one of them wraps [ErrInvalid],
// so a handler that only needs "reject or not" can test for that alone, and
// [Reason] turns any of them into a label for metrics.
var (
	// ErrInvalid is wrapped by every verification failure.
	ErrInvalid = errors.New("signature: invalid")

	// ErrMissingHeader: a required header is absent or empty; for
	// SchemeAdyen, a notification item has no (or an empty)
	// additionalData.hmacSignature.
	ErrMissingHeader = fmt.Errorf("%w: missing header", ErrInvalid)

	// ErrMalformed: a header is present but cannot be parsed: bad base64 or
	// hex, a signature that is not 32 bytes, a timestamp that is not a
	// canonical decimal number, a header that is too long, repeated, or
	// carries too many signatures; for SchemeAdyen, a body that is not a
	// notification as the package documentation describes it, or an
	// hmacSignature that is not base64 of 32 bytes.
	ErrMalformed = fmt.Errorf("%w: malformed header", ErrInvalid)

	// ErrTooLarge: for SchemeAdyen, a notification with more items than
	// one delivery may carry (checked before any HMAC). It wraps
	// ErrMalformed: Reason says "malformed".
	ErrTooLarge = fmt.Errorf("%w: too many items", ErrMalformed)

	// ErrTimestamp: the signed timestamp is further from the verifier's clock
	// than its tolerance, in the past (a replay) or in the future.
	ErrTimestamp = fmt.Errorf("%w: timestamp outside tolerance", ErrInvalid)

	// ErrNoMatch: the headers are well formed, but no signature in them
	// matches any configured secret (or none is of a version this package
	// checks).
	ErrNoMatch = fmt.Errorf("%w: no matching signature", ErrInvalid)
)

// Reason maps an error to a short, stable label for metrics and logs:
// "missing_header", "malformed", "timestamp" or "no_match" for the errors of
// this package, "" for nil and "other" for anything else.
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrMissingHeader):
		return "missing_header"
	case errors.Is(err, ErrMalformed):
		return "malformed"
	case errors.Is(err, ErrTimestamp):
		return "timestamp"
	case errors.Is(err, ErrNoMatch):
		return "no_match"
	default:
		return "other"
	}
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}
