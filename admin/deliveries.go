package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// The delivery log on the admin listener (Config.Deliveries): the verified
// deliveries that recorded nothing (ignored, refused, mismatch, orphan).
//
//   - GET /admin/api/v1/deliveries?source=&outcome=&since=&until=&limit=&before=
//     lists them as JSON, newest first, a page at a time: "next" is the
//     URL of the next page (before = the last id), absent on the last;
//   - GET /admin/api/v1/deliveries/{id} is one, with its kept headers and
//     body;
//   - POST /admin/api/v1/deliveries/{id}/replay runs one through the
//     pipeline again (Config.ReplayDelivery), as paylock deliveries replay
//     does;
//   - with the console, GET /admin/deliveries (the same filters) and
//     GET /admin/deliveries/{id} are the pages.

// DeliveryLog is what the admin listener reads of the delivery log:
// *store.Deliveries.
type DeliveryLog interface {
	Deliveries(ctx context.Context, f store.DeliveryFilter) ([]store.Delivery, error)
	Delivery(ctx context.Context, id int64) (store.Delivery, error)
}

// Page sizes of the delivery log's listings.
const (
	defaultDeliveriesLimit = 50
	maxDeliveriesLimit     = 500
)

// deliveryJSON is one kept delivery as the JSON API answers it; Headers
// and Body only for GET /admin/deliveries/{id}.
type deliveryJSON struct {
	ID            int64               `json:"id"`
	Source        string              `json:"source"`
	EventID       string              `json:"event_id,omitempty"`
	Outcome       string              `json:"outcome"`
	Status        int                 `json:"status"`
	ProblemType   string              `json:"problem_type,omitempty"`
	ProblemDetail string              `json:"problem_detail,omitempty"`
	ReceivedAt    time.Time           `json:"received_at"`
	LastSeenAt    time.Time           `json:"last_seen_at"`
	Seen          int                 `json:"seen"`
	ReplayedAt    *time.Time          `json:"replayed_at,omitempty"`
	ReplayResult  string              `json:"replay_result,omitempty"`
	RequestID     string              `json:"request_id,omitempty"`
	BodyBytes     int                 `json:"body_bytes"`
	Headers       map[string][]string `json:"headers,omitempty"`
	// Body is the raw body as text when it is UTF-8, else BodyBase64.
	Body       *string `json:"body,omitempty"`
	BodyBase64 string  `json:"body_base64,omitempty"`
}

func deliveryJSONOf(d store.Delivery, full bool) deliveryJSON {
	j := deliveryJSON{ID: d.ID, Source: d.Source, EventID: d.EventID, Outcome: string(d.Outcome), Status: d.Status,
		ProblemType: d.ProblemType, ProblemDetail: d.ProblemDetail, ReceivedAt: d.ReceivedAt, LastSeenAt: d.LastSeenAt,
		Seen: d.Seen, ReplayResult: d.ReplayResult, RequestID: d.RequestID, BodyBytes: d.BodyBytes}
	if !d.ReplayedAt.IsZero() {
		j.ReplayedAt = &d.ReplayedAt
	}
	if full {
		j.Headers = d.Headers
		if utf8.Valid(d.Body) {
			s := string(d.Body)
			j.Body = &s
		} else {
			b, _ := json.Marshal(d.Body) // a base64 JSON string
			j.BodyBase64 = strings.Trim(string(b), `"`)
		}
	}
	return j
}

// deliveryList is the JSON of GET /admin/deliveries.
type deliveryList struct {
	Deliveries []deliveryJSON `json:"deliveries"`
	Next       string         `json:"next,omitempty"`
}

// deliveryFilterOf reads the listing's query; the error names the
// parameter.
func deliveryFilterOf(q url.Values, now time.Time) (store.DeliveryFilter, string, error) {
	f := store.DeliveryFilter{Source: strings.TrimSpace(q.Get("source")), Outcome: store.DeliveryOutcome(q.Get("outcome")),
		Limit: defaultDeliveriesLimit}
	if f.Outcome != "" && !slices.Contains(store.DeliveryOutcomes, f.Outcome) {
		return f, "outcome", errors.New("outcome must be ignored, refused, mismatch or orphan")
	}
	var err error
	if f.Since, err = parseConsoleTime(q.Get("since"), now); err != nil {
		return f, "since", errors.New("since: want an RFC 3339 time, a date and time, or a duration ago such as 24h")
	}
	if f.Until, err = parseConsoleTime(q.Get("until"), now); err != nil {
		return f, "until", errors.New("until: want an RFC 3339 time, a date and time, or a duration ago such as 24h")
	}
	for _, p := range []struct {
		name string
		set  func(int64)
	}{
		{"limit", func(n int64) { f.Limit = int(min(n, maxDeliveriesLimit)) }},
		{"before", func(n int64) { f.Before = n }},
	} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return f, p.name, errors.New(p.name + " must be a positive number")
			}
			p.set(n)
		}
	}
	return f, "", nil
}

// nextDeliveries is the URL of the page after l under q ("" when l is the
// last page).
func nextDeliveries(path string, q url.Values, f store.DeliveryFilter, l []store.Delivery) string {
	if len(l) < f.Limit || len(l) == 0 {
		return ""
	}
	next := url.Values{}
	for k, v := range q {
		next[k] = v
	}
	next.Set("before", strconv.FormatInt(l[len(l)-1].ID, 10))
	return path + "?" + next.Encode()
}

