package admin

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// The admin console: server-rendered pages under /admin/ on the admin
// listener (html/template, one embedded stylesheet, no JavaScript), behind
// the same token or session cookie as the rest of the listener. Each page
// is HTML to a browser only; anyone else gets the API's JSON (routes.go).
//
//   - GET /admin/payments searches payments by transaction id, event id, or source
//     and time range (store.PaymentSearch), newest first, at most
//     store.MaxSearchLimit a page.
//   - GET /admin/payments/{source}/{transaction_id} shows one payment: its
//     stored body (pretty-printed, escaped), event id, received_at and its
//     forward jobs, each linked to River UI.
//   - POST /admin/payments/{source}/{transaction_id}/replay forwards the
//     payment again with its webhook-id (store.Outbox.ReplayForwards);
//     POST /admin/api/v1/payments/{source}/{transaction_id}/replay does
//     the same for a tool, answering JSON.
//   - GET /admin/disbursements and /admin/disbursements/{loan_id}/{tranche}
//     list and show the loan disbursements (disbursement.go).
//   - GET /admin/destinations shows the forward destinations, their
//     state, backlog and lag; a parked one has a Resume button
//     (destinations.go).
//
// Every POST is refused (403) unless it carries the form field "csrf":
// HMAC-SHA256, keyed by the admin tokens, of a label and the session cookie's
// value (see csrfToken), on top of the listener's same-origin check. A
// request with the bearer header needs neither (a page on another site
// cannot set it).

// ConsoleStore is what the console reads and does: *store.Payments
// (SearchPayments, Payment) and *store.Outbox (PaymentForwards,
// ReplayForwards) together.
type ConsoleStore interface {
	SearchPayments(ctx context.Context, q store.PaymentSearch) ([]store.Payment, error)
	Payment(ctx context.Context, source, transactionID string) (store.Payment, error)
	PaymentForwards(ctx context.Context, source, transactionID string) ([]store.ForwardJob, error)
	ReplayForwards(ctx context.Context, f store.ReplayFilter) (store.ReplayResult, error)
}

//go:embed console/*.tmpl console/console.css
var consoleFS embed.FS

var consoleTemplates = template.Must(template.New("console").Funcs(template.FuncMap{
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"pathEscape": url.PathEscape,
	"money":      money,
}).ParseFS(consoleFS, "console/*.tmpl"))

const (
	consolePrefix   = "/admin/"
	consoleCSSPath  = "/admin/console.css"
	consoleCSRFName = "csrf"
	csrfLabel       = "paylock admin csrf v1\x00"
	maxConsoleForm  = 8 << 10
)

// console holds what the console's handlers share.
type console struct {
	a        *Admin
	st       ConsoleStore
	forwards map[string]string // forward destination by source
	dests    map[string]string // destination URL by name, redacted
	csrfKey  []byte            // see mountConsole
}

func (a *Admin) newConsole(st ConsoleStore, forwards, dests map[string]string) {
	// The CSRF key is derived from every admin token (changing one ends
	// every form, as it ends every session), or random on a listener
	// without tokens.
	c := &console{a: a, st: st, forwards: forwards, dests: dests}
	if len(a.tokens) == 0 {
		c.csrfKey = make([]byte, 32)
		rand.Read(c.csrfKey)
	} else {
		h := sha256.New()
		h.Write([]byte(csrfLabel))
		for _, t := range a.tokens {
			h.Write([]byte(t.name + "\x00"))
			h.Write(t.token)
			h.Write([]byte{0})
		}
		c.csrfKey = h.Sum(nil)
	}
	a.console = c
}

