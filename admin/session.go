package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/problem"
)

// Browser sessions on the admin listener.
//
// A browser cannot send Authorization: Bearer when it navigates to a page
// (River UI loads its scripts and calls its JSON API from the page), so the
// admin listener also accepts a session cookie, set by POST /admin/login
// after the operator types PAYLOCK_ADMIN_TOKEN into a form:
//
//   - The cookie holds no token: its value is "v1.<expiry>.<mac>", mac =
//     HMAC-SHA256 keyed by the token over a fixed label and the expiry
//     (Unix seconds). Nothing is stored server-side; changing the token
//     ends every session, and a session ends at its expiry (SessionTTL).
//   - It is HttpOnly (page scripts cannot read it), SameSite=Strict (the
//     browser sends it on no request started by another site), Path=/,
//     and Secure when the listener serves TLS.
//   - CSRF: besides SameSite=Strict, a request authenticated by the cookie
//     with an unsafe method (POST, PUT, PATCH, DELETE: River UI's retry,
//     cancel, delete, pause) must come from this origin: Sec-Fetch-Site
//     same-origin or none, else an Origin matching the Host
//     (net/http.CrossOriginProtection), and a request carrying neither
//     header is refused too (every browser sends one of them on such
//     requests; tools use the bearer header). POST /admin/login is checked
//     the same way, against login CSRF. Refusals answer 403.
//   - The bearer header keeps working for tools, and is never subject to the
//     origin check: a page on another site cannot set it without CORS,
//     which the admin listener does not grant.

const (
	// DefaultSessionTTL is Config.SessionTTL's default.
	DefaultSessionTTL = 12 * time.Hour

	loginPath  = "/admin/login"
	logoutPath = "/admin/logout"
	// SessionCookie is the name of the admin session cookie.
	SessionCookie = "paylock_admin_session"
	defaultNext   = "/admin/river/"
	sessionLabel  = "paylock admin session v1\x00"
	maxLoginBody  = 4 << 10
)

// sessionValue returns the cookie value of a session ending at expiry,
// keyed by the token the operator logged in with.
func (a *Admin) sessionValue(token []byte, expiry time.Time) string {
	exp := strconv.FormatInt(expiry.Unix(), 10)
	return "v1." + exp + "." + sessionMAC(token, exp)
}

