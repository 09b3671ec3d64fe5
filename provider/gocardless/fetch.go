package gocardless

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// DefaultURL is the base URL of GoCardless's live API; the sandbox's is
// https://api-sandbox.gocardless.com.
const DefaultURL = "https://api.gocardless.com"

// APIVersion is the GoCardless-Version header every request carries: the
// API version whose answers this package reads.
const APIVersion = "2015-07-06"

// MaxAnswerBytes bounds what one Fetch reads from GoCardless's API, all
// its requests together: a payment and its refunds are a few kilobytes.
const MaxAnswerBytes = 1 << 20

// refundsPageLimit is the refunds asked for a page (GoCardless's largest
// limit), and maxRefundPages the pages read before giving up: a payment
// has a handful of refunds, never thousands.
const (
	refundsPageLimit = 500
	maxRefundPages   = 8
)

// NewFetcher returns the fetcher of a gocardless source: its payments from
// GoCardless's API at cfg.URL ("" is DefaultURL) with the access token
// cfg.Key, through cfg.HTTP (nil is a client with a 30s timeout). It
// returns a *provider.SettingError for settings New refuses, or for a URL
// that is not an http(s) URL without credentials.
func (Provider) NewFetcher(cfg provider.ListerConfig) (provider.Fetcher, error) {
	if err := checkSettings(cfg.Settings); err != nil {
		return nil, err
	}
	base := cfg.URL
	if base == "" {
		base = DefaultURL
	}
	if err := provider.CheckAPIURL(base); err != nil {
		return nil, &provider.SettingError{Key: provider.KeyAPIURL, Err: err}
	}
	client := cfg.HTTP
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	return fetcher{base: strings.TrimRight(base, "/"), token: cfg.Key, client: client}, nil
}

// fetcher asks GoCardless's API for one payment at a time. The token is
// sent as "Authorization: Bearer <token>" and never appears in an error.
type fetcher struct {
	base   string
	token  string
	client *http.Client
}

// Fetch returns the payment ref as the source's adapter reads it (Adapt):
//
//	{"payments": <GET /payments/{id}'s payments object, as answered>,
//	 "refunds": [<each refund GET /refunds?payment={id} lists, as answered>]}
//
// and the payment's status. ref is a payment id (PM...), or a refund id
// (RF...: a refund event that does not link its payment), whose payment
// GET /refunds/{id} names. Each answer is checked to be what was asked
// for: that payment, that refund, refunds of that payment. A nil body: the
// payment's status records nothing yet and it has no refund whose status
// records something (lifecycle.go).
//
// A ref of neither shape is asked nothing: an error wrapping
// provider.ErrNoSuchPayment, as is the API's 404 and a refund that
// refunds no payment (a mandate's). Another 4xx but 429 (a
// wrong or revoked token, a token without access) wraps
// provider.ErrRefused; a 429, a 5xx, a network failure or an answer that
// is not what was asked for is a plain error, worth retrying later. At
// most MaxAnswerBytes are read.
func (f fetcher) Fetch(ctx context.Context, ref string) ([]byte, string, error) {
	budget := MaxAnswerBytes
	pm := ref
	switch {
	case paymentID.MatchString(ref):
	case refundID.MatchString(ref):
		var err error
		if pm, err = f.refundsPayment(ctx, ref, &budget); err != nil {
			return nil, "", err
		}
	default:
		return nil, "", fmt.Errorf("%w: gocardless: %s is neither a payment id (PM...) nor a refund id (RF...)",
			provider.ErrNoSuchPayment, quoted(ref))
	}
	payment, status, err := f.payment(ctx, pm, &budget)
	if err != nil {
		return nil, "", err
	}
	refunds, statuses, err := f.refunds(ctx, pm, &budget)
	if err != nil {
		return nil, "", err
	}
	if !recordsSomething(status, statuses) {
		return nil, status, nil
	}
	var b bytes.Buffer
	b.WriteString(`{"payments":`)
	b.Write(payment)
	b.WriteString(`,"refunds":[`)
	for i, r := range refunds {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(r)
	}
	b.WriteString(`]}`)
	return b.Bytes(), status, nil
}

// payment is GET /payments/{id}'s payment object, as answered, and its
// status.
func (f fetcher) payment(ctx context.Context, id string, budget *int) ([]byte, string, error) {
	what := "GET /payments/" + id
	root, err := f.get(ctx, "/payments/"+url.PathEscape(id), what, budget)
	if err != nil {
		return nil, "", err
	}
	p, _, err := root.RequiredObject("", "payments")
	if err != nil {
		return nil, "", notAsked(what, "a payment")
	}
	got, _, err := p.RequiredString("", "id")
	if err != nil || got != id {
		return nil, "", notAsked(what, "that payment")
	}
	status, _, err := p.RequiredString("", "status")
	if err != nil {
		return nil, "", notAsked(what, "a payment with a status")
	}
	return p.Raw(), status, nil
}

