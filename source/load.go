package source

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/signature"
)

// Options are what the loader needs besides the sources file: the
// built-in sources (their settings come from the environment and flags,
// which the caller reads) and the settings every source is checked
// against.
type Options struct {
	File            string   // PAYLOCK_SOURCES_FILE; "": the built-in sources only
	AllowUnsigned   bool     // PAYLOCK_ALLOW_UNSIGNED
	ForwardSecrets  bool     // whether PAYLOCK_FORWARD_SECRETS is set (CheckForwardSigned)
	DefaultCurrency string   // PAYLOCK_DEFAULT_CURRENCY: for the providers' payload.Rules
	Currencies      []string // PAYLOCK_CURRENCIES: for the providers' payload.Rules

	// Builtins are the sources that exist without a file, in order
	// (payments, loans, payouts): each with its Name, Adapter, Scheme,
	// SecretsEnv and Builtin set. No other source may read a built-in's
	// SecretsEnv.
	Builtins []Spec
	// BuiltinSecrets are the built-in sources' raw secret lists by
	// variable (PAYLOCK_WEBHOOK_SECRETS: "whsec_..., whsec_..."), read
	// instead of the environment so that flags override them.
	BuiltinSecrets map[string]string
	// OwnAdapters are the adapters of paylock's own built-in sources that
	// are not a provider (loans, payouts): their signatures travel in
	// headers, no source of the file may take them, and they record no
	// payments.
	OwnAdapters []string
	// IsSetting reports whether a variable is one of paylock's own
	// settings, which no secrets_env may name; nil: none is.
	IsSetting func(name string) bool
}

// builtinVariable returns the built-in source whose secrets variable is
// env: no other source may read it.
func (o Options) builtinVariable(env string) (string, bool) {
	for _, b := range o.Builtins {
		if b.SecretsEnv == env {
			return b.Name, true
		}
	}
	return "", false
}

// maxSourcesFile bounds what is read of PAYLOCK_SOURCES_FILE.
const maxSourcesFile = 1 << 20

// Load returns the sources serve serves, in order (the built-ins:
// payments, loans, payouts, then the file's other sources by name), and
// the names of those that run unsigned, for serve to warn about each. The
// built-in sources' settings and secrets come from opts (so flags override
// them); the file's secrets_env variables are read with getenv.
//
// Every source of the file is served; a built-in one (payments, loans,
// payouts) the file does not name only when its secrets are set, or when
// PAYLOCK_ALLOW_UNSIGNED is true. A served source without secrets, or with
// signature none, is an error wrapping ErrUnsigned unless
// PAYLOCK_ALLOW_UNSIGNED is true. No source at all is not an error here
// (serve refuses it). Every error is an *Error.
func Load(opts Options, getenv func(string) string) ([]Spec, []string, error) {
	data, err := ReadFile(opts.File)
	if err != nil {
		return nil, nil, err
	}
	return buildSources(opts, getenv, data)
}

// Shapes returns every source the options define, in
// Load's order, checked as Load checks them but without
// reading a secret: every built-in (payments, loans, payouts) whether its
// secrets are set or not, and every source of the file whatever its
// secrets_env holds. Their Secrets are nil. The commands that never check
// a signature route and record by them (deliveries replay, forward
// replay, reconcile payments, the forward worker): only serve, which
// verifies deliveries, needs the sources' secrets (Load). Every
// error is an *Error.
func Shapes(opts Options) ([]Spec, error) {
	data, err := ReadFile(opts.File)
	if err != nil {
		return nil, err
	}
	cands, err := candidates(opts, data)
	if err != nil {
		return nil, err
	}
	rules := payload.NewRules(opts.DefaultCurrency, opts.Currencies)
	specs := make([]Spec, 0, len(cands))
	for _, c := range cands {
		if se := checkSpec(c.spec, c.inFile && !c.spec.Builtin, opts, rules); se != nil {
			return nil, c.failed(opts, se)
		}
		specs = append(specs, c.spec)
	}
	return specs, nil
}

// failed is se, the error of candidate c, naming its file (when the file
// names it) and the source.
func (c candidate) failed(opts Options, se *Error) *Error {
	fileOf := ""
	if c.inFile {
		fileOf = opts.File
	}
	return &Error{File: fileOf, Source: c.spec.Name, Field: se.Field, Err: se.Err}
}

