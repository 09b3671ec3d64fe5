package admin

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// GET /admin/api/v1/payments?source=&status=&since=&q=&limit=&cursor=:
// the payments, newest first, a page at a time (store.ListPayments).
// "next_cursor" (and "next", the URL of the next page) is absent on the
// last page. Every parameter is checked; a bad one, or one this listing
// does not know, is a 400 problem naming it.

// maxQuery bounds the q and source parameters, in bytes.
const maxQuery = 200

// paymentSummaryJSON is one payment of the listing.
type paymentSummaryJSON struct {
	Source         string     `json:"source"`
	TransactionID  string     `json:"transaction_id"`
	Status         string     `json:"status"`
	Amount         int64      `json:"amount"`
	Currency       string     `json:"currency,omitempty"`
	AmountRefunded int64      `json:"amount_refunded"`
	EventID        string     `json:"event_id,omitempty"`
	Account        string     `json:"account,omitempty"`
	ReceivedAt     time.Time  `json:"received_at"`
	UpdatedAt      *time.Time `json:"updated_at,omitempty"`
	URL            string     `json:"url"`
}

// paymentListJSON is the JSON of GET /admin/api/v1/payments.
type paymentListJSON struct {
	Payments   []paymentSummaryJSON `json:"payments"`
	NextCursor string               `json:"next_cursor,omitempty"`
	Next       string               `json:"next,omitempty"`
}

// badParam is the 400 problem of a query parameter.
func badParam(name, detail string) *problem.Problem {
	return problem.New(http.StatusBadRequest, "malformed", "Malformed request", name, detail)
}

// sinceParam is the listing's since parameter: an RFC 3339 time or a
// duration ago (3d, 36h, 1d12h); zero when absent, a 400 problem naming
// it when malformed.
func sinceParam(q url.Values, now time.Time) (time.Time, error) {
	v := q.Get("since")
	if v == "" {
		return time.Time{}, nil
	}
	t, err := parseSince(v, now)
	if err != nil {
		return time.Time{}, badParam("since", "since must be an RFC 3339 time (2026-12-01T00:00:00Z) or a duration ago such as 3d, 36h or 1d12h")
	}
	return t, nil
}

// limitParam is the listing's limit parameter, from 1 to
// store.MaxListLimit; store.DefaultListLimit when absent, a 400 problem
// naming it otherwise.
func limitParam(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return store.DefaultListLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > store.MaxListLimit {
		return 0, badParam("limit", "limit must be a number from 1 to "+strconv.Itoa(store.MaxListLimit))
	}
	return n, nil
}

// cursorJSON is what an opaque cursor holds.
type cursorJSON struct {
	ReceivedAt time.Time `json:"r"`
	ID         int64     `json:"i"`
}

func encodeCursor(c store.PaymentCursor) string {
	b, _ := json.Marshal(cursorJSON{ReceivedAt: c.ReceivedAt.UTC(), ID: c.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (store.PaymentCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return store.PaymentCursor{}, err
	}
	var c cursorJSON
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return store.PaymentCursor{}, err
	}
	if c.ID < 1 || c.ReceivedAt.IsZero() {
		return store.PaymentCursor{}, errors.New("incomplete cursor")
	}
	return store.PaymentCursor{ReceivedAt: c.ReceivedAt, ID: c.ID}, nil
}

// parseSince reads since: RFC 3339, or a duration ago in Go's units with
// days in front ("3d", "1d12h", "90m").
func parseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	var d time.Duration
	rest := v
	if days, after, ok := strings.Cut(v, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 16)
		if err != nil {
			return time.Time{}, errors.New("bad days")
		}
		d, rest = time.Duration(n)*24*time.Hour, after
	}
	if rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil || r < 0 {
			return time.Time{}, errors.New("bad duration")
		}
		d += r
	}
	if d <= 0 {
		return time.Time{}, errors.New("empty duration")
	}
	return now.Add(-d), nil
}

