package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/paylock/paylock/signature"
)

// A source is one endpoint, POST /webhooks/<name>, with its own adapter
// (how a body becomes payments), signature scheme and secrets. paylock has
// three built-in sources (payments, loans, payouts) configured by
// environment variables; PAYLOCK_SOURCES_FILE adds sources and overrides
// built-in ones. loadSources turns both into a validated []sourceSpec; the
// secrets themselves are only ever read from the environment.

// The adapters a source may name. loans and payouts belong to the built-in
// sources of those names.
const (
	adapterPaylock = "paylock" // paylock's flat {"transaction_id","amount","currency"}
	adapterStripe  = "stripe"  // a Stripe Event
	adapterAdyen   = "adyen"   // an Adyen notification batch
	adapterMapped  = "mapped"  // any JSON body, through JSON pointers (fields)
	adapterLoans   = "loans"   // loan approvals (the built-in loans source)
	adapterPayouts = "payouts" // payout provider status (the built-in payouts source)
)

// The schemes a source may name besides signature.SchemeStandard and
// signature.SchemeStripe.
const (
	schemeAdyen                  = signature.SchemeAdyen // Adyen's HMAC in additionalData.hmacSignature
	schemeNone  signature.Scheme = "none"                // no signature: needs PAYLOCK_ALLOW_UNSIGNED=true
)

// The Stripe event types the stripe adapter can read a payment from, and
// its default.
var (
	stripeEvents        = []string{"payment_intent.succeeded", "charge.succeeded"}
	defaultStripeEvents = []string{"payment_intent.succeeded"}
)

// mappedFields are the fields a mapped source's pointers may fill; the
// required ones must be present.
var (
	mappedFields   = []string{"transaction_id", "amount", "currency", "event_id"}
	requiredMapped = []string{"transaction_id", "amount", "currency"}
)

// sourceName is what a source may be called: its path segment in
// /webhooks/<name> and its metrics label.
var sourceName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// reservedNames would make a route, a metrics label or a log line mean two
// things: they name paylock's other routes and listeners.
var reservedNames = map[string]bool{"admin": true, "debug": true, "disbursements": true,
	"healthz": true, "readyz": true, "metrics": true}

// envName is what secrets_env may hold: an environment variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// sourceSpec is one validated source. Secrets are the raw entries of the
// SecretsEnv variable (trimmed, empty entries dropped), already checked to
// parse for Scheme; nil when the source runs unsigned. A sourceSpec prints
// (fmt, slog) without its secrets.
type sourceSpec struct {
	Name       string            // the path segment: POST /webhooks/<Name>
	Adapter    string            // adapterPaylock, adapterStripe, adapterAdyen, adapterMapped, adapterLoans or adapterPayouts
	Scheme     signature.Scheme  // signature.SchemeStandard, signature.SchemeStripe, schemeAdyen or schemeNone
	SecretsEnv string            // the variable the secrets come from; "" for schemeNone
	Secrets    sourceSecrets     // never printed; a []string for the signature package (strings.Join(s.Secrets, ","))
	Events     []string          // stripe: the event types recorded (others are acknowledged as ignored)
	Fields     map[string]string // mapped: payment field -> RFC 6901 JSON pointer (transaction_id, amount, currency; event_id optional)
	ForwardURL string            // this source's forward target; "": PAYLOCK_FORWARD_URL, if any
	Builtin    bool              // payments, loans or payouts (possibly overridden by the file)
}

// unsigned reports whether the source's deliveries are not verified.
func (s sourceSpec) unsigned() bool { return s.Scheme == schemeNone || len(s.Secrets) == 0 }

// LogValue shows everything but the secrets, which it counts.
func (s sourceSpec) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("name", s.Name),
		slog.String("adapter", s.Adapter),
		slog.String("signature", string(s.Scheme)),
		slog.String("secrets_env", s.SecretsEnv),
		slog.Int("secrets", len(s.Secrets)),
		slog.Bool("builtin", s.Builtin),
	}
	if len(s.Events) > 0 {
		attrs = append(attrs, slog.Any("events", s.Events))
	}
	if len(s.Fields) > 0 {
		attrs = append(attrs, slog.Any("fields", s.Fields))
	}
	if s.ForwardURL != "" {
		attrs = append(attrs, slog.String("forward_url", redactURL(s.ForwardURL)))
	}
	return slog.GroupValue(attrs...)
}

