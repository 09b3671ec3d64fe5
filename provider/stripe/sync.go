package stripe

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

// SyncEventPrefix starts the id of an event built from Stripe's API by
// sync ("sync:pi_...:succeeded"), so that the payment's events say where
// each came from. The id is the same for every sync of one PaymentIntent in
// one status: syncing twice records the event once.
const SyncEventPrefix = "sync:"

// syncTypes are the event types a PaymentIntent's status is recorded as;
// a status not here (processing, requires_action, requires_confirmation,
// requires_payment_method without a failure) is not final.
var syncTypes = map[string]string{
	"succeeded":        "payment_intent.succeeded",
	"requires_capture": "payment_intent.amount_capturable_updated",
	"canceled":         "payment_intent.canceled",
}

// NewFetcher returns the fetcher of a stripe source: its PaymentIntents
// from Stripe's API at cfg.URL with cfg.Key.
func (Provider) NewFetcher(cfg provider.ListerConfig) (provider.Fetcher, error) {
	if _, err := eventTypes(cfg.Settings); err != nil {
		return nil, err
	}
	return fetcher{api: API{BaseURL: cfg.URL, Key: cfg.Key, HTTP: cfg.HTTP}, now: time.Now}, nil
}

type fetcher struct {
	api API
	now func() time.Time
}

// Fetch reads the PaymentIntent ref (GET /v1/payment_intents/{id}) and
// returns it inside the event its status would have sent:
// payment_intent.succeeded, payment_intent.amount_capturable_updated
// (requires_capture), payment_intent.canceled, or
// payment_intent.payment_failed (requires_payment_method with a
// last_payment_error), with the id sync:<pi>:<status>. Any other status is
// not final: a nil body.
func (f fetcher) Fetch(ctx context.Context, ref string) ([]byte, string, error) {
	raw, err := f.api.PaymentIntent(ctx, ref)
	if err != nil {
		return nil, "", err
	}
	return syncEvent(raw, ref, f.now())
}

// syncEvent is Fetch's answer when Stripe's API answered raw for the
// PaymentIntent ref at now (the event's created). ThinSamples builds its
// fetched bodies with it, so that they are what Fetch returns.
func syncEvent(raw json.RawMessage, ref string, now time.Time) ([]byte, string, error) {
	var pi struct {
		ID               string          `json:"id"`
		Object           string          `json:"object"`
		Status           string          `json:"status"`
		Livemode         bool            `json:"livemode"`
		LastPaymentError json.RawMessage `json:"last_payment_error"`
	}
	if err := json.Unmarshal(raw, &pi); err != nil || pi.Object != "payment_intent" || pi.ID != ref {
		return nil, "", fmt.Errorf("stripe: GET /v1/payment_intents/%s: the answer is not that PaymentIntent", ref)
	}
	typ, ok := syncTypes[pi.Status]
	if !ok && pi.Status == "requires_payment_method" && len(pi.LastPaymentError) > 0 && string(pi.LastPaymentError) != "null" {
		typ, ok = "payment_intent.payment_failed", true
	}
	if !ok {
		return nil, pi.Status, nil
	}
	body, err := json.Marshal(map[string]any{
		"id": SyncEventPrefix + pi.ID + ":" + pi.Status, "object": "event", "type": typ,
		"created": now.Unix(), "livemode": pi.Livemode, "api_version": nil,
		"data": map[string]json.RawMessage{"object": raw},
	})
	return body, pi.Status, err
}

// FindByOrder finds the PaymentIntents whose metadata names orderID with
// Stripe's search (GET /v1/payment_intents/search, the query
// metadata['key']:'orderID'), for a pointer into a PaymentIntent's
// metadata (/data/object/metadata/<key>, the default order_id); any other
// pointer is provider.ErrUnsupportedPointer. Stripe's search index lags
// writes by up to a minute, which the janitor's PendingAfter covers; its
// first page (100 PaymentIntents) is read.
func (f fetcher) FindByOrder(ctx context.Context, pointer []string, orderID string) ([]string, error) {
	if len(pointer) != 4 || pointer[0] != "data" || pointer[1] != "object" || pointer[2] != "metadata" ||
		!searchable(pointer[3]) {
		return nil, fmt.Errorf("%w: stripe searches PaymentIntents by /data/object/metadata/<key> only, not /%s",
			provider.ErrUnsupportedPointer, strings.Join(pointer, "/"))
	}
	raw, err := f.api.Search(ctx, "metadata['"+pointer[3]+"']:'"+searchQuote(orderID)+"'")
	if err != nil {
		return nil, err
	}
	var res struct {
		Object string `json:"object"`
		Data   []struct {
			ID       string            `json:"id"`
			Object   string            `json:"object"`
			Metadata map[string]string `json:"metadata"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || res.Object != "search_result" {
		return nil, errors.New("stripe: GET /v1/payment_intents/search: the answer is not a search result")
	}
	var ids []string
	for _, pi := range res.Data {
		// The search matches on the metadata; what it finds must say so.
		if pi.Object == "payment_intent" && pi.ID != "" && pi.Metadata[pointer[3]] == orderID {
			ids = append(ids, pi.ID)
		}
	}
	return ids, nil
}

// searchable reports whether a metadata key can be named in a search
// query: letters, digits, '_' and '-'.
func searchable(key string) bool {
	if key == "" {
		return false
	}
	for _, c := range key {
		if !(c == '_' || c == '-' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// searchQuote escapes a value for a single-quoted string of Stripe's
// search query language (https://docs.stripe.com/search#search-query-language):
// a quote or a backslash is preceded by a backslash.
func searchQuote(v string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v)
}

// PaymentIntent returns the PaymentIntent id as Stripe's API answers it
// (https://docs.stripe.com/api/payment_intents/retrieve): an error wrapping
// provider.ErrNoSuchPayment for a 404, provider.ErrRefused for another
// 4xx, or the error of a request that failed.
func (c API) PaymentIntent(ctx context.Context, id string) (json.RawMessage, error) {
	return c.get(ctx, "/v1/payment_intents/"+url.PathEscape(id), "stripe: GET /v1/payment_intents/"+id)
}

// Search returns the first page (100) of the PaymentIntents query finds
// (https://docs.stripe.com/api/payment_intents/search), with
// PaymentIntent's errors.
func (c API) Search(ctx context.Context, query string) (json.RawMessage, error) {
	q := url.Values{"query": {query}, "limit": {"100"}}
	return c.get(ctx, "/v1/payment_intents/search?"+q.Encode(), "stripe: GET /v1/payment_intents/search")
}

// get GETs path from the API, what naming it in errors.
func (c API) get(ctx context.Context, path, what string) (json.RawMessage, error) {
	client := c.HTTP
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	base := strings.TrimRight(c.BaseURL, "/")
	if base == "" {
		base = DefaultURL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	req.Header.Set("Accept", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		err := fmt.Errorf("%s: %s: %s", what, res.Status, e.Error.Message)
		switch {
		case res.StatusCode == http.StatusNotFound:
			err = fmt.Errorf("%w: %w", provider.ErrNoSuchPayment, err)
		case res.StatusCode >= 400 && res.StatusCode < 500 && res.StatusCode != http.StatusTooManyRequests:
			err = fmt.Errorf("%w: %w", provider.ErrRefused, err)
		}
		return nil, err
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("%s: the answer is not JSON", what)
	}
	return body, nil
}

// checkAPI checks the api_key_env and api_url settings: a variable name,
// and an API base URL (provider.CheckAPISettings).
func checkAPI(s provider.Settings) error {
	return provider.CheckAPISettings(s, "the secret key (sk_...)", DefaultURL)
}