// csrfToken is the form token of r's session: HMAC-SHA256, keyed by a key
// derived from the admin tokens, over a label and the session cookie's
// value ("" without a cookie), so it changes with every login and is
// worthless without the cookie it was made for.
func (c *console) csrfToken(r *http.Request) string {
	key := c.csrfKey
	sess := ""
	if ck, err := r.Cookie(SessionCookie); err == nil {
		sess = ck.Value
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(csrfLabel))
	m.Write([]byte(sess))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrf wraps a POST handler: the form is read (bounded) and must carry
// csrfToken, unless the request came with the bearer header (ServeHTTP
// has already checked it); the origin is checked again, also on a
// listener without a token.
func (c *console) csrf(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxConsoleForm)
		if err := r.ParseForm(); err != nil {
			c.fail(w, r, http.StatusBadRequest, "The form could not be read.")
			return
		}
		if len(c.a.tokens) > 0 && strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			next(w, r)
			return
		}
		if c.a.sameOrigin(r) != nil || !hmac.Equal([]byte(r.PostForm.Get(consoleCSRFName)), []byte(c.csrfToken(r))) {
			c.a.log.WarnContext(r.Context(), "admin console: POST without a valid CSRF token refused",
				"path", r.URL.Path, "remote", r.RemoteAddr)
			c.fail(w, r, http.StatusForbidden, "This form has expired or did not come from this console: reload the page and try again.")
			return
		}
		next(w, r)
	}
}