// String prints the source as LogValue does.
func (s sourceSpec) String() string { return s.LogValue().String() }

// Format implements fmt.Formatter with String for every verb, so that no
// verb can print the secrets.
func (s sourceSpec) Format(f fmt.State, _ rune) { io.WriteString(f, s.String()) }

// MarshalJSON writes what LogValue shows.
func (s sourceSpec) MarshalJSON() ([]byte, error) { return groupJSON(s.LogValue()) }

// sourceSecrets are a source's raw secrets. They print, in every format, as
// their count only.
type sourceSecrets []string

func (s sourceSecrets) String() string               { return fmt.Sprintf("[%d secrets redacted]", len(s)) }
func (s sourceSecrets) Format(f fmt.State, _ rune)   { io.WriteString(f, s.String()) }
func (s sourceSecrets) LogValue() slog.Value         { return slog.StringValue(s.String()) }
func (s sourceSecrets) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
func (s sourceSecrets) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// groupJSON writes a group slog.Value as a JSON object.
func groupJSON(v slog.Value) ([]byte, error) {
	m := map[string]any{}
	for _, a := range v.Resolve().Group() {
		m[a.Key] = a.Value.Resolve().Any()
	}
	return json.Marshal(m)
}

// errUnsignedSource is wrapped by the error of a served source without
// secrets (or with signature none) when PAYLOCK_ALLOW_UNSIGNED is not true.
var errUnsignedSource = errors.New("refusing unsigned deliveries (PAYLOCK_ALLOW_UNSIGNED=true allows them, for local development only)")

// sourceError is a bad source configuration: one line naming the file, the
// source and the field that are wrong, whichever apply.
type sourceError struct {
	File   string // PAYLOCK_SOURCES_FILE; "" when the source is configured by the environment alone
	Source string // the source's name; "" when the file as a whole is wrong
	Field  string // the key (fields.amount for a mapped field); "" when the source as a whole is wrong
	Err    error
}

func (e *sourceError) Error() string {
	var parts []string
	if e.File != "" {
		parts = append(parts, "PAYLOCK_SOURCES_FILE "+e.File)
	}
	if e.Source != "" {
		parts = append(parts, "source "+strconv.Quote(e.Source))
	}
	if e.Field != "" {
		parts = append(parts, e.Field)
	}
	// One line, whatever the wrapped error (YAML's can span several).
	return strings.Join(append(parts, strings.Join(strings.Fields(e.Err.Error()), " ")), ": ")
}

func (e *sourceError) Unwrap() error { return e.Err }

// maxSourcesFile bounds what is read of PAYLOCK_SOURCES_FILE.
const maxSourcesFile = 1 << 20

// loadSources returns the sources serve serves, in order (payments, loans,
// payouts, then the file's other sources by name), and the names of those
// that run unsigned, for serve to warn about each. The built-in sources'
// settings come from cfg (so flags override them); the file's secrets_env
// variables are read with getenv.
//
// payments is always served, as is every source of the file; loans and
// payouts only when their secrets are set, or when PAYLOCK_ALLOW_UNSIGNED
// is true. A served source without secrets, or with signature none, is an
// error wrapping errUnsignedSource unless PAYLOCK_ALLOW_UNSIGNED is true.
// Every error is a *sourceError.
func loadSources(cfg config, getenv func(string) string) ([]sourceSpec, []string, error) {
	var data []byte
	if cfg.SourcesFile != "" {
		f, err := os.Open(cfg.SourcesFile)
		if err != nil {
			return nil, nil, &sourceError{File: cfg.SourcesFile, Err: unwrapPath(err)}
		}
		data, err = io.ReadAll(io.LimitReader(f, maxSourcesFile+1))
		f.Close()
		if err != nil {
			return nil, nil, &sourceError{File: cfg.SourcesFile, Err: unwrapPath(err)}
		}
		if len(data) > maxSourcesFile {
			return nil, nil, &sourceError{File: cfg.SourcesFile, Err: fmt.Errorf("larger than %d bytes", maxSourcesFile)}
		}
	}
	return buildSources(cfg, getenv, data)
}

