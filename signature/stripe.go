package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"time"
)

// stripeVersion is the only Stripe signature version checked; v0 (and any
// other key) is skipped.
const stripeVersion = "v1"

func encodeStripe(mac []byte) string { return hex.EncodeToString(mac) }

// stripeMAC is HMAC-SHA256(key, t + "." + body).
func stripeMAC(key []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	_, _ = io.WriteString(m, ts)
	_, _ = m.Write([]byte{'.'})
	_, _ = m.Write(body)
	return m.Sum(nil)
}

func (v *Verifier) verifyStripe(h http.Header, body []byte) (Result, error) {
	ts, t, sigs, err := v.stripeHeader(h)
	if err != nil {
		return Result{}, err
	}
	i := v.match(sigs, func(key []byte) []byte { return stripeMAC(key, ts, body) })
	if i < 0 {
		return Result{}, ErrNoMatch
	}
	return Result{Timestamp: t, SecretIndex: i}, nil
}

// stripeHeader checks everything of a Stripe delivery but its MAC: it
// returns the timestamp as sent and parsed, and the decoded v1 signatures.
func (v *Verifier) stripeHeader(h http.Header) (ts string, t time.Time, sigs [][]byte, err error) {
	s, err := header(h, HeaderStripeSignature, maxHeaderBytes)
	if err != nil {
		return "", time.Time{}, nil, err
	}
	ts, sigs, err = parseStripeSignature(s)
	if err != nil {
		return "", time.Time{}, nil, err
	}
	unix, err := parseTimestamp(HeaderStripeSignature, ts)
	if err != nil {
		return "", time.Time{}, nil, err
	}
	t, err = v.checkTime(unix)
	if err != nil {
		return "", time.Time{}, nil, err
	}
	return ts, t, sigs, nil
}

// parseStripeSignature parses a Stripe-Signature header,
// "t=<unix>,v1=<hex>[,v1=<hex>...]" with other keys (v0) allowed and
// skipped. It returns the t value unparsed and the decoded v1 signatures, or
// an error wrapping ErrMalformed when the header is too long, a pair has no
// "=" or an empty key, t is missing or repeated, there are more than
// maxSignatures signatures, or a v1 value is not hex of 32 bytes.
func parseStripeSignature(s string) (ts string, sigs [][]byte, err error) {
	const name = HeaderStripeSignature
	if len(s) > maxHeaderBytes {
		return "", nil, malformed("%s: %d bytes, more than %d", name, len(s), maxHeaderBytes)
	}
	seenT, entries := false, 0
	for pair := range strings.SplitSeq(s, ",") {
		key, val, ok := strings.Cut(pair, "=")
		if !ok || key == "" {
			return "", nil, malformed("%s: pair is not <key>=<value>", name)
		}
		if key == "t" {
			if seenT {
				return "", nil, malformed("%s: t repeated", name)
			}
			seenT, ts = true, val
			continue
		}
		if entries++; entries > maxSignatures {
			return "", nil, malformed("%s: more than %d signatures", name, maxSignatures)
		}
		if key != stripeVersion {
			continue
		}
		raw, err := hex.DecodeString(val)
		if err != nil {
			return "", nil, malformed("%s: v1 signature is not hex", name)
		}
		if len(raw) != macSize {
			return "", nil, malformed("%s: v1 signature is %d bytes, not %d", name, len(raw), macSize)
		}
		sigs = append(sigs, raw)
	}
	if !seenT {
		return "", nil, malformed("%s: no t", name)
	}
	return ts, sigs, nil
}
