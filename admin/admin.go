package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/ratelog"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// Config configures the admin listener (PAYLOCK_ADMIN_ADDR): reads
// and tools for operators, never served on the public webhook listener.
type Config struct {
	// Token is what every request must carry: the header
	// Authorization: Bearer <token> (compared in constant time), or, from a
	// browser, the session cookie that GET/POST /admin/login sets once the
	// token is typed in (see ServeHTTP). Empty serves without
	// authentication (and without a login page): paylock allows that only
	// on a loopback address.
	Token string
	// Tokens are further named tokens (PAYLOCK_ADMIN_TOKENS), accepted
	// like Token, whose name is "admin". The name of the token a request
	// was let in with (bearer or session) is its identity: Identity.
	Tokens []Token
	// SessionTTL is how long a browser session from /admin/login lasts;
	// zero means DefaultSessionTTL.
	SessionTTL time.Duration
	// Disbursements serves the disbursements under APIBase (and the
	// deprecated GET /disbursements/{loan_id}/{tranche}), and with the
	// console their pages; nil leaves them out.
	Disbursements Disbursements
	// Review serves the review queue under APIBase (list, item, resolve),
	// and with the console its pages under /admin/review; nil leaves them
	// out.
	Review ReviewStore
	// Mounts are further handlers, by ServeMux pattern (River UI under
	// "/admin/river/": see RiverUI), behind the same token.
	Mounts map[string]http.Handler
	// Console serves the admin console's pages under /admin/ (see
	// console.go); nil leaves them out.
	Console ConsoleStore
	// Payments serves the payments under APIBase: the listing and search
	// (GET /admin/api/v1/payments) and one payment's lifecycle state and
	// events (see payment.go); with the console, the payment page shows
	// the events as a timeline. Nil leaves them out.
	Payments PaymentStates
	// Sync, when set with Payments, serves
	// POST /admin/api/v1/payments/{source}/{transaction_id}/sync and
	// POST /admin/api/v1/payments/{source}/confirm (see sync.go).
	Sync PaymentSync
	// Orders serves the orders under APIBase: registration, one order's
	// state and payments, the listing (see api_orders.go), and with the
	// console their pages; nil leaves them out.
	Orders Orders
	// PaymentOrders, when set with Sync, adds to a sync's or a confirm's
	// answer the order its payment names, derived at once (see sync.go);
	// nil (orders off) leaves it out.
	PaymentOrders PaymentOrders
	// Deliveries serves the delivery log under APIBase, and with the
	// console its pages (see deliveries.go); nil leaves them out.
	Deliveries DeliveryLog
	// ReplayDelivery, when set with Deliveries, serves
	// POST /admin/api/v1/deliveries/{id}/replay: it runs a kept delivery
	// through the webhook pipeline again and notes the result on it.
	ReplayDelivery func(ctx context.Context, d store.Delivery) (DeliveryReplay, error)
	// Verified, when set, returns a source's stored payload as the
	// console shows it: without the provider's signature material
	// (provider.SignatureBearer: Adyen's additionalData.hmacSignature), as
	// a forward carries it. Nil shows payloads as stored.
	Verified func(source string, payload []byte) []byte
	// Forwards is each payment source's forward destination, by name,
	// where the console's replay sends a payment whose forward job River
	// no longer holds.
	Forwards map[string]string
	// ForwardDestinations serves the forward destinations under APIBase
	// (their state, backlog, lag; resume), and with the console their page
	// (see destinations.go); nil leaves them out.
	ForwardDestinations DestinationView
	// Destinations are the forward destinations by name: the console shows
	// a job's destination with its URL, credentials hidden (forward.Redact).
	Destinations forward.Destinations
	// Hosts are the names, besides loopback names and IP literals, that
	// requests may give as Host (PAYLOCK_ADMIN_HOSTS): any other Host is
	// refused 403 before routing, against DNS rebinding.
	Hosts  []string
	Logger *slog.Logger // default slog.Default()
}

// Token is a named admin token.
type Token struct {
	Name  string
	Token string
}

// TokenName is the identity of Config.Token.
const TokenName = "admin"

// Anonymous is the identity of requests to an admin listener without
// tokens (a loopback address only).
const Anonymous = "anonymous"

type identityKey struct{}

// Identity returns the name of the token the admin request was let in
// with (TokenName for Config.Token, a PAYLOCK_ADMIN_TOKENS name,
// or Anonymous without tokens), set by Admin's authentication for
// every route it serves, mounts included. It is "" outside one.
func Identity(ctx context.Context) string {
	name, _ := ctx.Value(identityKey{}).(string)
	return name
}

