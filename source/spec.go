package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

// SchemeNone is the scheme of a source without signatures: it needs
// PAYLOCK_ALLOW_UNSIGNED=true.
const SchemeNone signature.Scheme = "none"

// sourceName is what a source may be called: its path segment in
// /webhooks/<name> and its metrics label.
var sourceName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// reservedNames would make a route, a metrics label or a log line mean two
// things: they name paylock's other routes and listeners.
var reservedNames = map[string]bool{"admin": true, "debug": true, "disbursements": true,
	"healthz": true, "readyz": true, "metrics": true}

// envName is what secrets_env may hold: an environment variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Spec is one validated source. Secrets are the raw entries of the
// SecretsEnv variable (trimmed, empty entries dropped), already checked to
// parse for Scheme; nil when the source runs unsigned. A Spec prints
// (fmt, slog) without its secrets.
type Spec struct {
	Name       string            // the path segment: POST /webhooks/<Name>
	Adapter    string            // a registered provider's name, or one of Options.OwnAdapters (loans, payouts)
	Scheme     signature.Scheme  // one of the adapter's schemes, or SchemeNone
	SecretsEnv string            // the variable the secrets come from; "" for SchemeNone
	Secrets    Secrets           // never printed; a []string for the signature package (strings.Join(s.Secrets, ","))
	Settings   provider.Settings // the provider's own keys from the file (events, fields, ...), as raw JSON
	ForwardURL string            // this source's forward target; "": PAYLOCK_FORWARD_URL, if any
	// ForwardTo names the destinations (the file's destinations, or
	// default: PAYLOCK_FORWARD_URL) this source's messages go to; nil:
	// ForwardURL's, or default.
	ForwardTo []string
	// OrderPointer is the file's orders.pointer: where this source's
	// payments name their order; "" takes the adapter's default
	// (provider.OrderNamer).
	OrderPointer string
	Builtin      bool // payments, loans or payouts (possibly overridden by the file)
}

// Unsigned reports whether the source's deliveries are not verified.
func (s Spec) Unsigned() bool { return s.Scheme == SchemeNone || len(s.Secrets) == 0 }

// LogValue shows everything but the secrets, which it counts.
func (s Spec) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("name", s.Name),
		slog.String("adapter", s.Adapter),
		slog.String("signature", string(s.Scheme)),
		slog.String("secrets_env", s.SecretsEnv),
		slog.Int("secrets", len(s.Secrets)),
		slog.Bool("builtin", s.Builtin),
	}
	for _, k := range s.Settings.Keys() {
		var v any
		if err := json.Unmarshal(s.Settings[k], &v); err == nil {
			attrs = append(attrs, slog.Any(k, v))
		}
	}
	if s.ForwardURL != "" {
		attrs = append(attrs, slog.String("forward_url", forward.Redact(s.ForwardURL)))
	}
	if s.OrderPointer != "" {
		attrs = append(attrs, slog.String("orders_pointer", s.OrderPointer))
	}
	return slog.GroupValue(attrs...)
}

// String prints the source as LogValue does.
func (s Spec) String() string { return s.LogValue().String() }

// Format implements fmt.Formatter with String for every verb, so that no
// verb can print the secrets.
func (s Spec) Format(f fmt.State, _ rune) { io.WriteString(f, s.String()) }

// MarshalJSON writes what LogValue shows.
func (s Spec) MarshalJSON() ([]byte, error) { return groupJSON(s.LogValue()) }

// Secrets are a source's raw secrets. They print, in every format, as
// their count only.
type Secrets []string

func (s Secrets) String() string               { return fmt.Sprintf("[%d secrets redacted]", len(s)) }
func (s Secrets) Format(f fmt.State, _ rune)   { io.WriteString(f, s.String()) }
func (s Secrets) LogValue() slog.Value         { return slog.StringValue(s.String()) }
func (s Secrets) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
func (s Secrets) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// ErrUnsigned is wrapped by the error of a served source without
// secrets (or with signature none) when PAYLOCK_ALLOW_UNSIGNED is not true.
var ErrUnsigned = errors.New("refusing unsigned deliveries (PAYLOCK_ALLOW_UNSIGNED=true allows them, for local development only)")

// Error is a bad source configuration: one line naming the file, the
// source and the field that are wrong, whichever apply.
type Error struct {
	File   string // PAYLOCK_SOURCES_FILE; "" when the source is configured by the environment alone
	Source string // the source's name; "" when the file as a whole is wrong
	Field  string // the key (fields.amount for a mapped field); "" when the source as a whole is wrong
	Err    error
}

// Error writes the file, the source and the field, whichever are set,
// then what is wrong, on one line.
func (e *Error) Error() string {
	var parts []string
	if e.File != "" {
		parts = append(parts, "PAYLOCK_SOURCES_FILE "+e.File)
	}
	if e.Source != "" {
		parts = append(parts, "source "+strconv.Quote(e.Source))
	}
	if f := e.Field; f != "" {
		// A key as the file spelled it: quoted when it holds a space or a
		// control character (a YAML key may hold a line break).
		if strings.ContainsFunc(f, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
			f = strconv.Quote(f)
		}
		parts = append(parts, f)
	}
	// One line, whatever the wrapped error (YAML's can span several).
	return strings.Join(append(parts, strings.Join(strings.Fields(e.Err.Error()), " ")), ": ")
}

// Unwrap returns what is wrong, for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

// groupJSON writes a group slog.Value as a JSON object.
func groupJSON(v slog.Value) ([]byte, error) {
	m := map[string]any{}
	for _, a := range v.Resolve().Group() {
		m[a.Key] = a.Value.Resolve().Any()
	}
	return json.Marshal(m)
}
