package cli

import (
	"bytes"
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

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	_ "github.com/paylock/paylock/provider/all" // the providers sources name as their adapter
	"github.com/paylock/paylock/signature"
)

// A source is one endpoint, POST /webhooks/<name>, with its own adapter
// (how a body becomes payments: a registered provider, or paylock's own
// loans and payouts), signature scheme and secrets. paylock has three
// built-in sources (payments, loans, payouts) configured by environment
// variables; PAYLOCK_SOURCES_FILE adds sources and overrides built-in ones.
// loadSources turns both into a validated []sourceSpec; the secrets
// themselves are only ever read from the environment. What an adapter
// accepts (its schemes, its own keys and their values) is its provider's
// to say (package provider); the loader only asks.

// schemeNone is the scheme of a source without signatures: it needs
// PAYLOCK_ALLOW_UNSIGNED=true.
const schemeNone signature.Scheme = "none"

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
	Adapter    string            // a registered provider's name, or handler.ProviderLoans / handler.ProviderPayouts
	Scheme     signature.Scheme  // one of the adapter's schemes, or schemeNone
	SecretsEnv string            // the variable the secrets come from; "" for schemeNone
	Secrets    sourceSecrets     // never printed; a []string for the signature package (strings.Join(s.Secrets, ","))
	Settings   provider.Settings // the provider's own keys from the file (events, fields, ...), as raw JSON
	ForwardURL string            // this source's forward target; "": PAYLOCK_FORWARD_URL, if any
	// ForwardTo names the destinations (the file's destinations, or
	// default: PAYLOCK_FORWARD_URL) this source's messages go to; nil:
	// ForwardURL's, or default.
	ForwardTo []string
	// OrderPointer is the file's orders.pointer: where this source's
	// payments name their order; "" takes the adapter's default
	// (orderPointer).
	OrderPointer string
	Builtin      bool // payments, loans or payouts (possibly overridden by the file)
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
// Every source of the file is served; a built-in one (payments, loans,
// payouts) the file does not name only when its secrets are set, or when
// PAYLOCK_ALLOW_UNSIGNED is true. A served source without secrets, or with
// signature none, is an error wrapping errUnsignedSource unless
// PAYLOCK_ALLOW_UNSIGNED is true. No source at all is not an error here
// (serve refuses it: errNoSource). Every error is a *sourceError.
func loadSources(cfg Config, getenv func(string) string) ([]sourceSpec, []string, error) {
	data, err := readSourcesFile(cfg.Sources.File)
	if err != nil {
		return nil, nil, err
	}
	return buildSources(cfg, getenv, data)
}

// sourceShapes returns every source the configuration defines, in
// loadSources' order, checked as loadSources checks them but without
// reading a secret: every built-in (payments, loans, payouts) whether its
// secrets are set or not, and every source of the file whatever its
// secrets_env holds. Their Secrets are nil. The commands that never check
// a signature route and record by them (deliveries replay, forward
// replay, reconcile payments, the forward worker): only serve, which
// verifies deliveries, needs the sources' secrets (loadSources). Every
// error is a *sourceError.
func sourceShapes(cfg Config) ([]sourceSpec, error) {
	data, err := readSourcesFile(cfg.Sources.File)
	if err != nil {
		return nil, err
	}
	cands, err := candidates(cfg, data)
	if err != nil {
		return nil, err
	}
	rules := payload.NewRules(cfg.Sources.DefaultCurrency, cfg.Sources.Currencies)
	specs := make([]sourceSpec, 0, len(cands))
	for _, c := range cands {
		if se := checkSpec(c.spec, c.inFile && !c.spec.Builtin, cfg, rules); se != nil {
			return nil, c.failed(cfg, se)
		}
		specs = append(specs, c.spec)
	}
	return specs, nil
}

// failed is se, the error of candidate c, naming its file (when the file
// names it) and the source.
func (c candidate) failed(cfg Config, se *sourceError) *sourceError {
	fileOf := ""
	if c.inFile {
		fileOf = cfg.Sources.File
	}
	return &sourceError{File: fileOf, Source: c.spec.Name, Field: se.Field, Err: se.Err}
}