func (c *console) css(w http.ResponseWriter, r *http.Request) {
	b, _ := consoleFS.ReadFile("console/console.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "private, max-age=300")
	w.Write(b)
}

// consolePage is what every page's layout reads.
type consolePage struct {
	Title  string
	Nav    string // the current section: "payments", "review", "deliveries", "disbursements", "orders", "destinations"
	CSRF   string
	Review bool // the review queue is available
	// Deliveries: the delivery log is available (set by render).
	Deliveries bool
	// Disbursements: the disbursements are available (set by render).
	Disbursements bool
	// Orders: the orders are available (set by render).
	Orders bool
	// Destinations: the forward destinations are available (set by
	// render).
	Destinations bool
	Error        string
	Notice       string
	Data         any
}

func (c *console) render(w http.ResponseWriter, r *http.Request, status int, name string, p consolePage) {
	p.CSRF = c.csrfToken(r)
	p.Deliveries = c.a.cfg.Deliveries != nil
	p.Disbursements = c.a.cfg.Disbursements != nil
	p.Orders = c.a.cfg.Orders != nil
	p.Destinations = c.a.cfg.ForwardDestinations != nil
	p.Review = p.Review || c.a.cfg.Review != nil
	var buf bytes.Buffer
	if err := consoleTemplates.ExecuteTemplate(&buf, name, p); err != nil {
		c.a.log.ErrorContext(r.Context(), "admin console: rendering failed", "page", name, "error", err)
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func (c *console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", consolePage{Title: http.StatusText(status), Error: msg, Review: c.a.cfg.Review != nil})
}

// storeFailed answers a store error: 404 for ErrNotFound, 503 for a
// transient failure, else 500 (logged).
func (c *console) storeFailed(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.fail(w, r, http.StatusNotFound, "No such "+what+".")
	case errors.Is(err, store.ErrUnavailable):
		c.a.log.WarnContext(r.Context(), "admin console: store unavailable", "what", what, "error", err)
		c.fail(w, r, http.StatusServiceUnavailable, "The database is unavailable; try again shortly.")
	default:
		c.a.log.ErrorContext(r.Context(), "admin console: store failed", "what", what, "error", err)
		c.fail(w, r, http.StatusInternalServerError, "Reading "+what+" failed; see the logs.")
	}
}

// searchForm is the search page's form, as typed.
type searchForm struct {
	TransactionID, EventID, Source, Since, Until, Limit string
}

type searchData struct {
	Form     searchForm
	Payments []store.Payment
	Limit    int
	Searched bool
}

// parseConsoleTime reads a time from the form: RFC 3339, the browser's
// datetime-local (2006-01-02T15:04, taken as UTC), or a duration ago.
func parseConsoleTime(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, errors.New("invalid time")
}

func (c *console) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := searchForm{TransactionID: strings.TrimSpace(q.Get("transaction_id")), EventID: strings.TrimSpace(q.Get("event_id")),
		Source: strings.TrimSpace(q.Get("source")), Since: q.Get("since"), Until: q.Get("until"), Limit: q.Get("limit")}
	d := searchData{Form: f, Limit: store.DefaultSearchLimit, Searched: r.URL.RawQuery != ""}
	page := consolePage{Title: "Payments", Nav: "payments", Review: c.a.cfg.Review != nil, Data: &d}
	ps := store.PaymentSearch{TransactionID: f.TransactionID, EventID: f.EventID, Source: f.Source}
	var err error
	now := c.a.now()
	if ps.Since, err = parseConsoleTime(f.Since, now); err != nil {
		page.Error = "From: want an RFC 3339 time, a date and time, or a duration ago such as 24h."
	} else if ps.Until, err = parseConsoleTime(f.Until, now); err != nil {
		page.Error = "To: want an RFC 3339 time, a date and time, or a duration ago such as 24h."
	}
	if f.Limit != "" {
		n, err := strconv.Atoi(f.Limit)
		if err != nil || n < 1 {
			page.Error = "Page size: want a positive number."
		} else {
			d.Limit = min(n, store.MaxSearchLimit)
		}
	}
	if page.Error != "" {
		c.render(w, r, http.StatusBadRequest, "search", page)
		return
	}
	ps.Limit = d.Limit
	if d.Payments, err = c.st.SearchPayments(r.Context(), ps); err != nil {
		c.storeFailed(w, r, "payments", err)
		return
	}
	c.render(w, r, http.StatusOK, "search", page)
}

type paymentData struct {
	Payment      store.Payment
	Body         string
	WebhookID    string
	Jobs         []store.ForwardJob
	Destinations map[string]string // URL by destination name, redacted
	CanReplay    bool
	// Lifecycle is the payment's state and its events as a timeline; nil
	// without Config.Payments.
	Lifecycle *paymentView
}

func (c *console) payment(w http.ResponseWriter, r *http.Request) {
	source, txID := r.PathValue("source"), r.PathValue("transaction_id")
	p, err := c.st.Payment(r.Context(), source, txID)
	if err != nil {
		c.storeFailed(w, r, "payment", err)
		return
	}
	jobs, err := c.st.PaymentForwards(r.Context(), p.Source, p.TransactionID)
	if err != nil {
		c.storeFailed(w, r, "forward jobs", err)
		return
	}
	d := paymentData{Payment: p, WebhookID: store.PaymentForwardID(p.Source, p.TransactionID), Jobs: jobs,
		Destinations: c.dests, CanReplay: len(jobs) > 0 || c.forwards[p.Source] != ""}
	if c.a.cfg.Payments != nil {
		ps, err := c.a.cfg.Payments.PaymentState(r.Context(), p.Source, p.TransactionID)
		if err != nil {
			c.storeFailed(w, r, "payment lifecycle", err)
			return
		}
		v := paymentViewOf(ps)
		d.Lifecycle = &v
		if err := c.lifecycleJobs(r, &d, ps); err != nil {
			c.storeFailed(w, r, "forward jobs", err)
			return
		}
	}
	shown := p.Payload
	if c.a.cfg.Verified != nil {
		shown = c.a.cfg.Verified(p.Source, shown)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, shown, "", "  ") == nil {
		d.Body = pretty.String()
	} else {
		d.Body = string(shown)
	}
	page := consolePage{Title: "Payment " + p.TransactionID, Nav: "payments", Review: c.a.cfg.Review != nil, Data: &d}
	switch r.URL.Query().Get("replay") {
	case "retried":
		page.Notice = "Forward replayed: its job runs again with the same webhook-id."
	case "inserted":
		page.Notice = "Forward replayed: a new job sends it with the same webhook-id."
	case "pending":
		page.Notice = "Its forward job is still waiting or running: it was left as it is."
	}
	c.render(w, r, http.StatusOK, "payment", page)
}

// replayForwards forwards the payment of r's path again
// (store.Outbox.ReplayForwards): its forward jobs run again, or a new one
// is inserted where River holds none.
func (c *console) replayForwards(r *http.Request) (store.Payment, store.ReplayResult, error) {
	p, err := c.st.Payment(r.Context(), r.PathValue("source"), r.PathValue("transaction_id"))
	if err != nil {
		return p, store.ReplayResult{}, err
	}
	res, err := c.st.ReplayForwards(r.Context(), store.ReplayFilter{Source: p.Source, TransactionID: p.TransactionID, Destination: c.forwards[p.Source]})
	if err == nil {
		c.a.log.InfoContext(r.Context(), "admin: forward replayed", "source", p.Source, "transaction_id", p.TransactionID,
			"retried", res.Retried, "inserted", res.Inserted, "pending", res.Pending, "who", Identity(r.Context()))
	}
	return p, res, err
}

// replayJSON answers POST /admin/api/v1/payments/{source}/{transaction_id}/replay
// with how many forward jobs were retried, inserted, or left pending;
// 409 when the payment's source forwards nothing.
func (c *console) replayJSON(w http.ResponseWriter, r *http.Request) {
	p, res, err := c.replayForwards(r)
	switch {
	case errors.Is(err, store.ErrForward):
		problem.Write(w, problem.New(http.StatusConflict, "no-forward", "Nothing to forward", "",
			"source "+p.Source+" forwards nothing: no forward destination is configured"))
	case errors.Is(err, store.ErrNotFound):
		problem.Write(w, problem.New(http.StatusNotFound, "not-found", "Not found", "", "no such payment"))
	case err != nil:
		c.a.storeError(w, r, "replaying a forward failed", "payment", err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"source": p.Source, "transaction_id": p.TransactionID,
			"retried": res.Retried, "inserted": res.Inserted, "pending": res.Pending})
	}
}