// textParam checks a free-text parameter: UTF-8, no control characters,
// at most maxQuery bytes.
func textParam(name, v string) error {
	if len(v) > maxQuery {
		return badParam(name, name+" must be at most "+strconv.Itoa(maxQuery)+" bytes")
	}
	if !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return badParam(name, name+" must be UTF-8 text without control characters")
	}
	return nil
}

// knownParams refuses a query parameter not in names, or one given twice.
func knownParams(q url.Values, names ...string) error {
	for name, vs := range q {
		if !slices.Contains(names, name) {
			return badParam(name, "unknown parameter "+strconv.Quote(name)+": want "+strings.Join(names, ", "))
		}
		if len(vs) > 1 {
			return badParam(name, name+" may be given once")
		}
	}
	return nil
}

// paymentListOf reads the listing's query.
func paymentListOf(q url.Values, now time.Time) (store.PaymentList, error) {
	l := store.PaymentList{Limit: store.DefaultListLimit}
	if err := knownParams(q, "source", "status", "since", "q", "limit", "cursor"); err != nil {
		return l, err
	}
	l.Source = q.Get("source")
	if err := textParam("source", l.Source); err != nil {
		return l, err
	}
	l.Prefix = q.Get("q")
	if err := textParam("q", l.Prefix); err != nil {
		return l, err
	}
	if v := q.Get("status"); v != "" {
		if !slices.Contains(store.PaymentStatuses, v) {
			return l, badParam("status", "status must be one of "+strings.Join(store.PaymentStatuses, ", "))
		}
		l.Status = v
	}
	var err error
	if l.Since, err = sinceParam(q, now); err != nil {
		return l, err
	}
	if l.Limit, err = limitParam(q); err != nil {
		return l, err
	}
	if v := q.Get("cursor"); v != "" {
		c, err := decodeCursor(v)
		if err != nil {
			return l, badParam("cursor", "cursor must be a next_cursor this listing returned")
		}
		l.After = &c
	}
	return l, nil
}

// paymentList answers GET /admin/api/v1/payments.
func (a *Admin) paymentList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	l, err := paymentListOf(q, a.now())
	if err != nil {
		problem.Write(w, err)
		return
	}
	ps, err := a.cfg.Payments.ListPayments(r.Context(), l)
	if err != nil {
		a.storeError(w, r, "listing payments failed", "payment", err)
		return
	}
	out := paymentListJSON{Payments: make([]paymentSummaryJSON, len(ps))}
	for i, p := range ps {
		j := paymentSummaryJSON{Source: p.Source, TransactionID: p.TransactionID, Status: p.Status, Amount: p.Amount,
			Currency: p.Currency, AmountRefunded: p.AmountRefunded, EventID: p.EventID, Account: p.Account,
			ReceivedAt: p.ReceivedAt, URL: APIBase + paymentPath(p.Source, p.TransactionID)[len("/admin"):]}
		if !p.UpdatedAt.IsZero() {
			j.UpdatedAt = &p.UpdatedAt
		}
		out.Payments[i] = j
	}
	if len(ps) > 0 && len(ps) == l.Limit {
		out.NextCursor = encodeCursor(ps[len(ps)-1].Cursor())
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("cursor", out.NextCursor)
		out.Next = APIBase + "/payments?" + next.Encode()
	}
	writeJSON(w, http.StatusOK, out)
}

// storeError answers a store error as a problem: ErrNotFound as "no such
// <what>", the rest through problem.Write (logged when it is a 5xx).
func (a *Admin) storeError(w http.ResponseWriter, r *http.Request, msg, what string, err error) {
	if errors.Is(err, store.ErrNotFound) {
		problem.Write(w, problem.New(http.StatusNotFound, "not-found", "Not found", "", "no such "+what))
		return
	}
	if p := problem.Write(w, err); p.Status >= 500 {
		a.log.ErrorContext(r.Context(), "admin: "+msg, "error", err)
	}
}
