package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/forward"
)

// Config is paylock's configuration by concern. Each concern's struct sits
// in a file of its own (config_*.go) with its settings table (environment
// variable, flag, default, usage) and the checks of its settings together.
// loadConfig fills it from the environment, then from flags, and checks
// every concern, then what settings of several concerns say together. It
// prints (fmt, slog, JSON) without a password, a token or a secret.
type Config struct {
	Database  DatabaseConfig
	Lock      LockConfig // Redis included
	Server    ServerConfig
	Sources   SourcesConfig
	Admin     AdminConfig
	Forward   ForwardConfig
	Reconcile ReconcileConfig
	Orders    OrdersConfig
	Payout    PayoutConfig
	Log       LogConfig
	// DeliveryLog is the delivery log (config_deliveries.go).
	DeliveryLog DeliveryLogConfig
	// Telemetry is tracing, from the OTEL_* variables (config_telemetry.go).
	Telemetry TelemetryConfig

	// getenv is the environment loadConfig read: the sources loader reads
	// each file source's secrets_env variable from it.
	getenv func(string) string
}

// concern is one part of the configuration.
type concern interface {
	// title names the concern in "paylock serve -h".
	title() string
	// settings are its variables, in the order they are read and listed.
	settings() []setting
	// validate checks its settings together, once all are parsed.
	validate() error
	// logAttrs are what LogValue shows of it.
	logAttrs() []slog.Attr
}

// concerns are c's parts, in the order they are read, checked and shown.
func (c *Config) concerns() []concern {
	return []concern{&c.Database, &c.Lock, &c.Server, &c.Sources, &c.Admin, &c.Forward, &c.Reconcile, &c.Orders, &c.Payout, &c.Log, &c.DeliveryLog, &c.Telemetry}
}

// setting is one configuration variable: its environment name, its flag,
// its default and how to parse it into its concern.
type setting struct {
	env, flag, def, usage string
	// secret settings are never echoed in an error or a log.
	secret bool
	parse  func(v string) error
}

// settings are every concern's settings, in order.
func (c *Config) settings() []setting {
	var out []setting
	for _, k := range c.concerns() {
		out = append(out, k.settings()...)
	}
	return out
}

// invalid is the one-line error of a bad value v of s: it names the
// variable and shows the value, unless it is a secret (then never) or a
// URL (then without its password).
func (s setting) invalid(v string, err error) error {
	if s.secret {
		return fmt.Errorf("invalid %s: %v", s.env, err)
	}
	return fmt.Errorf("invalid %s%s: %v", s.env, shown(s.env, v), err)
}

// shown is how a setting's value may appear in an error: redacted for
// URLs.
func shown(env, v string) string {
	switch {
	case env == "PAYLOCK_FORWARD_URL":
		return "=" + strconv.Quote(forward.Redact(v)) // its query may hold a token too
	case strings.HasSuffix(env, "_URL"):
		return "=" + strconv.Quote(redactURL(v))
	default:
		return "=" + strconv.Quote(v)
	}
}

// isSecret reports whether the variable env is a secret setting.
func isSecret(env string) bool {
	for _, s := range (&Config{}).settings() {
		if s.env == env {
			return s.secret
		}
	}
	return false
}

// isSetting reports whether name is one of paylock's own variables.
func isSetting(name string) bool {
	for _, s := range (&Config{}).settings() {
		if s.env == name {
			return true
		}
	}
	return false
}

// loadConfig fills a Config from getenv, then from flags in args (each
// setting's flag overrides its variable), and checks it. A bad value is an
// error naming the variable or flag; -h is flag.ErrHelp. It returns the
// arguments left after the flags.
func loadConfig(name string, args []string, getenv func(string) string) (Config, []string, error) {
	c := Config{getenv: getenv}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// The flag package's own error quotes the value it could not parse:
	// a flag's error is made here instead, as the variable's is.
	var flagErr error
	for _, s := range c.settings() {
		v := getenv(s.env)
		if v == "" {
			v = s.def
		}
		if err := s.parse(v); err != nil {
			return c, nil, s.invalid(v, err)
		}
		fs.Func(s.flag, s.usage+" (env "+s.env+")", func(v string) error {
			err := s.parse(v)
			if err != nil && flagErr == nil {
				flagErr = fmt.Errorf("--%s: %w", s.flag, s.invalid(v, err))
			}
			return err
		})
	}
	if err := fs.Parse(args); err != nil {
		if flagErr != nil {
			return c, nil, flagErr
		}
		return c, nil, err
	}
	if err := c.Telemetry.load(getenv); err != nil {
		return c, nil, err
	}
	if err := c.validate(); err != nil {
		return c, nil, err
	}
	return c, fs.Args(), nil
}