func sessionMAC(token []byte, exp string) string {
	m := hmac.New(sha256.New, token)
	m.Write([]byte(sessionLabel))
	m.Write([]byte(exp))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// validSession reports whether r carries an unexpired session cookie made
// with one of the current tokens and not ended by logout, and that token's
// name (the session's identity: the MAC says which token it was keyed by).
func (a *Admin) validSession(r *http.Request) (string, bool) {
	name, _, ok := a.session(r)
	return name, ok
}

// session returns the name and expiry of r's valid session (see
// validSession), and its cookie value.
func (a *Admin) session(r *http.Request) (name string, expiry time.Time, ok bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || a.revoked.revoked(c.Value) {
		return "", time.Time{}, false
	}
	rest, ok := strings.CutPrefix(c.Value, "v1.")
	if !ok {
		return "", time.Time{}, false
	}
	exp, mac, ok := strings.Cut(rest, ".")
	if !ok {
		return "", time.Time{}, false
	}
	secs, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !a.now().Before(time.Unix(secs, 0)) {
		return "", time.Time{}, false
	}
	for _, t := range a.tokens {
		if hmac.Equal([]byte(mac), []byte(sessionMAC(t.token, exp))) {
			return t.name, time.Unix(secs, 0), true
		}
	}
	return "", time.Time{}, false
}

// sameOrigin returns problem.ErrAdminCrossOrigin when r uses an unsafe method and
// does not come from a page of this origin (see the comment at the top).
func (a *Admin) sameOrigin(r *http.Request) error {
	if safeMethod(r.Method) {
		return nil
	}
	if a.origin.Check(r) != nil {
		return problem.ErrAdminCrossOrigin
	}
	if r.Header.Get("Sec-Fetch-Site") == "" && r.Header.Get("Origin") == "" {
		return problem.ErrAdminCrossOrigin
	}
	return nil
}

// unauthorized answers 401: problem+json, or to a browser's page load a
// short page that links to the login form.
func (a *Admin) unauthorized(w http.ResponseWriter, r *http.Request) {
	if len(a.tokens) == 0 || r.Method != http.MethodGet || !strings.Contains(r.Header.Get("Accept"), "text/html") {
		problem.Write(w, problem.ErrAdminToken)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="paylock admin"`)
	a.page(w, http.StatusUnauthorized, loginPage{Next: localPath(r.URL.RequestURI()), Error: "Log in with the admin token to see this page."})
}

// login serves GET /admin/login (the form) and POST /admin/login (checks
// the token, sets the session cookie, redirects to next).
func (a *Admin) login(w http.ResponseWriter, r *http.Request) {
	if len(a.tokens) == 0 {
		// No token, no sessions: the listener is open (loopback only).
		http.Redirect(w, r, localPath(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		a.page(w, http.StatusOK, loginPage{Next: localPath(r.URL.Query().Get("next"))})
	case http.MethodPost:
		if err := a.sameOrigin(r); err != nil {
			problem.Write(w, err)
			return
		}
		if a.throttled(w, r) {
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
		if err := r.ParseForm(); err != nil {
			problem.Write(w, problem.New(http.StatusBadRequest, "malformed", "Malformed request", "", "the login form could not be read"))
			return
		}
		next := localPath(r.PostForm.Get("next"))
		name, found := a.tokenName([]byte(r.PostForm.Get("token")))
		if !found {
			a.refused(r, "login")
			a.page(w, http.StatusUnauthorized, loginPage{Next: next, Error: "Wrong token."})
			return
		}
		expiry := a.now().Add(a.cfg.SessionTTL)
		http.SetCookie(w, &http.Cookie{
			Name: SessionCookie, Value: a.sessionValue([]byte(r.PostForm.Get("token")), expiry), Path: "/",
			Expires: expiry, MaxAge: int(a.cfg.SessionTTL / time.Second),
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
		a.log.InfoContext(r.Context(), "admin: browser session started", "remote", r.RemoteAddr, "who", name, "expires", expiry)
		http.Redirect(w, r, next, http.StatusSeeOther)
	default:
		problem.MethodNotAllowed("GET, POST")(w, r)
	}
}

// logout serves POST /admin/logout: it ends this browser's session on the
// server (the cookie's value is refused from then on, on this process) and
// clears the cookie. Other sessions end at their expiry, or all at once
// when the token changes.
func (a *Admin) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		problem.MethodNotAllowed(http.MethodPost)(w, r)
		return
	}
	if err := a.sameOrigin(r); err != nil {
		problem.Write(w, err)
		return
	}
	if name, expiry, ok := a.session(r); ok {
		c, _ := r.Cookie(SessionCookie)
		a.revoked.revoke(c.Value, expiry, a.now())
		a.log.InfoContext(r.Context(), "admin: browser session ended", "remote", r.RemoteAddr, "who", name)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, loginPath, http.StatusSeeOther)
}

// localPath returns next when it is a path on this listener, else the
// default page: the login form never redirects to another site.
func localPath(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return defaultNext
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Path == loginPath || u.Path == logoutPath {
		return defaultNext
	}
	return next
}

type loginPage struct {
	Next  string
	Error string
}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>paylock admin: log in</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 26rem; margin: 4rem auto; padding: 0 1rem; color: #1f2937; }
label { display: block; margin-top: 1rem; }
input[type=password] { font: inherit; width: 100%; box-sizing: border-box; padding: .5rem; margin: .4rem 0 1rem; }
button { font: inherit; padding: .5rem 1.2rem; }
.error { color: #b91c1c; }
</style>
</head>
<body>
<h1>paylock admin</h1>
{{if .Error}}<p class="error" role="alert">{{.Error}}</p>{{end}}
<form method="post" action="/admin/login">
<label for="token">Admin token (PAYLOCK_ADMIN_TOKEN)</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<input type="hidden" name="next" value="{{.Next}}">
<button type="submit">Log in</button>
</form>
</body>
</html>
`))

// page writes the login page with status.
func (a *Admin) page(w http.ResponseWriter, status int, p loginPage) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(status)
	if err := loginTemplate.Execute(w, p); err != nil {
		a.log.Error("admin: writing the login page failed", "error", err)
	}
}
