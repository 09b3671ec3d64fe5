// Package fakestripe is a fake of the parts of Stripe's API paylock's
// reconciliation and sync read: GET /v1/payment_intents/{id}
// (https://docs.stripe.com/api/payment_intents/retrieve: a PaymentIntent
// stored with PutPaymentIntent, else the data.object of the newest
// payment_intent.* event of that id, else 404 resource_missing),
// GET /v1/payment_intents/search (https://docs.stripe.com/api/payment_intents/search,
// the query metadata['key']:'value' only: the PaymentIntents stored with
// PutPaymentIntent whose metadata holds it, as
// {"object":"search_result","data":[...],"has_more":false}), and
// GET /v1/events (https://docs.stripe.com/api/events/list),
// newest first, filtered by type (type, or types[] / types[0]...) and created[gte] /
// created[gt], paginated by limit (default 10, at most 100) and
// starting_after, answered as stripe-go's stripe.EventList:
// {"object":"list","data":[...],"has_more":...,"url":"/v1/events"}. A
// request without "Authorization: Bearer <key>" is answered 401 with
// Stripe's error body.
//
// Events are built from the fixtures of provider/stripe/samples (copied in
// testdata/, and tested to stay equal), so that what the fake lists is
// what a webhook of the same event carries.
package fakestripe

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed testdata/payment_intent.succeeded.json
var paymentIntentFixture []byte

//go:embed testdata/charge.succeeded.json
var chargeFixture []byte

// Payment is what an event built by the fake says was paid.
type Payment struct {
	ID       string    // the PaymentIntent's pi_... or the Charge's ch_...
	Amount   int64     // minor units
	Currency string    // lower case, as Stripe sends it ("jpy")
	Created  time.Time // the event's created
	// Metadata, when not nil, is the object's metadata (where a checkout
	// names its order: metadata.order_id).
	Metadata map[string]string
}

// PaymentIntentSucceeded is the payment_intent.succeeded Event of p, shaped
// as provider/stripe/samples/payment_intent.succeeded.json, with the id
// evt_<p.ID>.
func PaymentIntentSucceeded(p Payment) json.RawMessage {
	return build(paymentIntentFixture, p, "amount", "amount_received")
}

// ChargeSucceeded is the charge.succeeded Event of p (a Charge without a
// PaymentIntent), shaped as provider/stripe/samples/charge.succeeded.json.
func ChargeSucceeded(p Payment) json.RawMessage {
	return build(chargeFixture, p, "amount", "amount_captured")
}

func build(fixture []byte, p Payment, amounts ...string) json.RawMessage {
	var ev map[string]any
	if err := json.Unmarshal(fixture, &ev); err != nil {
		panic("fakestripe: fixture: " + err.Error())
	}
	ev["id"] = "evt_" + p.ID
	ev["created"] = p.Created.Unix()
	obj := ev["data"].(map[string]any)["object"].(map[string]any)
	obj["id"] = p.ID
	obj["currency"] = p.Currency
	obj["created"] = p.Created.Unix()
	if p.Metadata != nil {
		obj["metadata"] = p.Metadata
	}
	for _, k := range amounts {
		obj[k] = p.Amount
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic("fakestripe: " + err.Error())
	}
	return b
}

// event is one stored event with the fields the listing filters on.
type event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	raw     json.RawMessage
}

// API is the fake: an http.Handler serving GET /v1/events. Its zero value
// is not usable; build it with New.
type API struct {
	key string
	mux *http.ServeMux

	mu       sync.Mutex
	events   []event // newest first
	intents  map[string]json.RawMessage
	requests int
}

// PaymentIntent is the PaymentIntent of p in status (succeeded,
// requires_capture, canceled, processing...), shaped as the data.object
// of provider/stripe/samples/payment_intent.succeeded.json; amount_received
// is p.Amount only when it succeeded.
func PaymentIntent(p Payment, status string) json.RawMessage {
	var ev map[string]any
	if err := json.Unmarshal(build(paymentIntentFixture, p, "amount"), &ev); err != nil {
		panic("fakestripe: " + err.Error())
	}
	obj := ev["data"].(map[string]any)["object"].(map[string]any)
	obj["status"] = status
	obj["amount_received"] = 0
	obj["amount_capturable"] = 0
	switch status {
	case "succeeded":
		obj["amount_received"] = p.Amount
	case "requires_capture":
		obj["amount_capturable"] = p.Amount
	}
	b, err := json.Marshal(obj)
	if err != nil {
		panic("fakestripe: " + err.Error())
	}
	return b
}