// unwrapPath drops the *PathError's repetition of the file name.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// builtinSecrets maps each built-in source's secrets variable to its value
// in cfg.
func builtinSecrets(cfg config) map[string]string {
	return map[string]string{
		"PAYLOCK_WEBHOOK_SECRETS": cfg.secretsRaw,
		"PAYLOCK_LOAN_SECRETS":    cfg.loanSecretsRaw,
		"PAYLOCK_PAYOUT_SECRETS":  cfg.payoutSecretsRaw,
	}
}

// builtinVariables maps each built-in source's secrets variable to the
// source: no other source may read it.
var builtinVariables = map[string]string{
	"PAYLOCK_WEBHOOK_SECRETS": "payments",
	"PAYLOCK_LOAN_SECRETS":    "loans",
	"PAYLOCK_PAYOUT_SECRETS":  "payouts",
}

// builtinSources are the sources that exist without a file.
func builtinSources(cfg config) []sourceSpec {
	return []sourceSpec{
		{Name: "payments", Adapter: adapterPaylock, Scheme: cfg.SignatureScheme, SecretsEnv: "PAYLOCK_WEBHOOK_SECRETS", Builtin: true},
		{Name: "loans", Adapter: adapterLoans, Scheme: cfg.LoanSignatureScheme, SecretsEnv: "PAYLOCK_LOAN_SECRETS", Builtin: true},
		{Name: "payouts", Adapter: adapterPayouts, Scheme: cfg.PayoutSignatureScheme, SecretsEnv: "PAYLOCK_PAYOUT_SECRETS", Builtin: true},
	}
}

// buildSources is loadSources on the file's contents (nil: no file).
func buildSources(cfg config, getenv func(string) string, data []byte) ([]sourceSpec, []string, error) {
	file := cfg.SourcesFile
	var fromFile []rawSource
	if data != nil {
		var err error
		if fromFile, err = parseSourcesFile(data); err != nil {
			var se *sourceError
			if errors.As(err, &se) {
				se.File = file
				return nil, nil, se
			}
			return nil, nil, &sourceError{File: file, Err: err}
		}
	}

	// Each candidate: the built-ins, overridden by the file where it names
	// them, then the file's own sources.
	type candidate struct {
		spec     sourceSpec
		inFile   bool
		hasField map[string]bool
	}
	var cands []candidate
	for _, b := range builtinSources(cfg) {
		cands = append(cands, candidate{spec: b})
	}
	for _, rs := range fromFile {
		fail := func(field string, err error) error {
			return &sourceError{File: file, Source: rs.name, Field: field, Err: err}
		}
		if !sourceName.MatchString(rs.name) {
			return nil, nil, fail("", fmt.Errorf("not a valid name: want lower-case letters, digits, _ and - (at most 63, starting with a letter or digit), as in /webhooks/<name>"))
		}
		if reservedNames[rs.name] {
			return nil, nil, fail("", errors.New("reserved name: it names another paylock route or listener"))
		}
		i := slices.IndexFunc(cands, func(c candidate) bool { return c.spec.Name == rs.name })
		if i < 0 {
			cands = append(cands, candidate{spec: sourceSpec{Name: rs.name}})
			i = len(cands) - 1
		}
		spec, se := applySource(cands[i].spec, rs)
		if se != nil {
			return nil, nil, fail(se.Field, se.Err)
		}
		cands[i] = candidate{spec: spec, inFile: true, hasField: rs.has}
	}

	ownSecrets := builtinSecrets(cfg)
	secretVars := map[string]string{} // secrets_env -> the source that uses it
	secretKeys := map[string]string{} // a secret's key -> the source that uses it
	var specs []sourceSpec
	var unsigned []string
	for _, c := range cands {
		s := c.spec
		fileOf := ""
		if c.inFile {
			fileOf = file
		}
		fail := func(field string, err error) error {
			return &sourceError{File: fileOf, Source: s.Name, Field: field, Err: err}
		}
		if se := checkSpec(s, c.inFile && !s.Builtin, cfg); se != nil {
			return nil, nil, fail(se.Field, se.Err)
		}
		if s.Scheme == schemeNone {
			if !cfg.AllowUnsigned {
				return nil, nil, fail("signature", fmt.Errorf("none: %w", errUnsignedSource))
			}
			specs, unsigned = append(specs, s), append(unsigned, s.Name)
			continue
		}
		raw, own := ownSecrets[s.SecretsEnv]
		if !own {
			raw = getenv(s.SecretsEnv)
		}
		s.Secrets = splitList(raw)
		if len(s.Secrets) == 0 {
			served := s.Name == "payments" || c.inFile || cfg.AllowUnsigned
			if !served {
				continue
			}
			if !cfg.AllowUnsigned {
				field := ""
				if c.inFile && c.hasField["secrets_env"] {
					field = "secrets_env"
				}
				return nil, nil, fail(field, fmt.Errorf("%s is empty or not set: %w", s.SecretsEnv, errUnsignedSource))
			}
			specs, unsigned = append(specs, s), append(unsigned, s.Name)
			continue
		}
		keys, err := checkSecrets(s.Scheme, s.Secrets)
		if err != nil {
			return nil, nil, fail("secrets_env", fmt.Errorf("invalid %s: %v", s.SecretsEnv, err))
		}
		if other, ok := secretVars[s.SecretsEnv]; ok {
			return nil, nil, fail("secrets_env", fmt.Errorf("%s is also source %q's: a secret verifies only its own source", s.SecretsEnv, other))
		}
		secretVars[s.SecretsEnv] = s.Name
		for _, k := range keys {
			if other, ok := secretKeys[k]; ok && other != s.Name {
				return nil, nil, fail("secrets_env", fmt.Errorf("%s holds a secret of source %q as well: a secret verifies only its own source", s.SecretsEnv, other))
			}
			secretKeys[k] = s.Name
		}
		specs = append(specs, s)
	}
	return specs, unsigned, nil
}

