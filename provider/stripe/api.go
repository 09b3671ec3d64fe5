package stripe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/provider"
)

// DefaultURL is the base URL of Stripe's API.
const DefaultURL = "https://api.stripe.com"

// API lists events from Stripe's API, GET /v1/events
// (https://docs.stripe.com/api/events/list), with a secret key. The key is
// sent as "Authorization: Bearer <key>" and never appears in an error.
type API struct {
	BaseURL string       // "" is DefaultURL
	Key     string       // the secret key, sk_...
	HTTP    *http.Client // nil is a client with a 30s timeout
}

// list is a page of a Stripe list (stripe-go's stripe.EventList: a
// ListMeta and the data).
type list struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
	URL     string            `json:"url"`
}

// List calls fn with each event of type typ created at or after since,
// newest first, 100 a page, following starting_after while has_more. It
// returns fn's error, an error wrapping provider.ErrRefused for a 4xx, or
// the error of a request that failed or a page that is not a Stripe list.
func (c API) List(ctx context.Context, typ string, since time.Time, fn func(event json.RawMessage) error) error {
	client := c.HTTP
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	base := strings.TrimRight(c.BaseURL, "/")
	if base == "" {
		base = DefaultURL
	}
	q := url.Values{
		"type":         {typ},
		"created[gte]": {strconv.FormatInt(since.Unix(), 10)},
		"limit":        {"100"},
	}
	for {
		page, err := c.page(ctx, client, base+"/v1/events?"+q.Encode())
		if err != nil {
			return err
		}
		for _, ev := range page.Data {
			if err := fn(ev); err != nil {
				return err
			}
		}
		if !page.HasMore || len(page.Data) == 0 {
			return nil
		}
		var last struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(page.Data[len(page.Data)-1], &last); err != nil || last.ID == "" {
			return fmt.Errorf("stripe: GET /v1/events: an event without an id")
		}
		q.Set("starting_after", last.ID)
	}
}

func (c API) page(ctx context.Context, client *http.Client, u string) (list, error) {
	var page list
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return page, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	req.Header.Set("Accept", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return page, fmt.Errorf("stripe: GET /v1/events: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return page, fmt.Errorf("stripe: GET /v1/events: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		err := fmt.Errorf("stripe: GET /v1/events: %s: %s", res.Status, e.Error.Message)
		if res.StatusCode >= 400 && res.StatusCode < 500 && res.StatusCode != http.StatusTooManyRequests {
			err = fmt.Errorf("%w: %w", provider.ErrRefused, err)
		}
		return page, err
	}
	if err := json.Unmarshal(body, &page); err != nil || page.Object != "list" {
		return page, fmt.Errorf("stripe: GET /v1/events: the answer is not a Stripe list")
	}
	return page, nil
}