func (c *console) replay(w http.ResponseWriter, r *http.Request) {
	p, res, err := c.replayForwards(r)
	if errors.Is(err, store.ErrForward) {
		c.fail(w, r, http.StatusConflict, "Source "+p.Source+" forwards nothing: no forward destination is configured.")
		return
	}
	if err != nil {
		c.storeFailed(w, r, "the replay", err)
		return
	}
	outcome := "pending"
	switch {
	case res.Retried > 0:
		outcome = "retried"
	case res.Inserted > 0:
		outcome = "inserted"
	}
	http.Redirect(w, r, paymentPath(p.Source, p.TransactionID)+"?replay="+outcome, http.StatusSeeOther)
}

func paymentPath(source, txID string) string {
	return "/admin/payments/" + url.PathEscape(source) + "/" + url.PathEscape(txID)
}

// eventForwards is implemented by a ConsoleStore that can list the forward
// jobs of a payment's lifecycle changes (*store.Outbox).
type eventForwards interface {
	EventForwards(ctx context.Context, source string, eventIDs []string) ([]store.ForwardJob, error)
}

// lifecycleJobs adds the forward jobs of ps's lifecycle changes to d's
// jobs, newest first, when the store can list them.
func (c *console) lifecycleJobs(r *http.Request, d *paymentData, ps store.PaymentState) error {
	ef, ok := c.st.(eventForwards)
	if !ok || len(ps.Events) == 0 {
		return nil
	}
	ids := make([]string, len(ps.Events))
	for i, e := range ps.Events {
		ids[i] = e.EventID
	}
	jobs, err := ef.EventForwards(r.Context(), ps.Source, ids)
	if err != nil {
		return err
	}
	d.Jobs = append(d.Jobs, jobs...)
	slices.SortFunc(d.Jobs, func(a, b store.ForwardJob) int { return cmp.Compare(b.ID, a.ID) })
	return nil
}