// validate checks each concern, then what settings of several concerns
// say together.
func (c *Config) validate() error {
	for _, k := range c.concerns() {
		if err := k.validate(); err != nil {
			return err
		}
	}
	if c.Lock.Wait >= c.Server.RequestTimeout {
		return fmt.Errorf("invalid PAYLOCK_LOCK_WAIT=%s: must be below PAYLOCK_REQUEST_TIMEOUT (%s)", c.Lock.Wait, c.Server.RequestTimeout)
	}
	return nil
}

// printFlags lists every setting, by concern, for "paylock <cmd> -h".
func printFlags(w io.Writer, cmd string) {
	fmt.Fprintf(w, "Usage: paylock %s [flags]\n\nFlags (each overrides its environment variable):\n", cmd)
	for _, k := range (&Config{}).concerns() {
		fmt.Fprintf(w, "\n%s:\n", k.title())
		if len(k.settings()) == 0 {
			for _, v := range otelVariables {
				def := v.def
				if def == "" {
					def = `""`
				}
				fmt.Fprintf(w, "  %-53s %s (default %s)\n", v.name, v.usage, def)
			}
		}
		for _, s := range k.settings() {
			def := s.def
			if def == "" {
				def = `""`
			}
			fmt.Fprintf(w, "  --%-22s %-28s %s (default %s)\n", s.flag, s.env, s.usage, def)
		}
	}
}

// LogValue shows every concern's settings, without credentials: URLs
// without their passwords, secrets and tokens as counts or names.
func (c Config) LogValue() slog.Value {
	var attrs []slog.Attr
	for _, k := range c.concerns() {
		attrs = append(attrs, k.logAttrs()...)
	}
	return slog.GroupValue(attrs...)
}

// String and Format print the config as LogValue does, so that no verb of
// fmt (%v, %+v, %#v, %s) can print a password, a token or a secret.
func (c Config) String() string { return c.LogValue().String() }

// Format implements fmt.Formatter with String for every verb.
func (c Config) Format(f fmt.State, _ rune) { io.WriteString(f, c.String()) }

// MarshalJSON writes what LogValue shows.
func (c Config) MarshalJSON() ([]byte, error) { return groupJSON(c.LogValue()) }

// groupJSON writes a group slog.Value as a JSON object.
func groupJSON(v slog.Value) ([]byte, error) {
	m := map[string]any{}
	for _, a := range v.Resolve().Group() {
		m[a.Key] = a.Value.Resolve().Any()
	}
	return json.Marshal(m)
}

var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('[^']*'|\S+)`)

// redactURL hides the password of a database or Redis URL, whether it is in
// the userinfo (user:pass@host), in a password query parameter, or in a
// key=value DSN (password=...).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" && u.User == nil {
		// Not a URL Go can parse: a key=value DSN, or a broken URL whose
		// userinfo must still be hidden.
		if scheme, rest, ok := strings.Cut(s, "://"); ok {
			if at := strings.LastIndex(rest, "@"); at >= 0 {
				user, _, _ := strings.Cut(rest[:at], ":")
				s = scheme + "://" + user + ":xxxxx" + rest[at:]
			}
		}
		return dsnPassword.ReplaceAllString(s, "${1}xxxxx")
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		switch {
		case err != nil:
			u.RawQuery = "xxxxx" // a password among pairs Go cannot read
		case q.Has("password"):
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}

// The parsers the settings tables share.

func nonEmpty(v string) error {
	if v == "" {
		return errors.New("must not be empty")
	}
	return nil
}

// durationAtLeast parses a duration (parseDuration: Go's, or days) of at
// least least into dst.
func durationAtLeast(dst *time.Duration, least time.Duration) func(string) error {
	return func(v string) error {
		d, err := parseDuration(v)
		if err != nil {
			return err
		}
		if d < least {
			return fmt.Errorf("must be at least %s", least)
		}
		*dst = d
		return nil
	}
}

// boolean parses strconv.ParseBool's values into dst.
func boolean(dst *bool) func(string) error {
	return func(v string) (err error) { *dst, err = strconv.ParseBool(v); return err }
}

// text stores any value in dst.
func text(dst *string) func(string) error {
	return func(v string) error { *dst = v; return nil }
}

// positive parses a positive integer into dst.
func positive(dst *int) func(string) error {
	return func(v string) (err error) { *dst, err = positiveInt(v); return err }
}

func positiveInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, errors.New("want a positive integer")
	}
	return n, nil
}

// listenAddr parses a listener's host:port into dst; with off, "off" is
// "" (no listener).
func listenAddr(dst *string, off bool) func(string) error {
	return func(v string) error {
		*dst = v
		if off && v == "off" {
			*dst = ""
			return nil
		}
		_, _, err := net.SplitHostPort(v)
		return err
	}
}

// checkHTTPURL accepts "" (none) or an http(s) URL with a host.
func checkHTTPURL(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http:// or https:// URL")
	}
	return nil
}

// parseAge reads an age or a window: a duration (parseDuration: "90m",
// "2d", "1d12h"), not negative.
func parseAge(v string) (time.Duration, error) { return parseNonNegative(v) }