// PutPaymentIntent stores pi (a PaymentIntent object with its id) as
// GET /v1/payment_intents/{id} answers it, replacing an earlier one.
func (a *API) PutPaymentIntent(pi json.RawMessage) {
	var head struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(pi, &head); err != nil || head.ID == "" {
		panic(fmt.Sprintf("fakestripe: not a PaymentIntent: %s", pi))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.intents == nil {
		a.intents = map[string]json.RawMessage{}
	}
	a.intents[head.ID] = pi
}

// paymentIntent answers GET /v1/payment_intents/{id}.
func (a *API) paymentIntent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a.mu.Lock()
	pi, ok := a.intents[id]
	if !ok {
		for _, e := range a.events { // newest first
			var ev struct {
				Data struct {
					Object json.RawMessage `json:"object"`
				} `json:"data"`
			}
			var obj struct {
				ID string `json:"id"`
			}
			if strings.HasPrefix(e.Type, "payment_intent.") && json.Unmarshal(e.raw, &ev) == nil &&
				json.Unmarshal(ev.Data.Object, &obj) == nil && obj.ID == id {
				pi, ok = ev.Data.Object, true
				break
			}
		}
	}
	a.mu.Unlock()
	if !ok {
		stripeError(w, http.StatusNotFound, "invalid_request_error", "No such payment_intent: '"+id+"'")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(pi)
}

// metadataQuery is the one search query the fake understands.
var metadataQuery = regexp.MustCompile(`^metadata\['([A-Za-z0-9_-]+)'\]:'((?:[^'\\]|\\.)*)'$`)

// search answers GET /v1/payment_intents/search.
func (a *API) search(w http.ResponseWriter, r *http.Request) {
	m := metadataQuery.FindStringSubmatch(r.URL.Query().Get("query"))
	if m == nil {
		stripeError(w, http.StatusBadRequest, "invalid_request_error",
			"the fake searches by metadata['key']:'value' only")
		return
	}
	key, value := m[1], strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(m[2])
	a.mu.Lock()
	ids := make([]string, 0, len(a.intents))
	for id := range a.intents {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	data := []json.RawMessage{}
	for _, id := range ids {
		var pi struct {
			Metadata map[string]string `json:"metadata"`
		}
		if json.Unmarshal(a.intents[id], &pi) == nil && pi.Metadata[key] == value {
			data = append(data, a.intents[id])
		}
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "search_result", "data": data, "has_more": false,
		"next_page": nil, "url": "/v1/payment_intents/search"})
}

// New returns a fake that accepts the secret key key.
func New(key string) *API {
	a := &API{key: key, mux: http.NewServeMux()}
	a.mux.HandleFunc("GET /v1/events", a.list)
	a.mux.HandleFunc("GET /v1/payment_intents/{id}", a.paymentIntent)
	a.mux.HandleFunc("GET /v1/payment_intents/search", a.search)
	return a
}

// Add stores events (Stripe Event bodies with id, type and created).
func (a *API) Add(events ...json.RawMessage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, raw := range events {
		var e event
		if err := json.Unmarshal(raw, &e); err != nil || e.ID == "" || e.Type == "" {
			panic(fmt.Sprintf("fakestripe: not an event: %s", raw))
		}
		e.raw = raw
		a.events = append(a.events, e)
	}
	slices.SortStableFunc(a.events, func(x, y event) int { return int(y.Created - x.Created) })
}

// Requests is the number of requests answered so far, refused ones
// included.
func (a *API) Requests() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.requests++
	a.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+a.key {
		stripeError(w, http.StatusUnauthorized, "invalid_request_error", "Invalid API Key provided.")
		return
	}
	a.mux.ServeHTTP(w, r)
}

// list answers GET /v1/events.
func (a *API) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", "limit must be an integer between 1 and 100")
			return
		}
		limit = n
	}
	var gte, gt int64 = -1 << 62, -1 << 62
	for name, dst := range map[string]*int64{"created[gte]": &gte, "created[gt]": &gt} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				stripeError(w, http.StatusBadRequest, "invalid_request_error", name+" must be a unix timestamp")
				return
			}
			*dst = n
		}
	}
	var types []string
	for k, v := range q {
		if strings.HasPrefix(k, "types[") { // types[] or stripe-go's types[0], types[1]...
			types = append(types, v...)
		}
	}
	if t := q.Get("type"); t != "" {
		types = append(types, t)
	}
	after := q.Get("starting_after")

	a.mu.Lock()
	var match []event
	for _, e := range a.events {
		if e.Created >= gte && e.Created > gt && (len(types) == 0 || slices.Contains(types, e.Type)) {
			match = append(match, e)
		}
	}
	a.mu.Unlock()
	if after != "" {
		i := slices.IndexFunc(match, func(e event) bool { return e.ID == after })
		if i < 0 {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", "No such event: '"+after+"'")
			return
		}
		match = match[i+1:]
	}
	page := match[:min(limit, len(match))]
	data := make([]json.RawMessage, len(page))
	for i, e := range page {
		data[i] = e.raw
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"object":   "list",
		"data":     data,
		"has_more": len(match) > len(page),
		"url":      "/v1/events",
	})
}

// stripeError writes Stripe's error body.
func stripeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"type": typ, "message": msg}})
}
