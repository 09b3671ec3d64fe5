package mollie

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paylock/paylock/provider"
)

// DefaultURL is the base URL of Mollie's API.
const DefaultURL = "https://api.mollie.com"

// maxAnswerBytes bounds an answer of Mollie's API: a payment with its
// refunds and chargebacks is a few kilobytes.
const maxAnswerBytes = 1 << 20

// Errors of a Fetcher, besides provider.ErrNoSuchPayment and
// provider.ErrRefused.
var (
	// ErrNotPaymentID is wrapped, with provider.ErrNoSuchPayment, by the
	// error of a Fetch of a ref that is not a Mollie payment id (tr_...):
	// no request is sent.
	ErrNotPaymentID = errors.New("mollie: not a Mollie payment id (tr_ and letters and digits)")
	// ErrAnswer is wrapped by the error of a Fetch whose answer is not
	// the payment asked for: not JSON, not a payment, another payment's
	// id, or larger than 1 MiB.
	ErrAnswer = errors.New("mollie: the API's answer is not the payment asked for")
)

// NewFetcher returns the fetcher of a mollie source: its payments, from
// Mollie's API at cfg.URL ("": DefaultURL) with the API key cfg.Key, or a
// *provider.SettingError for settings New refuses too.
func (Provider) NewFetcher(cfg provider.ListerConfig) (provider.Fetcher, error) {
	if err := checkSettings(cfg.Settings); err != nil {
		return nil, err
	}
	client := cfg.HTTP
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	base := strings.TrimRight(cfg.URL, "/")
	if base == "" {
		base = DefaultURL
	}
	return fetcher{base: base, key: cfg.Key, client: client}, nil
}

// fetcher asks Mollie's API for one payment of a source. The key is sent
// as "Authorization: Bearer <key>" and never appears in an error.
type fetcher struct {
	base, key string
	client    *http.Client
}

// Fetch reads the payment ref with its refunds and chargebacks
// (GET /v2/payments/{ref}?embed=refunds,chargebacks) and returns Mollie's
// answer as it is, which is what the source's adapter reads, and the
// payment's status. The body is nil when the state records nothing (an
// open or pending payment, with no refunds or chargebacks). An answer
// that is the payment asked for but that the adapter refuses (a bad
// amount, say) is returned all the same, for Adapt to refuse.
//
// Its errors: a ref that is not a payment id (tr_...) is refused without
// a request, wrapping provider.ErrNoSuchPayment and ErrNotPaymentID; a 404
// wraps provider.ErrNoSuchPayment; any other 4xx but 429 (a wrong key:
// 401) wraps provider.ErrRefused; an answer that is not the payment asked
// for wraps ErrAnswer; a 429, a 5xx or a request that failed is a plain
// error, worth trying again.
func (f fetcher) Fetch(ctx context.Context, ref string) ([]byte, string, error) {
	if !paymentID.MatchString(ref) {
		return nil, "", fmt.Errorf("mollie: fetch %q: %w: %w", ref, provider.ErrNoSuchPayment, ErrNotPaymentID)
	}
	what := "mollie: GET /v2/payments/" + ref
	body, err := f.get(ctx, "/v2/payments/"+url.PathEscape(ref)+"?embed=refunds,chargebacks", what)
	if err != nil {
		return nil, "", err
	}
	var head struct {
		Resource string `json:"resource"`
		ID       string `json:"id"`
		Status   string `json:"status"`
	}
	if err := json.Unmarshal(body, &head); err != nil || head.Resource != "payment" || head.ID != ref {
		return nil, "", fmt.Errorf("%s: %w", what, ErrAnswer)
	}
	p, err := read(body)
	if err != nil {
		// The adapter refuses it with the same error, where the pipeline
		// reports refused bodies.
		return body, head.Status, nil
	}
	if len(p.events) == 0 {
		return nil, p.status, nil
	}
	return body, p.status, nil
}

// get GETs path from the API, what naming the request in errors.
func (f fetcher) get(ctx context.Context, path, what string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Authorization", "Bearer "+f.key)
	req.Header.Set("Accept", "application/json")
	res, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", what, res.Status, err)
	}
	if res.StatusCode != http.StatusOK {
		err := fmt.Errorf("%s: %s%s", what, res.Status, f.detail(body))
		switch {
		case res.StatusCode == http.StatusNotFound:
			err = fmt.Errorf("%w: %w", provider.ErrNoSuchPayment, err)
		case res.StatusCode >= 400 && res.StatusCode < 500 && res.StatusCode != http.StatusTooManyRequests:
			err = fmt.Errorf("%w: %w", provider.ErrRefused, err)
		}
		return nil, err
	}
	if len(body) > maxAnswerBytes {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes", what, ErrAnswer, maxAnswerBytes)
	}
	return body, nil
}

// detail is the detail of Mollie's error answer
// ({"status": 401, "title": "Unauthorized Request", "detail": "..."}),
// ": " and at most 200 bytes of it, without the key; "" when it has none.
func (f fetcher) detail(body []byte) string {
	var e struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &e) != nil || e.Detail == "" {
		return ""
	}
	d := e.Detail
	if f.key != "" {
		d = strings.ReplaceAll(d, f.key, "[redacted]")
	}
	if len(d) > 200 {
		d = d[:200]
	}
	return ": " + strings.ToValidUTF8(d, "")
}
