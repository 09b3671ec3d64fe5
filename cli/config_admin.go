package cli

import (
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/source"
)

// AdminConfig is the admin listener (River UI, the console, the review
// queue) and who may use it, and whether the metrics listener serves pprof.
type AdminConfig struct {
	Addr  string // PAYLOCK_ADMIN_ADDR; "": no admin listener (PAYLOCK_ADMIN_ADDR=off)
	Token string // PAYLOCK_ADMIN_TOKEN; never printed; required off loopback
	// Tokens are PAYLOCK_ADMIN_TOKENS: further named admin tokens
	// (name:token,...; tokens never printed). A token's name is who
	// resolves a review item with it.
	Tokens []admin.Token
	Pprof  bool // PAYLOCK_PPROF: serve net/http/pprof on the metrics listener
	// Hosts are PAYLOCK_ADMIN_HOSTS: host names the admin listener answers
	// for besides loopback names and IP addresses.
	Hosts []string

	// listener, when set (tests), is used instead of listening on Addr.
	listener net.Listener
}

// minAdminToken is the shortest PAYLOCK_ADMIN_TOKEN accepted.
const minAdminToken = 16

func (c *AdminConfig) title() string { return "admin" }

func (c *AdminConfig) settings() []setting {
	return []setting{
		{env: "PAYLOCK_ADMIN_ADDR", flag: "admin-addr", def: "127.0.0.1:9091", usage: "admin listener address (River UI, review queue; off: none); off loopback it needs PAYLOCK_ADMIN_TOKEN",
			parse: listenAddr(&c.Addr, true)},
		{env: "PAYLOCK_ADMIN_TOKEN", flag: "admin-token", secret: true, usage: fmt.Sprintf("bearer token of the admin listener (at least %d characters; required unless the admin address is loopback)", minAdminToken),
			parse: func(v string) error {
				c.Token = v
				if v != "" && len(v) < minAdminToken {
					return fmt.Errorf("must be at least %d characters", minAdminToken)
				}
				return nil
			}},
		{env: "PAYLOCK_ADMIN_TOKENS", flag: "admin-tokens", secret: true, usage: fmt.Sprintf("further admin tokens, comma-separated name:token pairs (each token at least %d characters); the name is who resolves review items with it", minAdminToken),
			parse: func(v string) (err error) { c.Tokens, err = parseAdminTokens(v); return err }},
		{env: "PAYLOCK_ADMIN_HOSTS", flag: "admin-hosts", usage: "further host names the admin listener answers for, comma-separated (besides localhost and IP addresses; any other Host header is refused, against DNS rebinding)",
			parse: func(v string) error { c.Hosts = source.SplitList(v); return nil }},
		{env: "PAYLOCK_PPROF", flag: "pprof", def: "false", usage: "serve the net/http/pprof profiling endpoints",
			parse: boolean(&c.Pprof)},
	}
}

// validate refuses an admin listener reachable from other hosts without a
// token: it lists and acts on payments and jobs.
func (c *AdminConfig) validate() error {
	for _, t := range c.Tokens {
		if c.Token != "" && t.Name == admin.TokenName {
			return fmt.Errorf("invalid PAYLOCK_ADMIN_TOKENS: the name %q is PAYLOCK_ADMIN_TOKEN's", admin.TokenName)
		}
		if c.Token != "" && t.Token == c.Token {
			return fmt.Errorf("invalid PAYLOCK_ADMIN_TOKENS: the token named %q is PAYLOCK_ADMIN_TOKEN too", t.Name)
		}
	}
	if c.Addr == "" || c.Token != "" || len(c.Tokens) > 0 || isLoopback(c.Addr) {
		return nil
	}
	return fmt.Errorf("invalid PAYLOCK_ADMIN_ADDR=%q: not a loopback address, so PAYLOCK_ADMIN_TOKEN must be set (or PAYLOCK_ADMIN_ADDR=off)", c.Addr)
}

func (c *AdminConfig) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("admin_addr", c.Addr),
		slog.Bool("admin_token_set", c.Token != ""),
		slog.Any("admin_token_names", adminTokenNames(c.Tokens)),
		slog.Any("admin_hosts", c.Hosts),
		slog.Bool("pprof", c.Pprof),
	}
}

// adminTokenName is what an admin token's name may look like.
var adminTokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$`)

// parseAdminTokens reads PAYLOCK_ADMIN_TOKENS: name:token pairs separated
// by commas. Its errors name the pair by position and name, never a token.
func parseAdminTokens(v string) ([]admin.Token, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []admin.Token
	names, tokens := map[string]bool{}, map[string]bool{}
	for i, pair := range strings.Split(v, ",") {
		name, token, ok := strings.Cut(strings.TrimSpace(pair), ":")
		switch {
		case !ok || !adminTokenName.MatchString(name):
			return nil, fmt.Errorf("pair %d is not name:token with a name of letters, digits, _ . @ - (at most 64)", i+1)
		case len(token) < minAdminToken:
			return nil, fmt.Errorf("the token of %q must be at least %d characters", name, minAdminToken)
		case names[name]:
			return nil, fmt.Errorf("the name %q is given twice", name)
		case tokens[token]:
			return nil, fmt.Errorf("the token of %q is another name's too", name)
		}
		names[name], tokens[token] = true, true
		out = append(out, admin.Token{Name: name, Token: token})
	}
	return out, nil
}

// adminTokenNames lists the names of tokens, never the tokens.
func adminTokenNames(tokens []admin.Token) []string {
	names := make([]string, len(tokens))
	for i, t := range tokens {
		names[i] = t.Name
	}
	return names
}

// isLoopback reports whether a host:port listens on loopback only: localhost
// or a loopback IP. An empty host (":9091") is every interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
