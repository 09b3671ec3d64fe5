package admin

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/paylock/paylock/problem"
)

// What the admin listener checks before routing, whether or not it has a
// token (see ServeHTTP):
//
//   - Host: a loopback name (localhost, *.localhost), an IP literal, or one
//     of Config.Hosts (PAYLOCK_ADMIN_HOSTS); anything else is refused 403
//     admin-host. A web page that rebinds its own name to the listener's
//     address (DNS rebinding) sends its own name as Host, never one of
//     those.
//   - Origin: an unsafe method (POST, PUT, PATCH, DELETE) from a browser
//     must come from this origin (net/http.CrossOriginProtection), so that
//     no page of another site can act through an operator's browser, with
//     or without a token (River UI's job deletes included).
//   - Framing: every answer forbids framing (X-Frame-Options: DENY and
//     Content-Security-Policy: frame-ancestors 'none').
//   - Guessing: wrong tokens (bearer or login form) are counted per client
//     address; past loginBurst, further attempts answer 429 with
//     Retry-After, right token or not, until the budget refills (one per
//     loginRefill). Refused attempts are logged at a bounded rate.

const (
	loginBurst  = 20
	loginRefill = 3 * time.Second
	// maxClients bounds the clients the throttle tracks; beyond it, the
	// clients whose budget refilled are forgotten, and while all are
	// still throttled, new clients share one budget.
	maxClients = 10000
)

// allowedHost reports whether host (a request's Host, port included or not)
// names this listener for a browser: see the comment at the top.
func (a *Admin) allowedHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	switch {
	case host == "", host == "localhost", strings.HasSuffix(host, ".localhost"):
		return true
	case net.ParseIP(host) != nil:
		return true
	}
	for _, h := range a.cfg.Hosts {
		if strings.EqualFold(host, h) {
			return true
		}
	}
	return false
}

// frameDenied sets the headers that forbid framing the answer; the pages
// that set a fuller Content-Security-Policy keep frame-ancestors 'none'.
func frameDenied(h http.Header) {
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "frame-ancestors 'none'")
}

// throttle counts wrong admin tokens per client.
type throttle struct {
	mu      sync.Mutex
	clients map[string]*budget
	shared  budget // new clients' budget while the map is full
}

type budget struct {
	tokens float64
	at     time.Time
}

// refill brings b up to now.
func (b *budget) refill(now time.Time) {
	if b.at.IsZero() {
		b.tokens, b.at = loginBurst, now
		return
	}
	b.tokens = min(loginBurst, b.tokens+float64(now.Sub(b.at))/float64(loginRefill))
	b.at = now
}

// of returns client's budget, refilled up to now.
func (t *throttle) of(client string, now time.Time) *budget {
	if t.clients == nil {
		t.clients = make(map[string]*budget)
	}
	b, ok := t.clients[client]
	if !ok {
		if len(t.clients) >= maxClients {
			for c, o := range t.clients {
				if o.refill(now); o.tokens >= loginBurst {
					delete(t.clients, c)
				}
			}
		}
		if len(t.clients) >= maxClients {
			b = &t.shared
		} else {
			b = &budget{}
			t.clients[client] = b
		}
	}
	b.refill(now)
	return b
}

// wait returns how long client must wait before its next attempt; zero:
// it may try now.
func (t *throttle) wait(client string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.of(client, now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(loginRefill))
}

// failed counts a wrong token from client.
func (t *throttle) failed(client string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.of(client, now)
	b.tokens = max(0, b.tokens-1)
}

// clientOf is the address r came from, without its port: the throttle's
// key.
func clientOf(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// throttled answers 429 with Retry-After when r's client guessed too many
// tokens, and reports whether it did.
func (a *Admin) throttled(w http.ResponseWriter, r *http.Request) bool {
	d := a.guesses.wait(clientOf(r), a.now())
	if d <= 0 {
		return false
	}
	p := problem.New(http.StatusTooManyRequests, "admin-throttled", "Too many attempts", "",
		"too many wrong admin tokens from this address; retry later")
	p.RetryAfter = max(d, time.Second)
	problem.Write(w, p)
	return true
}

// refused counts a wrong token from r's client and logs it, at a bounded
// rate (the count of lines held back rides on the next one).
func (a *Admin) refused(r *http.Request, how string) {
	a.guesses.failed(clientOf(r), a.now())
	if ok, held := a.refusals.Allow(how); ok {
		a.log.WarnContext(r.Context(), "admin: wrong token refused", "how", how, "remote", r.RemoteAddr,
			"refusals_not_logged", held)
	}
}

// revocations are the sessions ended by logout before their expiry: a
// cookie value is refused from then on. Only a valid session can be
// revoked, and each entry goes at the session's own expiry, so the set
// holds at most the sessions operators ended.
type revocations struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (v *revocations) revoke(value string, expiry, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.until == nil {
		v.until = make(map[string]time.Time)
	}
	for k, exp := range v.until {
		if !now.Before(exp) {
			delete(v.until, k)
		}
	}
	v.until[value] = expiry
}

func (v *revocations) revoked(value string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.until[value]
	return ok
}