// Admin serves the admin listener's routes behind cfg.Token.
type Admin struct {
	cfg    Config
	tokens []namedToken
	mux    *http.ServeMux
	log    *slog.Logger
	// origin refuses cross-origin unsafe requests made with the session
	// cookie (see sameOrigin).
	origin *http.CrossOriginProtection
	now    func() time.Time
	// console serves /admin/ when Config.Console is set.
	console *console
	// routes are the patterns registered (see Routes).
	routes []string
	// guesses throttles wrong tokens per client; refusals bounds the log
	// lines they write; revoked are the sessions ended by logout.
	guesses  throttle
	refusals *ratelog.Limiter
	revoked  revocations
}

// New returns the admin listener's handler.
func New(cfg Config) *Admin {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	a := &Admin{cfg: cfg, mux: http.NewServeMux(), log: cfg.Logger,
		origin: http.NewCrossOriginProtection(), now: time.Now, refusals: ratelog.New(time.Second, 5)}
	if cfg.Token != "" {
		a.tokens = append(a.tokens, namedToken{TokenName, []byte(cfg.Token)})
	}
	for _, t := range cfg.Tokens {
		if t.Token != "" {
			a.tokens = append(a.tokens, namedToken{t.Name, []byte(t.Token)})
		}
	}
	if cfg.Console != nil {
		a.newConsole(cfg.Console, cfg.Forwards, cfg.Destinations.Redacted())
	}
	a.mount()
	for pattern, h := range cfg.Mounts {
		a.mux.Handle(pattern, h)
	}
	a.mux.HandleFunc("/", problem.NotFound)
	return a
}

// ServeHTTP checks every request before routing it, whatever its path
// (see guard.go): the Host, the origin of an unsafe method, and framing.
// Then, with tokens, it answers 401 to any request without one; only
// /admin/login and /admin/logout are served without it. A request is let
// through with the bearer header, or with a valid session cookie from
// /admin/login; with the cookie, an unsafe method (POST, PUT, PATCH,
// DELETE...) must also come from this origin (see sameOrigin), else 403.
// A client that sent too many wrong tokens is answered 429.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	frameDenied(w.Header())
	if !a.allowedHost(r.Host) {
		if ok, held := a.refusals.Allow("host"); ok {
			a.log.WarnContext(r.Context(), "admin: request for another host refused (PAYLOCK_ADMIN_HOSTS)",
				"host", r.Host, "remote", r.RemoteAddr, "refusals_not_logged", held)
		}
		problem.Write(w, problem.ErrAdminHost)
		return
	}
	if !safeMethod(r.Method) && a.origin.Check(r) != nil {
		problem.Write(w, problem.ErrAdminCrossOrigin)
		return
	}
	switch r.URL.Path {
	case loginPath:
		a.login(w, r)
		return
	case logoutPath:
		a.logout(w, r)
		return
	}
	who, ok := a.authenticate(w, r)
	if !ok {
		return
	}
	a.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, who)))
}

// authenticate returns who r was let in as, or answers it (401, 403 or
// 429) and reports false.
func (a *Admin) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	if len(a.tokens) == 0 {
		return Anonymous, true
	}
	got, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if bearer {
		if a.throttled(w, r) {
			return "", false
		}
		if who, found := a.tokenName([]byte(got)); found {
			return who, true
		}
		a.refused(r, "bearer")
		a.unauthorized(w, r)
		return "", false
	}
	who, found := a.validSession(r)
	if !found {
		a.unauthorized(w, r)
		return "", false
	}
	if err := a.sameOrigin(r); err != nil {
		a.log.WarnContext(r.Context(), "admin: cross-origin request with the session cookie refused",
			"method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"),
			"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		problem.Write(w, err)
		return "", false
	}
	return who, true
}

// safeMethod reports whether m changes nothing (GET, HEAD, OPTIONS).
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// namedToken is an accepted admin token and its name.
type namedToken struct {
	name  string
	token []byte
}

// tokenName returns the name of the token got is, comparing it with every
// token in constant time.
func (a *Admin) tokenName(got []byte) (string, bool) {
	name, found := "", false
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(got, t.token) == 1 && !found {
			name, found = t.name, true
		}
	}
	return name, found
}

// writeJSON answers v as JSON with status, never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