// isSetting reports whether name is one of paylock's own variables.
func isSetting(name string) bool {
	return slices.ContainsFunc(settings(), func(s setting) bool { return s.env == name })
}

// rawSource is one entry of the file's sources map: its name and its keys,
// not yet decoded.
type rawSource struct {
	name string
	keys map[string]json.RawMessage
	has  map[string]bool
}

// sourceKeys are the keys a source may have in the file.
var sourceKeys = []string{"adapter", "signature", "secrets_env", "events", "fields", "forward_url"}

// parseSourcesFile reads the YAML of PAYLOCK_SOURCES_FILE into its
// sources, by name. Duplicate keys, unknown keys and values of the wrong
// type are errors.
func parseSourcesFile(data []byte) ([]rawSource, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(j, &top); err != nil || top == nil {
		return nil, errors.New("want a map with one key, sources")
	}
	for k := range top {
		if k != "sources" {
			return nil, fmt.Errorf("unknown key %q (want sources)", k)
		}
	}
	raw, ok := top["sources"]
	if !ok {
		return nil, errors.New("no sources key")
	}
	var named map[string]json.RawMessage
	if err := json.Unmarshal(raw, &named); err != nil || named == nil && !bytes.Equal(bytes.TrimSpace(raw), []byte("{}")) {
		return nil, errors.New("sources: want a map of source name to settings")
	}
	names := make([]string, 0, len(named))
	for n := range named {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]rawSource, 0, len(names))
	for _, n := range names {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(named[n], &keys); err != nil || keys == nil {
			return nil, &sourceError{Source: n, Err: fmt.Errorf("want a map of %s", strings.Join(sourceKeys, ", "))}
		}
		ks := make([]string, 0, len(keys))
		for k := range keys {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		has := map[string]bool{}
		for _, k := range ks {
			if !slices.Contains(sourceKeys, k) {
				hint := ""
				if strings.Contains(strings.ToLower(k), "secret") {
					hint = "; secrets never live in the file: name their variable in secrets_env"
				}
				return nil, &sourceError{Source: n, Field: k, Err: fmt.Errorf("unknown key (want %s)%s", strings.Join(sourceKeys, ", "), hint)}
			}
			if bytes.Equal(bytes.TrimSpace(keys[k]), []byte("null")) {
				return nil, &sourceError{Source: n, Field: k, Err: errors.New("no value")}
			}
			has[k] = true
		}
		out = append(out, rawSource{name: n, keys: keys, has: has})
	}
	return out, nil
}