func (a *Admin) deliveryList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := knownParams(q, "source", "outcome", "since", "until", "limit", "before"); err != nil {
		problem.Write(w, err)
		return
	}
	f, field, err := deliveryFilterOf(q, a.now())
	if err != nil {
		problem.Write(w, problem.New(http.StatusBadRequest, "malformed", "Malformed request", field, err.Error()))
		return
	}
	l, err := a.cfg.Deliveries.Deliveries(r.Context(), f)
	if err != nil {
		a.deliveryError(w, r, err)
		return
	}
	out := deliveryList{Deliveries: make([]deliveryJSON, len(l)), Next: nextDeliveries(APIBase+"/deliveries", q, f, l)}
	for i, d := range l {
		out.Deliveries[i] = deliveryJSONOf(d, false)
	}
	writeJSON(w, http.StatusOK, out)
}

// deliveryID reads the {id} of r's path: a positive int64, else it
// answers 400 and reports false.
func deliveryID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		problem.Write(w, badParam("id", "a delivery id is a number from 1 to 9223372036854775807"))
		return 0, false
	}
	return id, true
}

func (a *Admin) delivery(w http.ResponseWriter, r *http.Request) {
	id, ok := deliveryID(w, r)
	if !ok {
		return
	}
	d, err := a.cfg.Deliveries.Delivery(r.Context(), id)
	if err != nil {
		a.deliveryError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, deliveryJSONOf(d, true))
}

// deliveryError answers a store error: 404, 503, or 500 (logged).
func (a *Admin) deliveryError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		problem.Write(w, problem.New(http.StatusNotFound, "not-found", "Not found", "", "no such delivery"))
		return
	case !errors.Is(err, store.ErrUnavailable):
		a.log.ErrorContext(r.Context(), "admin: reading the delivery log failed", "error", err)
	}
	problem.Write(w, err)
}

// DeliveryReplay is what a replay of a kept delivery came to.
type DeliveryReplay struct {
	// Result is "processed" (recorded now), "duplicate" (already
	// recorded), or why it still records nothing: "ignored", "refused",
	// "mismatch".
	Result string `json:"result"`
	Detail string `json:"detail,omitempty"`
	// Recorded says its records are stored now.
	Recorded bool `json:"recorded"`
}

// deliveryReplay answers POST /admin/api/v1/deliveries/{id}/replay with
// what the replay came to (200 once the delivery log notes it); an
// error the pipeline could not confirm answers as a problem (503).
func (a *Admin) deliveryReplay(w http.ResponseWriter, r *http.Request) {
	id, ok := deliveryID(w, r)
	if !ok {
		return
	}
	d, err := a.cfg.Deliveries.Delivery(r.Context(), id)
	if err != nil {
		a.deliveryError(w, r, err)
		return
	}
	res, err := a.cfg.ReplayDelivery(r.Context(), d)
	if err != nil {
		a.storeError(w, r, "replaying a delivery failed", "delivery", err)
		return
	}
	a.log.InfoContext(r.Context(), "admin: delivery replayed", "id", id, "source", d.Source, "result", res.Result,
		"who", Identity(r.Context()))
	writeJSON(w, http.StatusOK, struct {
		ID int64 `json:"id"`
		DeliveryReplay
	}{id, res})
}

// The console's pages.

type deliveryListData struct {
	Form       url.Values
	Outcomes   []store.DeliveryOutcome
	Deliveries []store.Delivery
	Next       string
}

func (c *console) deliveryList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := deliveryListData{Form: q, Outcomes: store.DeliveryOutcomes}
	page := consolePage{Title: "Delivery log", Nav: "deliveries", Data: &d}
	f, _, err := deliveryFilterOf(q, c.a.now())
	if err != nil {
		page.Error = strings.ToUpper(err.Error()[:1]) + err.Error()[1:] + "."
		c.render(w, r, http.StatusBadRequest, "delivery-list", page)
		return
	}
	if d.Deliveries, err = c.a.cfg.Deliveries.Deliveries(r.Context(), f); err != nil {
		c.storeFailed(w, r, "deliveries", err)
		return
	}
	d.Next = nextDeliveries("/admin/deliveries", q, f, d.Deliveries)
	c.render(w, r, http.StatusOK, "delivery-list", page)
}

type deliveryData struct {
	Delivery store.Delivery
	Headers  []string // "Name: value", sorted
	Body     string   // pretty-printed when it is JSON
}

func (c *console) delivery(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		c.fail(w, r, http.StatusBadRequest, "Not a delivery id: a number from 1 to 9223372036854775807.")
		return
	}
	dl, err := c.a.cfg.Deliveries.Delivery(r.Context(), id)
	if err != nil {
		c.storeFailed(w, r, "delivery", err)
		return
	}
	d := deliveryData{Delivery: dl, Body: string(dl.Body)}
	for k, vs := range dl.Headers {
		d.Headers = append(d.Headers, k+": "+strings.Join(vs, ", "))
	}
	slices.Sort(d.Headers)
	var pretty bytes.Buffer
	if json.Indent(&pretty, dl.Body, "", "  ") == nil {
		d.Body = pretty.String()
	}
	page := consolePage{Title: "Delivery " + strconv.FormatInt(id, 10), Nav: "deliveries", Data: &d}
	c.render(w, r, http.StatusOK, "delivery", page)
}
