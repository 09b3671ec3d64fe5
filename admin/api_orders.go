package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/order"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// Orders is what the orders' routes need of the store (store.Orders).
type Orders interface {
	RegisterOrder(ctx context.Context, r store.OrderRegistration) (store.Order, bool, error)
	GetOrder(ctx context.Context, orderID string) (store.Order, error)
	ListOrders(ctx context.Context, l store.OrderList) ([]store.Order, error)
}

// maxOrderBody bounds the body of POST /admin/api/v1/orders.
const maxOrderBody = 4 << 10

// orderPaymentJSON is one payment of an order.
type orderPaymentJSON struct {
	Source         string `json:"source"`
	TransactionID  string `json:"transaction_id"`
	Status         string `json:"status"`
	AmountCaptured int64  `json:"amount_captured"`
	AmountRefunded int64  `json:"amount_refunded"`
}

// orderJSON is an order as the API answers it. Amount and Currency are
// null while the order is unregistered; Payments is absent in listings.
type orderJSON struct {
	OrderID    string              `json:"order_id"`
	Status     string              `json:"status"`
	Amount     *int64              `json:"amount"`
	Currency   *string             `json:"currency"`
	ExpiresAt  *time.Time          `json:"expires_at"`
	AmountPaid int64               `json:"amount_paid"`
	Version    int                 `json:"version"`
	CreatedAt  time.Time           `json:"created_at"`
	UpdatedAt  time.Time           `json:"updated_at"`
	Payments   *[]orderPaymentJSON `json:"payments,omitempty"`
	URL        string              `json:"url"`
}

func orderURL(id string) string { return APIBase + "/orders/" + url.PathEscape(id) }

func orderView(o store.Order, withPayments bool) orderJSON {
	j := orderJSON{OrderID: o.OrderID, Status: string(o.Status), AmountPaid: o.AmountPaid, Version: o.Version,
		CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt, URL: orderURL(o.OrderID)}
	if o.Registered {
		j.Amount, j.Currency = &o.Amount, &o.Currency
	}
	if !o.ExpiresAt.IsZero() {
		j.ExpiresAt = &o.ExpiresAt
	}
	if withPayments {
		ps := make([]orderPaymentJSON, len(o.Payments))
		for i, p := range o.Payments {
			ps[i] = orderPaymentJSON{Source: p.Source, TransactionID: p.TransactionID, Status: string(p.Status),
				AmountCaptured: p.AmountCaptured, AmountRefunded: p.AmountRefunded}
		}
		j.Payments = &ps
	}
	return j
}

// orderBody is the body of POST /admin/api/v1/orders.
type orderBody struct {
	OrderID   *string          `json:"order_id"`
	Amount    *json.RawMessage `json:"amount"`
	Currency  *string          `json:"currency"`
	ExpiresAt *string          `json:"expires_at"`
}

// orderRegistration reads and checks a registration body; its error is a
// 400 problem naming the field.
func orderRegistration(body io.Reader) (store.OrderRegistration, error) {
	var b orderBody
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(&b)
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		return store.OrderRegistration{}, payload.Malformed(typeErr.Field, typeErr.Field+" has the wrong type")
	case err != nil && strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return store.OrderRegistration{}, payload.Malformed(field,
			"unknown member "+strconv.Quote(field)+": want order_id, amount, currency, expires_at")
	case err != nil || dec.More():
		return store.OrderRegistration{}, payload.Malformed("",
			`the body must be a JSON object {"order_id", "amount", "currency", "expires_at"}`)
	}
	var r store.OrderRegistration
	missing := func(f string) error {
		return problem.New(http.StatusBadRequest, "malformed", "Malformed request", f, f+" is required")
	}
	if b.OrderID == nil {
		return r, missing("order_id")
	}
	if b.Amount == nil {
		return r, missing("amount")
	}
	if b.Currency == nil {
		return r, missing("currency")
	}
	r.OrderID, r.Currency = *b.OrderID, *b.Currency
	n, err := strconv.ParseInt(string(*b.Amount), 10, 64)
	if err != nil {
		return r, problem.New(http.StatusBadRequest, "malformed", "Malformed request", "amount",
			"amount must be an integer in the currency's minor unit")
	}
	r.Amount = n
	if b.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *b.ExpiresAt)
		if err != nil {
			return r, problem.New(http.StatusBadRequest, "malformed", "Malformed request", "expires_at",
				"expires_at must be an RFC 3339 time such as 2026-12-03T13:00:00Z, or null for never")
		}
		r.ExpiresAt = t
	}
	return r, r.Check()
}

