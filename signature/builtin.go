package signature

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The schemes this package ships register themselves as any provider's
// would: nothing below RegisterScheme knows their names.
func init() {
	RegisterScheme(SchemeSpec{
		Name:        SchemeStandard,
		ParseSecret: parseStandardSecret,
		KeyFormat:   "the base64 after whsec_, decoded",
		Timestamped: true,
		Verify:      func(c Check) (Result, error) { return c.v.verifyStandard(c.Header, c.Body) },
		Precheck: func(c Check) error {
			sc := standardScratches.Get().(*standardScratch)
			defer standardScratches.Put(sc)
			_, _, _, sigs, err := c.v.standardHeaders(c.Header, sc)
			return noneChecked(sigs, err)
		},
		Sign: func(key, _ []byte, id string, ts time.Time, body []byte) (http.Header, []byte, error) {
			unix := strconv.FormatInt(ts.Unix(), 10)
			h := make(http.Header)
			h.Set(HeaderWebhookID, id)
			h.Set(HeaderWebhookTimestamp, unix)
			h.Set(HeaderWebhookSignature, standardVersion+","+encodeStandard(standardMAC(key, id, unix, body)))
			return h, body, nil
		},
	})
	RegisterScheme(SchemeSpec{
		Name:        SchemeStripe,
		ParseSecret: func(entry string) ([]byte, []byte, error) { return []byte(entry), nil, nil },
		KeyFormat:   "the string as it is, whsec_ included",
		Timestamped: true,
		Verify:      func(c Check) (Result, error) { return c.v.verifyStripe(c.Header, c.Body) },
		Precheck: func(c Check) error {
			_, _, sigs, err := c.v.stripeHeader(c.Header)
			return noneChecked(sigs, err)
		},
		Sign: func(key, _ []byte, _ string, ts time.Time, body []byte) (http.Header, []byte, error) {
			unix := strconv.FormatInt(ts.Unix(), 10)
			h := make(http.Header)
			h.Set(HeaderStripeSignature, "t="+unix+","+stripeVersion+"="+encodeStripe(stripeMAC(key, unix, body)))
			return h, body, nil
		},
	})
	RegisterScheme(SchemeSpec{
		Name:        SchemeAdyen,
		ParseSecret: parseAdyenSecret,
		KeyFormat:   "the hex key, decoded: 64 hex digits for Adyen's 32-byte keys",
		InBody:      true,
		Verify:      func(c Check) (Result, error) { return c.v.verifyAdyen(c.Body) },
		Sign: func(key, _ []byte, _ string, _ time.Time, body []byte) (http.Header, []byte, error) {
			signed, err := signAdyen(key, body)
			return http.Header{}, signed, err
		},
	})
}

// noneChecked is a header precheck's answer: err, else ErrNoMatch when the
// headers hold no signature of a checked version.
func noneChecked(sigs [][]byte, err error) error {
	if err == nil && len(sigs) == 0 {
		return ErrNoMatch
	}
	return err
}

// parseStandardSecret: an optional "whsec_" prefix, then standard padded
// base64 of a key that is not empty.
func parseStandardSecret(entry string) ([]byte, []byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(entry, standardSecretPrefix))
	if err != nil {
		// err names only an offset, but keep even that out: the message
		// says what is wrong, not where in the secret.
		return nil, nil, fmt.Errorf("is not valid base64 after the %q prefix", standardSecretPrefix)
	}
	if len(key) == 0 {
		return nil, nil, errors.New("decodes to an empty key")
	}
	return key, nil, nil
}

// parseAdyenSecret: hex digits in either case.
func parseAdyenSecret(entry string) ([]byte, []byte, error) {
	key, err := hex.DecodeString(entry)
	if err != nil {
		// As above: what is wrong, not where.
		return nil, nil, errors.New("is not a hex HMAC key (an even number of hex digits)")
	}
	return key, nil, nil
}