// readSourcesFile reads PAYLOCK_SOURCES_FILE: nil when it is not set.
func readSourcesFile(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &sourceError{File: path, Err: unwrapPath(err)}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSourcesFile+1))
	f.Close()
	if err != nil {
		return nil, &sourceError{File: path, Err: unwrapPath(err)}
	}
	if len(data) > maxSourcesFile {
		return nil, &sourceError{File: path, Err: fmt.Errorf("larger than %d bytes", maxSourcesFile)}
	}
	return data, nil
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
func builtinSecrets(cfg Config) map[string]string {
	return map[string]string{
		"PAYLOCK_WEBHOOK_SECRETS": cfg.Sources.secretsRaw,
		"PAYLOCK_LOAN_SECRETS":    cfg.Sources.loanSecretsRaw,
		"PAYLOCK_PAYOUT_SECRETS":  cfg.Sources.payoutSecretsRaw,
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
func builtinSources(cfg Config) []sourceSpec {
	return []sourceSpec{
		{Name: "payments", Adapter: handler.PaymentsProvider, Scheme: cfg.Sources.SignatureScheme, SecretsEnv: "PAYLOCK_WEBHOOK_SECRETS", Builtin: true},
		{Name: "loans", Adapter: handler.ProviderLoans, Scheme: cfg.Sources.LoanSignatureScheme, SecretsEnv: "PAYLOCK_LOAN_SECRETS", Builtin: true},
		{Name: "payouts", Adapter: handler.ProviderPayouts, Scheme: cfg.Sources.PayoutSignatureScheme, SecretsEnv: "PAYLOCK_PAYOUT_SECRETS", Builtin: true},
	}
}

// candidate is a source before its secrets are read: a built-in, possibly
// overridden by the file, or one of the file's own.
type candidate struct {
	spec     sourceSpec
	inFile   bool
	hasField map[string]bool
}

// buildSources is loadSources on the file's contents (nil: no file).
func buildSources(cfg Config, getenv func(string) string, data []byte) ([]sourceSpec, []string, error) {
	cands, err := candidates(cfg, data)
	if err != nil {
		return nil, nil, err
	}
	rules := payload.NewRules(cfg.Sources.DefaultCurrency, cfg.Sources.Currencies)
	ownSecrets := builtinSecrets(cfg)
	secretVars := map[string]string{} // secrets_env -> the source that uses it
	var owned []ownedSecret
	var specs []sourceSpec
	var unsigned []string
	for _, c := range cands {
		fileOf := ""
		if c.inFile {
			fileOf = cfg.Sources.File
		}
		fail := func(se *sourceError) error {
			return &sourceError{File: fileOf, Source: c.spec.Name, Field: se.Field, Err: se.Err}
		}
		if se := checkSpec(c.spec, c.inFile && !c.spec.Builtin, cfg, rules); se != nil {
			return nil, nil, fail(se)
		}
		if se := checkForwardSigned(c.spec, cfg); se != nil {
			return nil, nil, fail(se)
		}
		raw, own := ownSecrets[c.spec.SecretsEnv]
		if !own {
			raw = getenv(c.spec.SecretsEnv)
		}
		s, served, se := withSecrets(c, raw, cfg.Sources.AllowUnsigned, secretVars, &owned)
		switch {
		case se != nil:
			return nil, nil, fail(se)
		case !served:
			continue
		case s.unsigned() && !adapterSignsNothing(s.Adapter):
			unsigned = append(unsigned, s.Name)
		}
		specs = append(specs, s)
	}
	return specs, unsigned, nil
}

// candidates are the built-ins, overridden by the file where it names
// them, then the file's own sources, with their keys decoded.
func candidates(cfg Config, data []byte) ([]candidate, error) {
	file := cfg.Sources.File
	var fromFile []rawSource
	if data != nil {
		var err error
		if fromFile, err = parseSourcesFile(data); err != nil {
			var se *sourceError
			if errors.As(err, &se) {
				se.File = file
				return nil, se
			}
			return nil, &sourceError{File: file, Err: err}
		}
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
			return nil, fail("", fmt.Errorf("not a valid name: want lower-case letters, digits, _ and - (at most 63, starting with a letter or digit), as in /webhooks/<name>"))
		}
		if reservedNames[rs.name] {
			return nil, fail("", errors.New("reserved name: it names another paylock route or listener"))
		}
		i := slices.IndexFunc(cands, func(c candidate) bool { return c.spec.Name == rs.name })
		if i < 0 {
			cands = append(cands, candidate{spec: sourceSpec{Name: rs.name}})
			i = len(cands) - 1
		}
		spec, se := applySource(cands[i].spec, rs)
		if se != nil {
			return nil, fail(se.Field, se.Err)
		}
		cands[i] = candidate{spec: spec, inFile: true, hasField: rs.has}
	}
	return cands, nil
}

// ownedSecret is a secret already given to a source.
type ownedSecret struct {
	secret signature.Secret
	source string
}

// withSecrets returns c's spec with the secrets of raw, its secrets
// variable's value, and whether the source is served. A served source
// without secrets is an error wrapping errUnsignedSource unless
// allowUnsigned; so is signature none. A variable or a secret another
// source uses is an error: a secret verifies only its own source. Its
// error names the field.
func withSecrets(c candidate, raw string, allowUnsigned bool, vars map[string]string, owned *[]ownedSecret) (sourceSpec, bool, *sourceError) {
	s := c.spec
	fail := func(field string, err error) (sourceSpec, bool, *sourceError) {
		return s, false, &sourceError{Field: field, Err: err}
	}
	if s.Scheme == schemeNone {
		if !allowUnsigned && !adapterSignsNothing(s.Adapter) {
			return fail("signature", fmt.Errorf("none: %w", errUnsignedSource))
		}
		return s, true, nil
	}
	s.Secrets = splitList(raw)
	if len(s.Secrets) == 0 {
		if served := c.inFile || allowUnsigned; !served {
			return s, false, nil
		}
		if !allowUnsigned {
			field := ""
			if c.inFile && c.hasField["secrets_env"] {
				field = "secrets_env"
			}
			return fail(field, fmt.Errorf("%s is empty or not set: %w", s.SecretsEnv, errUnsignedSource))
		}
		return s, true, nil
	}
	secrets, err := parseSecrets(s.Scheme, strings.Join(s.Secrets, ","))
	if err != nil {
		return fail("secrets_env", fmt.Errorf("invalid %s: %w", s.SecretsEnv, err))
	}
	if other, ok := vars[s.SecretsEnv]; ok {
		return fail("secrets_env", fmt.Errorf("%s is also source %q's: a secret verifies only its own source", s.SecretsEnv, other))
	}
	vars[s.SecretsEnv] = s.Name
	for _, k := range secrets {
		for _, o := range *owned {
			if o.source != s.Name && k.Equal(o.secret) {
				return fail("secrets_env", fmt.Errorf("%s holds a secret of source %q as well: a secret verifies only its own source", s.SecretsEnv, o.source))
			}
		}
		*owned = append(*owned, ownedSecret{secret: k, source: s.Name})
	}
	return s, true, nil
}

// rawSource is one entry of the file's sources map: its name and its keys,
// not yet decoded.
type rawSource struct {
	name string
	keys map[string]json.RawMessage
	has  map[string]bool
}

// commonKeys are the keys every source may have in the file; a provider
// adds its own (provider.Provider.Keys).
var commonKeys = []string{"adapter", "signature", "secrets_env", "forward_url", "forward_to", "orders"}

// sourceKeys are the keys a source of some adapter may have in the file:
// the common keys and every registered provider's own.
func sourceKeys() []string {
	var own []string
	for _, n := range provider.Names() {
		p, _ := provider.Lookup(n)
		for _, k := range p.Keys() {
			if !slices.Contains(own, k) && !slices.Contains(commonKeys, k) {
				own = append(own, k)
			}
		}
	}
	slices.Sort(own)
	return append(append(slices.Clone(commonKeys[:3]), own...), commonKeys[3:]...)
}

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
		return nil, errors.New("want a map with the keys sources, destinations and operations")
	}
	for k := range top {
		if k != "sources" && k != "destinations" && k != "operations" {
			return nil, fmt.Errorf("unknown key %q (want sources, destinations, operations)", k)
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
	keyNames := sourceKeys()
	out := make([]rawSource, 0, len(names))
	for _, n := range names {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(named[n], &keys); err != nil || keys == nil {
			return nil, &sourceError{Source: n, Err: fmt.Errorf("want a map of %s", strings.Join(keyNames, ", "))}
		}
		ks := make([]string, 0, len(keys))
		for k := range keys {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		has := map[string]bool{}
		for _, k := range ks {
			if !slices.Contains(keyNames, k) {
				hint := ""
				if strings.Contains(strings.ToLower(k), "secret") {
					hint = "; secrets never live in the file: name their variable in secrets_env"
				}
				return nil, &sourceError{Source: n, Field: k, Err: fmt.Errorf("unknown key (want %s)%s", strings.Join(keyNames, ", "), hint)}
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

// applySource decodes the file's common keys for one source over base (a
// built-in, or the zero sourceSpec for a new source), and keeps the others,
// the provider's, as its Settings. Its error names the field.
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
	if raw, ok := rs.keys["forward_to"]; ok {
		if err := json.Unmarshal(raw, &s.ForwardTo); err != nil || len(s.ForwardTo) == 0 {
			return s, fail("forward_to", errors.New("want a list of destination names ([ledger, analytics])"))
		}
		for i, d := range s.ForwardTo {
			if slices.Contains(s.ForwardTo[:i], d) || d == "" {
				return s, fail("forward_to", fmt.Errorf("%q: named twice, or empty", d))
			}
		}
		if rs.has["forward_url"] {
			return s, fail("forward_to", errors.New("a source has forward_url or forward_to, not both: name the URL as a destination"))
		}
	}
	if raw, ok := rs.keys["orders"]; ok {
		p, err := parseOrders(raw)
		if err != nil {
			return s, fail("orders", err)
		}
		s.OrderPointer = p
	}
	for k, raw := range rs.keys {
		if !slices.Contains(commonKeys, k) {
			if s.Settings == nil {
				s.Settings = provider.Settings{}
			}
			s.Settings[k] = raw
		}
	}
	if !rs.has["adapter"] && !base.Builtin {
		return s, fail("adapter", errors.New("missing"))
	}
	if !rs.has["signature"] && !base.Builtin {
		var ok bool
		if s.Scheme, ok = defaultScheme(s.Adapter); !ok {
			return s, fail("signature", errors.New("missing"))
		}
	}
	if !rs.has["secrets_env"] && !base.Builtin && s.Scheme != schemeNone {
		return s, fail("secrets_env", errors.New("missing: name the environment variable holding this source's secrets"))
	}
	return s, nil
}

// adapter is what the loader knows of a source's adapter: a registered
// provider's schemes and keys, or those of paylock's own loans and payouts
// sources (header schemes, no keys).
type adapter struct {
	schemes []signature.Scheme
	keys    []string
	p       provider.Provider // nil for loans and payouts
}

// defaultScheme is the signature of a source of adapter that names none:
// its provider's own scheme (Schemes()[0]), or schemeNone for a provider
// that signs nothing (provider.SignsNothing); false for an adapter that
// is not a registered provider.
func defaultScheme(adapter string) (signature.Scheme, bool) {
	p, ok := provider.Lookup(adapter)
	switch {
	case ok && signsNothing(p):
		return schemeNone, true
	case ok && len(p.Schemes()) > 0:
		return p.Schemes()[0], true
	}
	return "", false
}

// signsNothing reports whether p's webhooks carry no signature
// (provider.SignsNothing): its sources need no secrets.
func signsNothing(p provider.Provider) bool {
	_, ok := p.(provider.SignsNothing)
	return ok
}

// adapterSignsNothing is signsNothing of the provider registered as name.
func adapterSignsNothing(name string) bool {
	p, ok := provider.Lookup(name)
	return ok && signsNothing(p)
}

// adapterOf looks up the adapter name; newSource is a source of the file
// that is not a built-in (loans and payouts are the built-ins' only).
func adapterOf(name string, newSource bool) (adapter, error) {
	if name == handler.ProviderLoans || name == handler.ProviderPayouts {
		if newSource {
			return adapter{}, fmt.Errorf("%q is the built-in %s source's only", name, name)
		}
		return adapter{schemes: headerSchemes}, nil
	}
	p, ok := provider.Lookup(name)
	if !ok {
		return adapter{}, fmt.Errorf("unknown adapter %q (want %s)", name, orList(provider.Names()))
	}
	return adapter{schemes: p.Schemes(), keys: p.Keys(), p: p}, nil
}

// checkSpec validates one source's settings, secrets aside; newSource is
// a source of the file that is not a built-in. The provider's own keys
// are checked by its New, with rules. Its error names the field.
func checkSpec(s sourceSpec, newSource bool, cfg Config, rules *payload.Rules) *sourceError {
	fail := func(field string, err error) *sourceError { return &sourceError{Field: field, Err: err} }
	a, err := adapterOf(s.Adapter, newSource)
	if err != nil {
		return fail("adapter", err)
	}
	if err := checkScheme(s, a); err != nil {
		return fail("signature", err)
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
	if se := checkSettings(s, a, rules); se != nil {
		return se
	}
	if s.ForwardURL != "" {
		if err := checkForwardURL(s.ForwardURL); err != nil {
			return fail("forward_url", fmt.Errorf("%q: %v", forward.Redact(s.ForwardURL), err))
		}
	}
	if s.OrderPointer != "" && (s.Adapter == handler.ProviderLoans || s.Adapter == handler.ProviderPayouts) {
		return fail("orders", fmt.Errorf("the %s source records no payments, so none names an order", s.Adapter))
	}
	return nil
}

// checkForwardSigned refuses a source whose own forward_url is an http(s)
// URL when PAYLOCK_FORWARD_SECRETS is not set: the receiver could not
// tell paylock's forwards from anyone's. What sends or queues forwards
// checks it (serve's sources, the forward worker, forward replay); what
// only reads the sources' shapes does not. Its error names the field.
func checkForwardSigned(s sourceSpec, cfg Config) *sourceError {
	if s.ForwardURL != "" && len(cfg.Forward.Secrets) == 0 && forward.NeedsSignature(s.ForwardURL) {
		return &sourceError{Field: "forward_url", Err: errors.New("PAYLOCK_FORWARD_SECRETS must be set to sign the forwarded payments")}
	}
	return nil
}

// headerSchemes are the schemes of paylock's own loans and payouts
// sources, whose signatures are in headers (see headerScheme).
var headerSchemes = []signature.Scheme{signature.SchemeStandard, signature.SchemeStripe}

// checkScheme checks that s's scheme exists and that its adapter's sources
// may use it.
func checkScheme(s sourceSpec, a adapter) error {
	switch {
	case a.p != nil && signsNothing(a.p) && s.Scheme != schemeNone:
		return fmt.Errorf("adapter %s's webhooks carry no signature: omit signature (or say none); paylock records only what the provider's API answers for the payments they name", s.Adapter)
	case s.Scheme == schemeNone:
		return nil
	case !slices.Contains(signature.Schemes(), s.Scheme):
		return fmt.Errorf("unknown scheme %q (want %s)", s.Scheme, orList(append(signature.Schemes(), schemeNone)))
	case slices.Contains(a.schemes, s.Scheme):
		return nil
	case len(a.schemes) == 1:
		return fmt.Errorf("adapter %s needs signature %s, not %q", s.Adapter, a.schemes[0], s.Scheme)
	}
	owners := providersWhere(func(p provider.Provider) bool { return slices.Contains(p.Schemes(), s.Scheme) })
	return fmt.Errorf("signature %s is only for adapter %s, not %q", s.Scheme, orList(owners), s.Adapter)
}

// checkSettings refuses the keys of another adapter, then has the
// provider check its own (provider.Provider.New): its
// *provider.SettingError names the key.
func checkSettings(s sourceSpec, a adapter, rules *payload.Rules) *sourceError {
	for _, k := range s.Settings.Keys() {
		if slices.Contains(a.keys, k) {
			continue
		}
		owners := providersWhere(func(p provider.Provider) bool { return slices.Contains(p.Keys(), k) })
		return &sourceError{Field: k, Err: fmt.Errorf("only for adapter %s, not %q", orList(owners), s.Adapter)}
	}
	if a.p == nil {
		return nil
	}
	_, err := a.p.New(provider.Config{Source: s.Name, Settings: s.Settings, Rules: rules})
	var se *provider.SettingError
	switch {
	case errors.As(err, &se):
		return &sourceError{Field: se.Key, Err: se.Err}
	case err != nil:
		return &sourceError{Err: err}
	}
	return nil
}

// providersWhere lists the registered providers for which keep is true.
func providersWhere(keep func(provider.Provider) bool) []string {
	var out []string
	for _, n := range provider.Names() {
		if p, _ := provider.Lookup(n); keep(p) {
			out = append(out, n)
		}
	}
	return out
}

// orList writes names as "a, b or c".
func orList[S ~string](names []S) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(n)
	}
	if len(out) < 2 {
		return strings.Join(out, "")
	}
	return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
}

// leftOut returns the lifecycle event types spec's adapter understands
// but spec's settings leave out (provider.LeftOut), nil for an adapter
// that does not name its types (provider.Typed) or a source that records
// them all.
func leftOut(spec sourceSpec, rules *payload.Rules) []string {
	p, ok := provider.Lookup(spec.Adapter)
	if !ok {
		return nil
	}
	a, err := p.New(provider.Config{Source: spec.Name, Settings: spec.Settings, Rules: rules})
	if err != nil {
		return nil
	}
	if t, ok := a.(provider.Typed); ok {
		return provider.LeftOut(t)
	}
	return nil
}

// warnLeftOut writes one warning per source that leaves out lifecycle
// event types (leftOut): their deliveries are acknowledged "ignored" and
// recorded nowhere, so a refunded or disputed payment stays as it was.
func warnLeftOut(logger *slog.Logger, specs []sourceSpec, rules *payload.Rules) {
	for _, spec := range specs {
		if types := leftOut(spec, rules); len(types) > 0 {
			logger.Warn("this source's settings leave out lifecycle event types its adapter records: their deliveries are answered \"ignored\" and recorded nowhere, so refunds, disputes, failures and cancellations of its payments go unseen (omit events to record them all)",
				slog.String("source", spec.Name), slog.String("adapter", spec.Adapter), slog.Any("left_out", types))
		}
	}
}