// ReadFile reads PAYLOCK_SOURCES_FILE, path, at most 1 MiB of it: nil
// when it is not set. Its error is an *Error naming the file.
func ReadFile(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Err: unwrapPath(err)}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSourcesFile+1))
	f.Close()
	if err != nil {
		return nil, &Error{File: path, Err: unwrapPath(err)}
	}
	if len(data) > maxSourcesFile {
		return nil, &Error{File: path, Err: fmt.Errorf("larger than %d bytes", maxSourcesFile)}
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

// candidate is a source before its secrets are read: a built-in, possibly
// overridden by the file, or one of the file's own.
type candidate struct {
	spec     Spec
	inFile   bool
	hasField map[string]bool
}

// buildSources is Load on the file's contents (nil: no file).
func buildSources(opts Options, getenv func(string) string, data []byte) ([]Spec, []string, error) {
	cands, err := candidates(opts, data)
	if err != nil {
		return nil, nil, err
	}
	rules := payload.NewRules(opts.DefaultCurrency, opts.Currencies)
	ownSecrets := opts.BuiltinSecrets
	secretVars := map[string]string{} // secrets_env -> the source that uses it
	var owned []ownedSecret
	var specs []Spec
	var unsigned []string
	for _, c := range cands {
		fileOf := ""
		if c.inFile {
			fileOf = opts.File
		}
		fail := func(se *Error) error {
			return &Error{File: fileOf, Source: c.spec.Name, Field: se.Field, Err: se.Err}
		}
		if se := checkSpec(c.spec, c.inFile && !c.spec.Builtin, opts, rules); se != nil {
			return nil, nil, fail(se)
		}
		if se := CheckForwardSigned(c.spec, opts.ForwardSecrets); se != nil {
			return nil, nil, fail(se)
		}
		raw, own := ownSecrets[c.spec.SecretsEnv]
		if !own {
			raw = getenv(c.spec.SecretsEnv)
		}
		s, served, se := withSecrets(c, raw, opts.AllowUnsigned, secretVars, &owned)
		switch {
		case se != nil:
			return nil, nil, fail(se)
		case !served:
			continue
		case s.Unsigned() && !AdapterSignsNothing(s.Adapter):
			unsigned = append(unsigned, s.Name)
		}
		specs = append(specs, s)
	}
	return specs, unsigned, nil
}

// candidates are the built-ins, overridden by the file where it names
// them, then the file's own sources, with their keys decoded.
func candidates(opts Options, data []byte) ([]candidate, error) {
	file := opts.File
	var fromFile []rawSource
	if data != nil {
		var err error
		if fromFile, err = parseSourcesFile(data); err != nil {
			var se *Error
			if errors.As(err, &se) {
				se.File = file
				return nil, se
			}
			return nil, &Error{File: file, Err: err}
		}
	}
	var cands []candidate
	for _, b := range opts.Builtins {
		cands = append(cands, candidate{spec: b})
	}
	for _, rs := range fromFile {
		fail := func(field string, err error) error {
			return &Error{File: file, Source: rs.name, Field: field, Err: err}
		}
		if !sourceName.MatchString(rs.name) {
			return nil, fail("", fmt.Errorf("not a valid name: want lower-case letters, digits, _ and - (at most 63, starting with a letter or digit), as in /webhooks/<name>"))
		}
		if reservedNames[rs.name] {
			return nil, fail("", errors.New("reserved name: it names another paylock route or listener"))
		}
		i := slices.IndexFunc(cands, func(c candidate) bool { return c.spec.Name == rs.name })
		if i < 0 {
			cands = append(cands, candidate{spec: Spec{Name: rs.name}})
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
// without secrets is an error wrapping ErrUnsigned unless
// allowUnsigned; so is signature none. A variable or a secret another
// source uses is an error: a secret verifies only its own source. Its
// error names the field.
func withSecrets(c candidate, raw string, allowUnsigned bool, vars map[string]string, owned *[]ownedSecret) (Spec, bool, *Error) {
	s := c.spec
	fail := func(field string, err error) (Spec, bool, *Error) {
		return s, false, &Error{Field: field, Err: err}
	}
	if s.Scheme == SchemeNone {
		if !allowUnsigned && !AdapterSignsNothing(s.Adapter) {
			return fail("signature", fmt.Errorf("none: %w", ErrUnsigned))
		}
		return s, true, nil
	}
	s.Secrets = SplitList(raw)
	if len(s.Secrets) == 0 {
		if served := c.inFile || allowUnsigned; !served {
			return s, false, nil
		}
		if !allowUnsigned {
			field := ""
			if c.inFile && c.hasField["secrets_env"] {
				field = "secrets_env"
			}
			return fail(field, fmt.Errorf("%s is empty or not set: %w", s.SecretsEnv, ErrUnsigned))
		}
		return s, true, nil
	}
	secrets, err := ParseSecrets(s.Scheme, strings.Join(s.Secrets, ","))
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

// SplitList returns the entries of a comma-separated setting, trimmed,
// empty entries dropped: how a secrets variable is read (Spec.Secrets),
// and paylock's other list settings.
func SplitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
