package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"time"
)

// standardVersion is the only Standard Webhooks signature version checked:
// HMAC-SHA256. Others (v1a, asymmetric) are skipped.
const standardVersion = "v1"

var standardEncoding = base64.StdEncoding.Strict()

func encodeStandard(mac []byte) string { return standardEncoding.EncodeToString(mac) }

// standardMAC is HMAC-SHA256(key, id + "." + ts + "." + body).
func standardMAC(key []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	_, _ = io.WriteString(m, id)
	_, _ = m.Write([]byte{'.'})
	_, _ = io.WriteString(m, ts)
	_, _ = m.Write([]byte{'.'})
	_, _ = m.Write(body)
	return m.Sum(nil)
}

func (v *Verifier) verifyStandard(h http.Header, body []byte) (Result, error) {
	id, ts, t, sigs, err := v.standardHeaders(h)
	if err != nil {
		return Result{}, err
	}
	i := v.match(sigs, func(key []byte) []byte { return standardMAC(key, id, ts, body) })
	if i < 0 {
		return Result{}, ErrNoMatch
	}
	return Result{ID: id, Timestamp: t, SecretIndex: i}, nil
}

// standardHeaders checks everything of a Standard Webhooks delivery but its
// MAC: it returns the id, the timestamp as sent and parsed, and the decoded
// v1 signatures.
func (v *Verifier) standardHeaders(h http.Header) (id, ts string, t time.Time, sigs [][]byte, err error) {
	id, err = header(h, HeaderWebhookID, maxIDBytes)
	if err != nil {
		return "", "", time.Time{}, nil, err
	}
	ts, err = header(h, HeaderWebhookTimestamp, maxTimestampLen)
	if err != nil {
		return "", "", time.Time{}, nil, err
	}
	sigHeader, err := header(h, HeaderWebhookSignature, maxHeaderBytes)
	if err != nil {
		return "", "", time.Time{}, nil, err
	}
	unix, err := parseTimestamp(HeaderWebhookTimestamp, ts)
	if err != nil {
		return "", "", time.Time{}, nil, err
	}
	sigs, err = parseStandardSignature(sigHeader)
	if err != nil {
		return "", "", time.Time{}, nil, err
	}
	t, err = v.checkTime(unix)
	if err != nil {
		return "", "", time.Time{}, nil, err
	}
	return id, ts, t, sigs, nil
}

// parseStandardSignature parses a webhook-signature header: space-separated
// "<version>,<signature>" entries. It returns the decoded v1 signatures,
// skipping other versions, or an error wrapping ErrMalformed when the header
// is too long, has more than maxSignatures entries, an entry without a
// version, or a v1 signature that is not 44 characters of standard base64
// for 32 bytes. Runs of spaces count as one.
func parseStandardSignature(s string) ([][]byte, error) {
	const name = HeaderWebhookSignature
	if len(s) > maxHeaderBytes {
		return nil, malformed("%s: %d bytes, more than %d", name, len(s), maxHeaderBytes)
	}
	var sigs [][]byte
	entries := 0
	for entry := range strings.SplitSeq(s, " ") {
		if entry == "" {
			continue
		}
		if entries++; entries > maxSignatures {
			return nil, malformed("%s: more than %d signatures", name, maxSignatures)
		}
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version == "" {
			return nil, malformed("%s: entry is not <version>,<signature>", name)
		}
		if version != standardVersion {
			continue
		}
		// The length check also keeps out the \r and \n that base64
		// decoding would skip.
		if len(sig) != standardEncoding.EncodedLen(macSize) {
			return nil, malformed("%s: v1 signature is not %d base64 characters", name, standardEncoding.EncodedLen(macSize))
		}
		raw, err := standardEncoding.DecodeString(sig)
		if err != nil {
			return nil, malformed("%s: v1 signature is not base64", name)
		}
		if len(raw) != macSize {
			return nil, malformed("%s: v1 signature is %d bytes, not %d", name, len(raw), macSize)
		}
		sigs = append(sigs, raw)
	}
	return sigs, nil
}
