package admin

import (
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/paylock/paylock/problem"
)

// The admin listener's routes, all registered here (see docs/admin-api.md,
// kept true by TestAdminAPIDocumentsEveryRoute):
//
//   - the JSON API under APIBase: every answer JSON, every error an RFC
//     9457 problem (problem.Write);
//   - the console's pages under /admin/ (ConsolePath and its siblings
//     /admin/deliveries, /admin/review, /admin/disbursements), HTML to a
//     browser (Accept: text/html). Any other request to them, a tool
//     with the bearer header and no Accept or Accept: */* included, gets
//     the JSON API's answer;
//   - the paths of earlier releases, answering for one more release: the
//     old pages (/admin/ with the search's query, /admin/delivery-log,
//     /admin/review-queue) redirect 308 to the new ones; the old JSON
//     paths (/admin/deliveries, /admin/review, /admin/payments/{source}/
//     {transaction_id} asked for JSON, /disbursements/{loan_id}/{tranche})
//     still answer, with Deprecation: true and a Link to their successor
//     under APIBase (rel="successor-version").

// APIBase is the prefix of the admin JSON API.
const APIBase = "/admin/api/v1"

// ConsolePath is the console's first page: the payments.
const ConsolePath = "/admin/payments"

// handle registers pattern ("METHOD /path") and records it for Routes.
func (a *Admin) handle(pattern string, h http.HandlerFunc) {
	a.mux.HandleFunc(pattern, h)
	a.routes = append(a.routes, pattern)
}

// Routes returns the "METHOD /path" patterns a serves (login and logout
// included, Config.Mounts not), sorted: the route table
// docs/admin-api.md documents.
func (a *Admin) Routes() []string {
	r := append(slices.Clone(a.routes), "GET "+loginPath, "POST "+loginPath, "POST "+logoutPath)
	slices.Sort(r)
	return r
}

// wantsHTML reports whether r is a browser's: its Accept prefers
// text/html to JSON. No Accept, */*, or JSON first is not.
func wantsHTML(r *http.Request) bool {
	best, bestQ := "", -1.0
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		switch mt {
		case "text/html", "application/json", "application/problem+json":
			if q > bestQ {
				best, bestQ = mt, q
			}
		}
	}
	return best == "text/html" && bestQ > 0
}

// negotiate serves html to a browser, else json.
func negotiate(html, json http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if wantsHTML(r) {
			html(w, r)
			return
		}
		json(w, r)
	}
}

// deprecated serves h on an old JSON path: with Deprecation: true and a
// Link to the same request under its successor, old's prefix replaced by
// successor's.
func deprecated(old, successor string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		next := successor + strings.TrimPrefix(r.URL.EscapedPath(), old)
		if r.URL.RawQuery != "" {
			next += "?" + r.URL.RawQuery
		}
		w.Header().Set("Deprecation", "true")
		w.Header().Set("Link", "<"+next+`>; rel="successor-version"`)
		h(w, r)
	}
}

// moved redirects 308 (method and body kept) from an old page's path to
// its new one, old's prefix replaced by successor's, the query kept.
func moved(old, successor string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		next := successor + strings.TrimPrefix(r.URL.EscapedPath(), old)
		if r.URL.RawQuery != "" {
			next += "?" + r.URL.RawQuery
		}
		w.Header().Set("Deprecation", "true")
		http.Redirect(w, r, next, http.StatusPermanentRedirect)
	}
}

// isForm reports whether r's body is an HTML form's.
func isForm(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "application/x-www-form-urlencoded" || mt == "multipart/form-data"
}

// mount registers every route the Config asks for.
func (a *Admin) mount() {
	if a.cfg.Payments != nil || a.console != nil {
		a.mountPayments()
	}
	if a.cfg.Deliveries != nil {
		a.mountDeliveries()
	}
	if a.cfg.Review != nil {
		a.mountReview()
	}
	if a.cfg.Disbursements != nil {
		a.mountDisbursements()
	}
	if a.cfg.ForwardDestinations != nil {
		a.mountDestinations()
	}
	if a.cfg.Orders != nil {
		a.mountOrders()
	}
	a.mountMethodNotAllowed()
}

func (a *Admin) mountPayments() {
	c, api := a.console, APIBase
	if a.cfg.Payments != nil {
		a.handle("GET "+api+"/payments", a.paymentList)
		a.handle("GET "+api+"/payments/{source}/{transaction_id}", a.paymentJSON)
		if a.cfg.Sync != nil {
			a.handle("POST "+api+"/payments/{source}/{transaction_id}/sync", a.paymentSync)
			a.handle("POST "+api+"/payments/{source}/confirm", a.paymentConfirm)
		}
	}
	old := deprecated("/admin/payments", api+"/payments", a.paymentJSON)
	switch {
	case c != nil && a.cfg.Payments != nil:
		a.handle("GET "+ConsolePath, negotiate(c.search, a.paymentList))
		a.handle("GET /admin/payments/{source}/{transaction_id}", negotiate(c.payment, old))
	case c != nil:
		a.handle("GET "+ConsolePath, c.search)
		a.handle("GET /admin/payments/{source}/{transaction_id}", c.payment)
	default:
		a.handle("GET /admin/payments/{source}/{transaction_id}", old)
	}
	if c != nil {
		a.handle("POST "+api+"/payments/{source}/{transaction_id}/replay", c.replayJSON)
		a.handle("POST /admin/payments/{source}/{transaction_id}/replay", c.csrf(c.replay))
		a.handle("GET "+consoleCSSPath, c.css)
		a.handle("GET /admin/{$}", moved("/admin/", ConsolePath))
	}
}