// applySource decodes the file's keys for one source over base (a built-in,
// or the zero sourceSpec for a new source). Its error names the field.
func applySource(base sourceSpec, rs rawSource) (sourceSpec, *sourceError) {
	s := base
	fail := func(field string, err error) *sourceError { return &sourceError{Field: field, Err: err} }
	str := func(k string, dst *string) *sourceError {
		raw, ok := rs.keys[k]
		if !ok {
			return nil
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return fail(k, errors.New("want a string"))
		}
		if *dst == "" {
			return fail(k, errors.New("empty (omit the key instead)"))
		}
		return nil
	}
	if se := str("adapter", &s.Adapter); se != nil {
		return s, se
	}
	if rs.has["adapter"] && base.Builtin && s.Adapter != base.Adapter {
		return s, fail("adapter", fmt.Errorf("the built-in source %q keeps its adapter %q", base.Name, base.Adapter))
	}
	var scheme string
	if se := str("signature", &scheme); se != nil {
		return s, se
	}
	if rs.has["signature"] {
		s.Scheme = signature.Scheme(scheme)
		if s.Scheme == schemeNone {
			s.SecretsEnv = "" // a built-in turned unsigned reads no secrets
		}
	}
	if se := str("secrets_env", &s.SecretsEnv); se != nil {
		return s, se
	}
	if se := str("forward_url", &s.ForwardURL); se != nil {
		return s, se
	}
	if raw, ok := rs.keys["events"]; ok {
		if err := json.Unmarshal(raw, &s.Events); err != nil {
			return s, fail("events", errors.New("want a list of event types"))
		}
	}
	if raw, ok := rs.keys["fields"]; ok {
		if err := json.Unmarshal(raw, &s.Fields); err != nil {
			return s, fail("fields", errors.New("want a map of payment field to JSON pointer"))
		}
	}
	for _, k := range []string{"adapter", "signature"} {
		if !rs.has[k] && !base.Builtin {
			return s, fail(k, errors.New("missing"))
		}
	}
	if !rs.has["secrets_env"] && !base.Builtin && s.Scheme != schemeNone {
		return s, fail("secrets_env", errors.New("missing: name the environment variable holding this source's secrets"))
	}
	if s.Adapter == adapterStripe && !rs.has["events"] {
		s.Events = slices.Clone(defaultStripeEvents)
	}
	return s, nil
}

