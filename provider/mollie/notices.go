package mollie

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// MediaType is the media type of Mollie's webhook deliveries.
const MediaType = "application/x-www-form-urlencoded"

// maxNoticeBytes bounds a webhook body. Mollie sends "id=" and a payment
// id, about 20 bytes; the longest id paymentID admits, every byte
// percent-encoded, still fits.
const maxNoticeBytes = 256

// paymentID is the shape of a Mollie payment id: "tr_" and up to 64
// letters and digits (tr_WDqYK6vllg, tr_5B8cwPMGnU6qLbRvo7qEZo).
var paymentID = regexp.MustCompile(`^tr_[A-Za-z0-9]{1,64}$`)

// MediaTypes are the media types Mollie's webhooks come in
// (provider.MediaTyped).
func (adapter) MediaTypes() []string { return []string{MediaType} }

// Notices reads a Mollie webhook body, which names one payment and says
// nothing else: exactly one form parameter, id, whose value is a payment
// id (tr_...). A body that is not that form (empty, larger than 256
// bytes, another or a repeated parameter, JSON) is malformed (400); an id
// that is not a payment's (re_..., ord_..., empty) is invalid (422). Its
// one notice has no event id or type: Mollie's webhook carries neither.
func (adapter) Notices(body []byte, _ string) ([]provider.Notice, error) {
	id, err := noticeID(body)
	if err != nil {
		return nil, err
	}
	return []provider.Notice{{Ref: id}}, nil
}

// noticeID is the payment id of a webhook body (Notices).
func noticeID(body []byte) (string, error) {
	const want = "want one form parameter, id=tr_..."
	switch {
	case len(body) == 0:
		return "", payload.Malformed("", "the body is empty: "+want)
	case len(body) > maxNoticeBytes:
		return "", payload.Malformed("", fmt.Sprintf("the body is larger than %d bytes: %s", maxNoticeBytes, want))
	}
	s := string(body)
	if strings.Contains(s, "&") {
		return "", payload.Malformed("", "the body holds more than one form parameter: "+want)
	}
	key, value, ok := strings.Cut(s, "=")
	if !ok {
		return "", payload.Malformed("", "the body is not a form parameter: "+want)
	}
	if k, err := url.QueryUnescape(key); err != nil || k != "id" {
		return "", payload.Malformed("", "the body's form parameter is not id: "+want)
	}
	id, err := url.QueryUnescape(value)
	if err != nil {
		return "", payload.Malformed("id", "id is not percent-encoded correctly")
	}
	if !paymentID.MatchString(id) {
		return "", payload.Invalid("id", "id must be a Mollie payment id: tr_ and 1 to 64 letters and digits")
	}
	return id, nil
}
