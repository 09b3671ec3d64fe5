package handler

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// disbursementView is the JSON of GET /disbursements/{loan_id}/{tranche}.
type disbursementView struct {
	LoanID         string     `json:"loan_id"`
	Tranche        int        `json:"tranche"`
	Amount         int64      `json:"amount"`
	Currency       string     `json:"currency"`
	Status         string     `json:"status"`
	IdempotencyKey string     `json:"idempotency_key"`
	ProviderRef    string     `json:"provider_ref,omitempty"`
	Attempts       int        `json:"attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at,omitempty"` // pending rows only
	FirstAttemptAt *time.Time `json:"first_attempt_at,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	ReviewReason   string     `json:"review_reason,omitempty"`
	EventID        string     `json:"event_id"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	StatusSince    time.Time  `json:"status_since"`
}

func viewOf(d store.Disbursement) disbursementView {
	v := disbursementView{
		LoanID: d.LoanID, Tranche: d.Tranche, Amount: d.Amount, Currency: d.Currency, Status: string(d.Status),
		IdempotencyKey: d.IdempotencyKey, ProviderRef: d.ProviderRef, Attempts: d.Attempts,
		LastError: d.LastError, ReviewReason: d.ReviewReason, EventID: d.EventID,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt, StatusSince: d.StatusSince,
	}
	if d.Status == store.StatusPending {
		v.NextAttemptAt = &d.NextAttemptAt
	}
	if !d.FirstAttemptAt.IsZero() {
		v.FirstAttemptAt = &d.FirstAttemptAt
	}
	return v
}

// AdminConfig configures the admin listener (PAYLOCK_ADMIN_ADDR): reads
// and tools for operators, never served on the public webhook listener.
type AdminConfig struct {
	// Token is what every request must carry: the header
	// Authorization: Bearer <token> (compared in constant time), or, from a
	// browser, the session cookie that GET/POST /admin/login sets once the
	// token is typed in (see ServeHTTP). Empty serves without
	// authentication (and without a login page): paylock allows that only
	// on a loopback address.
	Token string
	// Tokens are further named tokens (PAYLOCK_ADMIN_TOKENS), accepted
	// like Token, whose name is "admin". The name of the token a request
	// was let in with (bearer or session) is its identity: AdminIdentity.
	Tokens []AdminToken
	// SessionTTL is how long a browser session from /admin/login lasts;
	// zero means DefaultAdminSessionTTL.
	SessionTTL time.Duration
	// Disbursements serves GET /disbursements/{loan_id}/{tranche}; nil
	// leaves it out.
	Disbursements Disbursements
	// Review serves the review queue: GET /admin/review,
	// GET /admin/review/{id} and POST /admin/review/{id}/resolve; nil
	// leaves them out.
	Review ReviewStore
	// Mounts are further handlers, by ServeMux pattern (River UI under
	// "/admin/river/"), behind the same token.
	Mounts map[string]http.Handler
	// Console serves the admin console's pages under /admin/ (see
	// console.go); nil leaves them out.
	Console ConsoleStore
	// ForwardURLs is each payment source's forward URL, where the
	// console's replay sends a payment whose forward job River no longer
	// holds.
	ForwardURLs map[string]string
	Logger      *slog.Logger // default slog.Default()
}

// AdminToken is a named admin token.
type AdminToken struct {
	Name  string
	Token string
}

// AdminTokenName is the identity of AdminConfig.Token.
const AdminTokenName = "admin"

// AdminAnonymous is the identity of requests to an admin listener without
// tokens (a loopback address only).
const AdminAnonymous = "anonymous"

type adminIdentityKey struct{}

// AdminIdentity returns the name of the token the admin request was let in
// with (AdminTokenName for AdminConfig.Token, a PAYLOCK_ADMIN_TOKENS name,
// or AdminAnonymous without tokens), set by Admin's authentication for
// every route it serves, mounts included. It is "" outside one.
func AdminIdentity(ctx context.Context) string {
	name, _ := ctx.Value(adminIdentityKey{}).(string)
	return name
}