// orderRegister answers POST /admin/api/v1/orders: 201 with the order
// registered, 200 with the order when the same expectation was registered
// before, 409 when another was, 400 naming the bad field (nothing is
// written).
func (a *Admin) orderRegister(w http.ResponseWriter, r *http.Request) {
	reg, err := orderRegistration(http.MaxBytesReader(w, r.Body, maxOrderBody))
	if err != nil {
		problem.Write(w, err)
		return
	}
	o, created, err := a.cfg.Orders.RegisterOrder(r.Context(), reg)
	if err != nil {
		a.storeError(w, r, "registering an order failed", "order", err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", orderURL(o.OrderID))
		a.log.InfoContext(r.Context(), "admin: order registered", "order_id", o.OrderID, "who", Identity(r.Context()))
	}
	writeJSON(w, status, orderView(o, false))
}

// orderGet answers GET /admin/api/v1/orders/{order_id}: the order's state
// and its payments.
func (a *Admin) orderGet(w http.ResponseWriter, r *http.Request) {
	o, err := a.cfg.Orders.GetOrder(r.Context(), r.PathValue("order_id"))
	if err != nil {
		a.storeError(w, r, "reading an order failed", "order", err)
		return
	}
	writeJSON(w, http.StatusOK, orderView(o, true))
}

// orderCursorJSON is what an orders listing's cursor holds.
type orderCursorJSON struct {
	CreatedAt time.Time `json:"c"`
	OrderID   string    `json:"o"`
}

// orderListJSON is the JSON of GET /admin/api/v1/orders.
type orderListJSON struct {
	Orders     []orderJSON `json:"orders"`
	NextCursor string      `json:"next_cursor,omitempty"`
	Next       string      `json:"next,omitempty"`
}

// orderListOf reads the listing's query.
func orderListOf(q url.Values, now time.Time) (store.OrderList, error) {
	l := store.OrderList{Limit: store.DefaultListLimit}
	if err := knownParams(q, "status", "since", "limit", "cursor"); err != nil {
		return l, err
	}
	if v := q.Get("status"); v != "" {
		if !slices.Contains(order.Statuses, order.Status(v)) {
			names := make([]string, len(order.Statuses))
			for i, s := range order.Statuses {
				names[i] = string(s)
			}
			return l, badParam("status", "status must be one of "+strings.Join(names, ", "))
		}
		l.Status = order.Status(v)
	}
	var err error
	if l.Since, err = sinceParam(q, now); err != nil {
		return l, err
	}
	if l.Limit, err = limitParam(q); err != nil {
		return l, err
	}
	if v := q.Get("cursor"); v != "" {
		var c orderCursorJSON
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err == nil {
			dec := json.NewDecoder(strings.NewReader(string(b)))
			dec.DisallowUnknownFields()
			err = dec.Decode(&c)
		}
		if err != nil || c.CreatedAt.IsZero() || c.OrderID == "" {
			return l, badParam("cursor", "cursor must be a next_cursor this listing returned")
		}
		l.After = &store.OrderCursor{CreatedAt: c.CreatedAt, OrderID: c.OrderID}
	}
	return l, nil
}

// nextOrders returns the cursor after a full page of os and the URL of
// the next page at path, q with that cursor; both "" on the last page.
func nextOrders(path string, q url.Values, l store.OrderList, os []store.Order) (cursor, next string) {
	if len(os) == 0 || len(os) < l.Limit {
		return "", ""
	}
	last := os[len(os)-1]
	b, _ := json.Marshal(orderCursorJSON{CreatedAt: last.CreatedAt.UTC(), OrderID: last.OrderID})
	cursor = base64.RawURLEncoding.EncodeToString(b)
	v := url.Values{}
	for k, vs := range q {
		v[k] = vs
	}
	v.Set("cursor", cursor)
	return cursor, path + "?" + v.Encode()
}

// orderList answers GET /admin/api/v1/orders?status=&since=&limit=&cursor=:
// the orders, newest first, a page at a time; "next_cursor" and "next"
// are absent on the last page.
func (a *Admin) orderList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	l, err := orderListOf(q, a.now())
	if err != nil {
		problem.Write(w, err)
		return
	}
	os, err := a.cfg.Orders.ListOrders(r.Context(), l)
	if err != nil {
		a.storeError(w, r, "listing orders failed", "order", err)
		return
	}
	out := orderListJSON{Orders: make([]orderJSON, len(os))}
	for i, o := range os {
		out.Orders[i] = orderView(o, false)
	}
	out.NextCursor, out.Next = nextOrders(APIBase+"/orders", q, l, os)
	writeJSON(w, http.StatusOK, out)
}

// The console's pages.

type orderListData struct {
	Form     url.Values
	Statuses []order.Status
	Orders   []store.Order
	Next     string
}

func (c *console) orderList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := orderListData{Form: q, Statuses: order.Statuses}
	page := consolePage{Title: "Orders", Nav: "orders", Data: &d}
	l, err := orderListOf(q, c.a.now())
	if err != nil {
		page.Error = problem.From(err).Detail + "."
		c.render(w, r, http.StatusBadRequest, "order-list", page)
		return
	}
	if d.Orders, err = c.a.cfg.Orders.ListOrders(r.Context(), l); err != nil {
		c.storeFailed(w, r, "orders", err)
		return
	}
	_, d.Next = nextOrders("/admin/orders", q, l, d.Orders)
	c.render(w, r, http.StatusOK, "order-list", page)
}

func (c *console) order(w http.ResponseWriter, r *http.Request) {
	o, err := c.a.cfg.Orders.GetOrder(r.Context(), r.PathValue("order_id"))
	if err != nil {
		c.storeFailed(w, r, "order", err)
		return
	}
	c.render(w, r, http.StatusOK, "order", consolePage{Title: "Order " + o.OrderID, Nav: "orders", Data: &o})
}