func (a *Admin) mountDeliveries() {
	c, api := a.console, APIBase
	a.handle("GET "+api+"/deliveries", a.deliveryList)
	a.handle("GET "+api+"/deliveries/{id}", a.delivery)
	if a.cfg.ReplayDelivery != nil {
		a.handle("POST "+api+"/deliveries/{id}/replay", a.deliveryReplay)
	}
	old := func(h http.HandlerFunc) http.HandlerFunc {
		return deprecated("/admin/deliveries", api+"/deliveries", h)
	}
	if c == nil {
		a.handle("GET /admin/deliveries", old(a.deliveryList))
		a.handle("GET /admin/deliveries/{id}", old(a.delivery))
		return
	}
	a.handle("GET /admin/deliveries", negotiate(c.deliveryList, old(a.deliveryList)))
	a.handle("GET /admin/deliveries/{id}", negotiate(c.delivery, old(a.delivery)))
	a.handle("GET /admin/delivery-log", moved("/admin/delivery-log", "/admin/deliveries"))
	a.handle("GET /admin/delivery-log/{id}", moved("/admin/delivery-log", "/admin/deliveries"))
}

func (a *Admin) mountReview() {
	c, api := a.console, APIBase
	a.handle("GET "+api+"/review", a.reviewList)
	a.handle("GET "+api+"/review/{id}", a.reviewItem)
	a.handle("POST "+api+"/review/{id}/resolve", a.reviewResolve)
	old := func(h http.HandlerFunc) http.HandlerFunc { return deprecated("/admin/review", api+"/review", h) }
	if c == nil {
		a.handle("GET /admin/review", old(a.reviewList))
		a.handle("GET /admin/review/{id}", old(a.reviewItem))
		a.handle("POST /admin/review/{id}/resolve", old(a.reviewResolve))
		return
	}
	a.handle("GET /admin/review", negotiate(c.reviewList, old(a.reviewList)))
	a.handle("GET /admin/review/{id}", negotiate(c.reviewItem, old(a.reviewItem)))
	form := c.csrf(c.reviewResolve)
	a.handle("POST /admin/review/{id}/resolve", func(w http.ResponseWriter, r *http.Request) {
		if isForm(r) {
			form(w, r)
			return
		}
		old(a.reviewResolve)(w, r)
	})
	a.handle("GET /admin/review-queue", moved("/admin/review-queue", "/admin/review"))
	a.handle("GET /admin/review-queue/{id}", moved("/admin/review-queue", "/admin/review"))
	a.handle("POST /admin/review-queue/{id}/resolve", moved("/admin/review-queue", "/admin/review"))
}

func (a *Admin) mountDisbursements() {
	c, api := a.console, APIBase
	a.handle("GET "+api+"/disbursements", a.disbursementList)
	a.handle("GET "+api+"/disbursements/{loan_id}/{tranche}", a.disbursement)
	a.handle("GET /disbursements/{loan_id}/{tranche}", deprecated("/disbursements", api+"/disbursements", a.disbursement))
	if c != nil {
		a.handle("GET /admin/disbursements", negotiate(c.disbursementList, a.disbursementList))
		a.handle("GET /admin/disbursements/{loan_id}/{tranche}", negotiate(c.disbursement, a.disbursement))
	}
}

func (a *Admin) mountOrders() {
	api := APIBase
	a.handle("POST "+api+"/orders", a.orderRegister)
	a.handle("GET "+api+"/orders", a.orderList)
	a.handle("GET "+api+"/orders/{order_id}", a.orderGet)
	if c := a.console; c != nil {
		a.handle("GET /admin/orders", negotiate(c.orderList, a.orderList))
		a.handle("GET /admin/orders/{order_id}", negotiate(c.order, a.orderGet))
	}
}

// mountMethodNotAllowed answers any other method on a known path: 405
// problem+json naming the allowed ones (the ServeMux would send "/"'s
// 404).
func (a *Admin) mountMethodNotAllowed() {
	allowed := map[string][]string{}
	var paths []string
	for _, p := range a.routes {
		method, path, _ := strings.Cut(p, " ")
		if _, ok := allowed[path]; !ok {
			paths = append(paths, path)
		}
		allowed[path] = append(allowed[path], method)
	}
	for _, path := range paths {
		if path == APIBase+"/payments/{source}/confirm" {
			// A method-less pattern here would overlap GET
			// .../payments/{source}/{transaction_id} with neither more
			// specific (ServeMux panics); another method on it gets that
			// path's 405.
			continue
		}
		a.mux.HandleFunc(path, problem.MethodNotAllowed(strings.Join(allowed[path], ", ")))
	}
}