// Admin serves the admin listener's routes behind cfg.Token.
type Admin struct {
	cfg    AdminConfig
	tokens []namedToken
	mux    *http.ServeMux
	log    *slog.Logger
	// origin refuses cross-origin unsafe requests made with the session
	// cookie (see sameOrigin).
	origin *http.CrossOriginProtection
	now    func() time.Time
	// console serves /admin/ when AdminConfig.Console is set.
	console *console
}

// NewAdmin returns the admin listener's handler.
func NewAdmin(cfg AdminConfig) *Admin {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultAdminSessionTTL
	}
	a := &Admin{cfg: cfg, mux: http.NewServeMux(), log: cfg.Logger,
		origin: http.NewCrossOriginProtection(), now: time.Now}
	if cfg.Token != "" {
		a.tokens = append(a.tokens, namedToken{AdminTokenName, []byte(cfg.Token)})
	}
	for _, t := range cfg.Tokens {
		if t.Token != "" {
			a.tokens = append(a.tokens, namedToken{t.Name, []byte(t.Token)})
		}
	}
	if cfg.Review != nil {
		a.mountReview()
	}
	if cfg.Disbursements != nil {
		a.mux.HandleFunc("GET /disbursements/{loan_id}/{tranche}", a.disbursement)
		a.mux.HandleFunc("/disbursements/{loan_id}/{tranche}", problem.MethodNotAllowed(http.MethodGet))
	}
	if cfg.Console != nil {
		a.mountConsole(cfg.Console, cfg.ForwardURLs)
	}
	for pattern, h := range cfg.Mounts {
		a.mux.Handle(pattern, h)
	}
	a.mux.HandleFunc("/", problem.NotFound)
	return a
}

// ServeHTTP answers 401 to any request without the token, whatever its
// path, before routing it; only /admin/login and /admin/logout are served
// without it. A request is let through with the bearer header, or with a
// valid session cookie from /admin/login; with the cookie, an unsafe
// method (POST, PUT, PATCH, DELETE...) must also come from this origin
// (see sameOrigin), else 403.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case adminLoginPath:
		a.login(w, r)
		return
	case adminLogoutPath:
		a.logout(w, r)
		return
	}
	who := AdminAnonymous
	if len(a.tokens) > 0 {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		var found bool
		if ok {
			who, found = a.tokenName([]byte(got))
		} else {
			who, found = a.validSession(r)
		}
		switch {
		case ok && found:
		case !ok && found:
			if err := a.sameOrigin(r); err != nil {
				a.log.WarnContext(r.Context(), "admin: cross-origin request with the session cookie refused",
					"method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"),
					"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
				problem.Write(w, err)
				return
			}
		default:
			a.unauthorized(w, r)
			return
		}
	}
	a.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), adminIdentityKey{}, who)))
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

// disbursement answers GET /disbursements/{loan_id}/{tranche} with the row,
// for operators and the lending platform's reconciliation.
func (a *Admin) disbursement(w http.ResponseWriter, r *http.Request) {
	loanID := r.PathValue("loan_id")
	tranche, err := strconv.ParseInt(r.PathValue("tranche"), 10, 64)
	if err != nil || tranche < 1 || tranche > math.MaxInt32 {
		problem.Write(w, problem.New(http.StatusBadRequest, "malformed", "Malformed request", "tranche",
			"tranche must be an integer from 1 to 2147483647"))
		return
	}
	d, err := a.cfg.Disbursements.Disbursement(r.Context(), loanID, int(tranche))
	if err != nil {
		p := problem.Write(w, err)
		if p.Status >= 500 || !errors.Is(err, store.ErrNotFound) {
			a.log.ErrorContext(r.Context(), "reading a disbursement failed", "loan_id", loanID, "tranche", tranche, "error", err)
		}
		return
	}
	writeJSON(w, http.StatusOK, viewOf(d))
}