// refundsPayment is the id of the payment refund id refunds
// (GET /refunds/{id}'s links.payment); an error wrapping
// provider.ErrNoSuchPayment when it links none (a refund of a mandate).
func (f fetcher) refundsPayment(ctx context.Context, id string, budget *int) (string, error) {
	what := "GET /refunds/" + id
	root, err := f.get(ctx, "/refunds/"+url.PathEscape(id), what, budget)
	if err != nil {
		return "", err
	}
	r, _, err := root.RequiredObject("", "refunds")
	if err != nil {
		return "", notAsked(what, "a refund")
	}
	if got, _, err := r.RequiredString("", "id"); err != nil || got != id {
		return "", notAsked(what, "that refund")
	}
	link, _, err := r.Child("", "links", "payment")
	switch {
	case err == nil && (link == nil || link.Kind() == payload.Null):
		// A refund of a mandate (GoCardless's restricted mandate refunds)
		// refunds no payment: there is none to fetch.
		return "", fmt.Errorf("%w: gocardless: %s: the refund links no payment", provider.ErrNoSuchPayment, what)
	case err != nil || link.Kind() != payload.String || !paymentID.MatchString(link.Text()):
		return "", notAsked(what, "a refund of a payment (links.payment, PM...)")
	}
	return link.Text(), nil
}

// refunds are the refunds of payment id (GET /refunds?payment={id}, every
// page), each as answered, and their statuses.
func (f fetcher) refunds(ctx context.Context, id string, budget *int) (raws [][]byte, statuses []string, err error) {
	q := url.Values{"payment": {id}, "limit": {strconv.Itoa(refundsPageLimit)}}
	what := "GET /refunds?payment=" + id
	seen := map[string]bool{}
	for range maxRefundPages {
		root, err := f.get(ctx, "/refunds?"+q.Encode(), what, budget)
		if err != nil {
			return nil, nil, err
		}
		list, _, err := root.Child("", "refunds")
		if err != nil || list == nil || list.Kind() != payload.Array {
			return nil, nil, notAsked(what, "a list of refunds")
		}
		for _, r := range list.Items() {
			rid, _, err := r.Child("", "id")
			if err != nil || rid == nil || !refundID.MatchString(rid.Text()) || seen[rid.Text()] {
				return nil, nil, notAsked(what, "a list of distinct refunds (RF...)")
			}
			seen[rid.Text()] = true
			if pm, _, err := r.RequiredString("", "links", "payment"); err != nil || pm != id {
				return nil, nil, notAsked(what, "that payment's refunds")
			}
			status, _, err := r.RequiredString("", "status")
			if err != nil {
				return nil, nil, notAsked(what, "refunds with a status")
			}
			raws, statuses = append(raws, r.Raw()), append(statuses, status)
		}
		after, _, err := root.Child("", "meta", "cursors", "after")
		if err != nil || after == nil || after.Kind() == payload.Null {
			return raws, statuses, nil
		}
		if after.Kind() != payload.String || after.Text() == "" || after.Text() == q.Get("after") {
			return nil, nil, notAsked(what, "a page with a usable cursor")
		}
		q.Set("after", after.Text())
	}
	return nil, nil, fmt.Errorf("gocardless: %s: more than %d pages of refunds", what, maxRefundPages)
}

// get GETs path from the API and decodes its answer, what naming the
// request in errors; it reads at most *budget bytes and takes what it read
// from *budget.
func (f fetcher) get(ctx context.Context, path, what string, budget *int) (*payload.Node, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("gocardless: %s: %w", what, err)
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("GoCardless-Version", APIVersion)
	req.Header.Set("Accept", "application/json")
	res, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("gocardless: %s: %w", what, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, int64(*budget)+1))
	if err != nil {
		return nil, fmt.Errorf("gocardless: %s: %w", what, err)
	}
	if len(body) > *budget {
		return nil, fmt.Errorf("gocardless: %s: the answers exceed %d bytes", what, MaxAnswerBytes)
	}
	*budget -= len(body)
	if res.StatusCode != http.StatusOK {
		return nil, f.refusal(res, body, what)
	}
	root, err := payload.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("gocardless: %s: the answer is not a JSON object: %w", what, err)
	}
	return root, nil
}

// refusal is the error of an answer other than 200: it wraps
// provider.ErrNoSuchPayment for a 404 and provider.ErrRefused for another
// 4xx but 429, and says what GoCardless's error said (its message and
// request id), without the token.
func (f fetcher) refusal(res *http.Response, body []byte, what string) error {
	var detail string
	if root, err := payload.Decode(body); err == nil {
		if msg, _, err := root.RequiredString("", "error", "message"); err == nil {
			detail = ": " + quoted(f.scrub(msg))
		}
		if id, _, err := root.RequiredString("", "error", "request_id"); err == nil {
			detail += " (request " + quoted(f.scrub(id)) + ")"
		}
	}
	err := fmt.Errorf("gocardless: %s: %s%s", what, res.Status, detail)
	switch {
	case res.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %w", provider.ErrNoSuchPayment, err)
	case res.StatusCode >= 400 && res.StatusCode < 500 && res.StatusCode != http.StatusTooManyRequests:
		return fmt.Errorf("%w: %w", provider.ErrRefused, err)
	}
	return err
}

// scrub returns s, foreign text, with the token replaced should it
// appear. The token is only ever sent in the Authorization header, which
// no error of net/http quotes.
func (f fetcher) scrub(s string) string {
	if f.token == "" {
		return s
	}
	return strings.ReplaceAll(s, f.token, "[token]")
}

// notAsked is the error of an answer that is not what was asked for.
func notAsked(what, want string) error {
	return fmt.Errorf("gocardless: %s: the answer is not %s", what, want)
}

// quoted is s quoted, cut to 200 bytes: API messages and refs are
// foreign text.
func quoted(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strconv.Quote(s)
}
