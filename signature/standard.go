package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"
	"sync"
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
	sc := standardScratches.Get().(*standardScratch)
	defer standardScratches.Put(sc)
	id, ts, t, sigs, err := v.standardHeaders(h, sc)
	if err != nil {
		return Result{}, err
	}
	sc.signed = append(append(append(append(sc.signed[:0], id...), '.'), ts...), '.')
	for i := range v.secrets {
		m := v.macs[i].Get().(hash.Hash)
		m.Reset()
		_, _ = m.Write(sc.signed)
		_, _ = m.Write(body)
		want := m.Sum(sc.sum[:0])
		v.macs[i].Put(m)
		for _, sig := range sigs {
			if len(sig) == macSize && hmac.Equal(sig, want) {
				return Result{ID: id, Timestamp: t, SecretIndex: i}, nil
			}
		}
	}
	return Result{}, ErrNoMatch
}

// standardScratch is where one check of a Standard Webhooks delivery
// decodes its signatures and lays out the signed content's prefix; pooled,
// so that a check allocates nothing of its own (issue #34's ladder showed
// the signature's allocations per delivery).
type standardScratch struct {
	raw    [maxSignatures][macSize + 1]byte // base64's DecodedLen of 44 characters is 33
	views  [maxSignatures][]byte
	src    [44]byte // one v1 signature as sent, for base64's Decode
	signed []byte   // id + "." + ts + "."
	sum    [macSize]byte
}

var standardScratches = sync.Pool{New: func() any { return new(standardScratch) }}

// newMACPools returns, per secret, a pool of HMAC-SHA256 states keyed with
// it: a state is Reset before each use, which restores its keyed start
// without hashing the key again. The states hold what the secret derives
// (the padded keys), in this process's memory as the secret itself is.
func newMACPools(secrets []Secret) []*sync.Pool {
	pools := make([]*sync.Pool, len(secrets))
	for i, s := range secrets {
		key := s.k.key()
		pools[i] = &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}
	}
	return pools
}

// standardHeaders checks everything of a Standard Webhooks delivery but its
// MAC: it returns the id, the timestamp as sent and parsed, and the decoded
// v1 signatures (views into sc).
func (v *Verifier) standardHeaders(h http.Header, sc *standardScratch) (id, ts string, t time.Time, sigs [][]byte, err error) {
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
	sigs, err = parseStandardSignatureInto(sigHeader, sc)
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
	return parseStandardSignatureInto(s, new(standardScratch))
}

// parseStandardSignatureInto is parseStandardSignature decoding into sc:
// the signatures it returns are views into sc, valid until sc is reused.
func parseStandardSignatureInto(s string, sc *standardScratch) ([][]byte, error) {
	const name = HeaderWebhookSignature
	if len(s) > maxHeaderBytes {
		return nil, malformed("%s: %d bytes, more than %d", name, len(s), maxHeaderBytes)
	}
	sigs := sc.views[:0]
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
		raw := sc.raw[len(sigs)][:]
		n, err := standardEncoding.Decode(raw, sc.src[:copy(sc.src[:], sig)])
		if err != nil {
			return nil, malformed("%s: v1 signature is not base64", name)
		}
		if n != macSize {
			return nil, malformed("%s: v1 signature is %d bytes, not %d", name, n, macSize)
		}
		sigs = append(sigs, raw[:macSize])
	}
	return sigs, nil
}

// StandardSigner signs Standard Webhooks messages with a fixed list of
// secrets: what [SignStandard] does, for a sender that signs many messages
// (each secret's keyed HMAC state is kept and reused, not rebuilt per
// message). It is safe for concurrent use.
type StandardSigner struct {
	macs []*sync.Pool
}

// NewStandardSigner returns a signer with secrets, in order: the first
// signs, the others add their entries (a rotation). It returns an error
// for no secrets, a zero Secret or one not parsed for SchemeStandard.
func NewStandardSigner(secrets []Secret) (*StandardSigner, error) {
	if len(secrets) == 0 {
		return nil, errors.New("signature: no secrets")
	}
	for i, s := range secrets {
		if s.k == nil || s.k.scheme != SchemeStandard {
			return nil, fmt.Errorf("signature: secret %d of %d is not a %s secret", i+1, len(secrets), SchemeStandard)
		}
	}
	return &StandardSigner{macs: newMACPools(secrets)}, nil
}

// Signature is the webhook-signature header of the message id, sent at
// the Unix time unix (the webhook-timestamp header, as sent), with body:
// one "v1,<signature>" entry per secret, space-separated, as
// [SignStandard] writes it.
func (s *StandardSigner) Signature(id, unix string, body []byte) string {
	const entry = len(standardVersion) + 1 + 44 // v1,<base64 of 32 bytes>
	out := make([]byte, 0, len(s.macs)*(entry+1))
	var sum [sha256.Size]byte
	for i, pool := range s.macs {
		m := pool.Get().(hash.Hash)
		m.Reset()
		_, _ = io.WriteString(m, id)
		_, _ = m.Write([]byte{'.'})
		_, _ = io.WriteString(m, unix)
		_, _ = m.Write([]byte{'.'})
		_, _ = m.Write(body)
		mac := m.Sum(sum[:0])
		pool.Put(m)
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, standardVersion...)
		out = append(out, ',')
		out = standardEncoding.AppendEncode(out, mac)
	}
	return string(out)
}