// checkSpec validates one source's settings, secrets aside; newSource is
// a source of the file that is not a built-in. Its error names the field.
func checkSpec(s sourceSpec, newSource bool, cfg config) *sourceError {
	fail := func(field string, err error) *sourceError { return &sourceError{Field: field, Err: err} }
	switch s.Adapter {
	case adapterPaylock, adapterStripe, adapterAdyen, adapterMapped:
	case adapterLoans, adapterPayouts:
		if newSource {
			return fail("adapter", fmt.Errorf("%q is the built-in %s source's only", s.Adapter, s.Adapter))
		}
	default:
		return fail("adapter", fmt.Errorf("unknown adapter %q (want paylock, stripe, adyen or mapped)", s.Adapter))
	}
	switch s.Scheme {
	case signature.SchemeStandard, signature.SchemeStripe, schemeAdyen, schemeNone:
	default:
		return fail("signature", fmt.Errorf("unknown scheme %q (want standard, stripe, adyen or none)", s.Scheme))
	}
	if s.Adapter == adapterAdyen && s.Scheme != schemeAdyen && s.Scheme != schemeNone {
		return fail("signature", fmt.Errorf("adapter adyen needs signature adyen, not %q", s.Scheme))
	}
	if s.Scheme == schemeAdyen && s.Adapter != adapterAdyen {
		return fail("signature", fmt.Errorf("signature adyen is only for adapter adyen, not %q", s.Adapter))
	}
	switch {
	case s.Scheme == schemeNone && s.SecretsEnv != "":
		return fail("secrets_env", errors.New("signature none takes no secrets"))
	case s.Scheme != schemeNone && !envName.MatchString(s.SecretsEnv):
		return fail("secrets_env", fmt.Errorf("%q is not an environment variable's name", s.SecretsEnv))
	}
	if owner, ok := builtinVariables[s.SecretsEnv]; ok && owner != s.Name {
		return fail("secrets_env", fmt.Errorf("%s is the built-in source %q's: a secret verifies only its own source", s.SecretsEnv, owner))
	} else if !ok && isSetting(s.SecretsEnv) {
		return fail("secrets_env", fmt.Errorf("%s is one of paylock's own settings, not a source's secrets", s.SecretsEnv))
	}
	if s.Events != nil {
		if s.Adapter != adapterStripe {
			return fail("events", fmt.Errorf("only for adapter stripe, not %q", s.Adapter))
		}
		if len(s.Events) == 0 {
			return fail("events", errors.New("empty: omit it for the default, payment_intent.succeeded"))
		}
		for i, e := range s.Events {
			if !slices.Contains(stripeEvents, e) {
				return fail("events", fmt.Errorf("unknown Stripe event %q (want %s)", e, strings.Join(stripeEvents, " or ")))
			}
			if slices.Contains(s.Events[:i], e) {
				return fail("events", fmt.Errorf("%q listed twice", e))
			}
		}
	}
	if s.Fields != nil && s.Adapter != adapterMapped {
		return fail("fields", fmt.Errorf("only for adapter mapped, not %q", s.Adapter))
	}
	if s.Adapter == adapterMapped {
		if s.Fields == nil {
			return fail("fields", fmt.Errorf("missing: adapter mapped needs JSON pointers for %s", strings.Join(requiredMapped, ", ")))
		}
		for _, f := range sortedKeys(s.Fields) {
			if !slices.Contains(mappedFields, f) {
				return fail("fields."+f, fmt.Errorf("unknown field (want %s)", strings.Join(mappedFields, ", ")))
			}
			if err := checkPointer(s.Fields[f]); err != nil {
				return fail("fields."+f, err)
			}
		}
		for _, f := range requiredMapped {
			if _, ok := s.Fields[f]; !ok {
				return fail("fields."+f, errors.New("missing: a JSON pointer such as /data/id"))
			}
		}
	}
	if s.ForwardURL != "" {
		if err := checkForwardURL(s.ForwardURL); err != nil {
			return fail("forward_url", fmt.Errorf("%q: %v", redactURL(s.ForwardURL), err))
		}
		if len(cfg.Forward.Secrets) == 0 {
			return fail("forward_url", errors.New("PAYLOCK_FORWARD_SECRETS must be set to sign the forwarded payments"))
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// checkPointer accepts an RFC 6901 JSON pointer that selects inside the
// document: it starts with "/", and "~" appears only as "~0" or "~1".
func checkPointer(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("%q is not a JSON pointer (must start with /)", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || p[i+1] != '0' && p[i+1] != '1') {
			return fmt.Errorf("%q is not a JSON pointer (~ must be written ~0, and / inside a key ~1)", p)
		}
	}
	return nil
}

// checkSecrets checks that secrets parse for scheme and returns each one's
// key as an opaque string, to find a secret shared by two sources. Its
// errors give an entry's position, never its text.
func checkSecrets(scheme signature.Scheme, secrets []string) ([]string, error) {
	keys := make([]string, 0, len(secrets))
	if scheme == schemeAdyen {
		for i, s := range secrets {
			k, err := hex.DecodeString(s)
			if err != nil || len(k) == 0 {
				return nil, fmt.Errorf("adyen secret %d of %d is not a hex HMAC key", i+1, len(secrets))
			}
			keys = append(keys, string(k))
		}
		return keys, nil
	}
	if _, err := signature.ParseSecrets(scheme, strings.Join(secrets, ",")); err != nil {
		return nil, err
	}
	for _, s := range secrets {
		k := []byte(s)
		if scheme == signature.SchemeStandard {
			k, _ = base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		}
		keys = append(keys, string(k))
	}
	return keys, nil
}
