package source

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

// adapter is what the loader knows of a source's adapter: a registered
// provider's schemes and keys, or those of paylock's own loans and payouts
// sources (header schemes, no keys).
type adapter struct {
	schemes []signature.Scheme
	keys    []string
	p       provider.Provider // nil for loans and payouts
}

// defaultScheme is the signature of a source of adapter that names none:
// its provider's own scheme (Schemes()[0]), or SchemeNone for a provider
// that signs nothing (provider.SignsNothing); false for an adapter that
// is not a registered provider.
func defaultScheme(adapter string) (signature.Scheme, bool) {
	p, ok := provider.Lookup(adapter)
	switch {
	case ok && signsNothing(p):
		return SchemeNone, true
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

// AdapterSignsNothing reports whether the provider registered as name
// signs nothing (signsNothing): its sources need no secrets.
func AdapterSignsNothing(name string) bool {
	p, ok := provider.Lookup(name)
	return ok && signsNothing(p)
}

// adapterOf looks up the adapter name; newSource is a source of the file
// that is not a built-in (own, the adapters of paylock's own loans and
// payouts sources, are the built-ins' only).
func adapterOf(name string, newSource bool, own []string) (adapter, error) {
	if slices.Contains(own, name) {
		if newSource {
			return adapter{}, fmt.Errorf("%q is the built-in %s source's only", name, name)
		}
		return adapter{schemes: headerSchemes}, nil
	}
	p, ok := provider.Lookup(name)
	if !ok {
		return adapter{}, fmt.Errorf("unknown adapter %q (want %s)", name, OrList(provider.Names()))
	}
	return adapter{schemes: p.Schemes(), keys: p.Keys(), p: p}, nil
}

// checkSpec validates one source's settings, secrets aside; newSource is
// a source of the file that is not a built-in. The provider's own keys
// are checked by its New, with rules. Its error names the field.
func checkSpec(s Spec, newSource bool, opts Options, rules *payload.Rules) *Error {
	fail := func(field string, err error) *Error { return &Error{Field: field, Err: err} }
	a, err := adapterOf(s.Adapter, newSource, opts.OwnAdapters)
	if err != nil {
		return fail("adapter", err)
	}
	if err := checkScheme(s, a); err != nil {
		return fail("signature", err)
	}
	switch {
	case s.Scheme == SchemeNone && s.SecretsEnv != "":
		return fail("secrets_env", errors.New("signature none takes no secrets"))
	case s.Scheme != SchemeNone && !envName.MatchString(s.SecretsEnv):
		return fail("secrets_env", fmt.Errorf("%q is not an environment variable's name", s.SecretsEnv))
	}
	if owner, ok := opts.builtinVariable(s.SecretsEnv); ok && owner != s.Name {
		return fail("secrets_env", fmt.Errorf("%s is the built-in source %q's: a secret verifies only its own source", s.SecretsEnv, owner))
	} else if !ok && opts.IsSetting != nil && opts.IsSetting(s.SecretsEnv) {
		return fail("secrets_env", fmt.Errorf("%s is one of paylock's own settings, not a source's secrets", s.SecretsEnv))
	}
	if se := checkSettings(s, a, rules); se != nil {
		return se
	}
	if s.ForwardURL != "" {
		if err := forward.CheckURL(s.ForwardURL); err != nil {
			return fail("forward_url", fmt.Errorf("%q: %v", forward.Redact(s.ForwardURL), err))
		}
	}
	if s.OrderPointer != "" && slices.Contains(opts.OwnAdapters, s.Adapter) {
		return fail("orders", fmt.Errorf("the %s source records no payments, so none names an order", s.Adapter))
	}
	return nil
}

// CheckForwardSigned refuses a source whose own forward_url is an http(s)
// URL when PAYLOCK_FORWARD_SECRETS is not set (forwardSecrets false): the
// receiver could not tell paylock's forwards from anyone's. What sends or
// queues forwards checks it (serve's sources, the forward worker, forward
// replay); what only reads the sources' shapes does not. Its error names
// the field.
func CheckForwardSigned(s Spec, forwardSecrets bool) *Error {
	if s.ForwardURL != "" && !forwardSecrets && forward.NeedsSignature(s.ForwardURL) {
		return &Error{Field: "forward_url", Err: errors.New("PAYLOCK_FORWARD_SECRETS must be set to sign the forwarded payments")}
	}
	return nil
}

// headerSchemes are the schemes of paylock's own loans and payouts
// sources, whose signatures are in headers.
var headerSchemes = []signature.Scheme{signature.SchemeStandard, signature.SchemeStripe}

// checkScheme checks that s's scheme exists and that its adapter's sources
// may use it.
func checkScheme(s Spec, a adapter) error {
	switch {
	case a.p != nil && signsNothing(a.p) && s.Scheme != SchemeNone:
		return fmt.Errorf("adapter %s's webhooks carry no signature: omit signature (or say none); paylock records only what the provider's API answers for the payments they name", s.Adapter)
	case s.Scheme == SchemeNone:
		return nil
	case !slices.Contains(signature.Schemes(), s.Scheme):
		return fmt.Errorf("unknown scheme %q (want %s)", s.Scheme, OrList(append(signature.Schemes(), SchemeNone)))
	case slices.Contains(a.schemes, s.Scheme):
		return nil
	case len(a.schemes) == 1:
		return fmt.Errorf("adapter %s needs signature %s, not %q", s.Adapter, a.schemes[0], s.Scheme)
	}
	owners := ProvidersWhere(func(p provider.Provider) bool { return slices.Contains(p.Schemes(), s.Scheme) })
	return fmt.Errorf("signature %s is only for adapter %s, not %q", s.Scheme, OrList(owners), s.Adapter)
}

// checkSettings refuses the keys of another adapter, then has the
// provider check its own (provider.Provider.New): its
// *provider.SettingError names the key.
func checkSettings(s Spec, a adapter, rules *payload.Rules) *Error {
	for _, k := range s.Settings.Keys() {
		if slices.Contains(a.keys, k) {
			continue
		}
		owners := ProvidersWhere(func(p provider.Provider) bool { return slices.Contains(p.Keys(), k) })
		return &Error{Field: k, Err: fmt.Errorf("only for adapter %s, not %q", OrList(owners), s.Adapter)}
	}
	if a.p == nil {
		return nil
	}
	_, err := a.p.New(provider.Config{Source: s.Name, Settings: s.Settings, Rules: rules})
	var se *provider.SettingError
	switch {
	case errors.As(err, &se):
		return &Error{Field: se.Key, Err: se.Err}
	case err != nil:
		return &Error{Err: err}
	}
	return nil
}

// ProvidersWhere lists the registered providers for which keep is true.
func ProvidersWhere(keep func(provider.Provider) bool) []string {
	var out []string
	for _, n := range provider.Names() {
		if p, _ := provider.Lookup(n); keep(p) {
			out = append(out, n)
		}
	}
	return out
}

// OrList writes names as "a, b or c".
func OrList[S ~string](names []S) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(n)
	}
	if len(out) < 2 {
		return strings.Join(out, "")
	}
	return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
}

// LeftOut returns the lifecycle event types spec's adapter understands
// but spec's settings leave out (provider.LeftOut), nil for an adapter
// that does not name its types (provider.Typed) or a source that records
// them all.
func LeftOut(spec Spec, rules *payload.Rules) []string {
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

// WarnLeftOut writes one warning per source that leaves out lifecycle
// event types (LeftOut): their deliveries are acknowledged "ignored" and
// recorded nowhere, so a refunded or disputed payment stays as it was.
func WarnLeftOut(logger *slog.Logger, specs []Spec, rules *payload.Rules) {
	for _, spec := range specs {
		if types := LeftOut(spec, rules); len(types) > 0 {
			logger.Warn("this source's settings leave out lifecycle event types its adapter records: their deliveries are answered \"ignored\" and recorded nowhere, so refunds, disputes, failures and cancellations of its payments go unseen (omit events to record them all)",
				slog.String("source", spec.Name), slog.String("adapter", spec.Adapter), slog.Any("left_out", types))
		}
	}
}

// ParseSecrets parses the secrets a source (or the forwards) is served
// with: signature.ParseSecrets, then signature.CheckKeyLength, so that a
// key shorter than signature.MinKeyBytes stops start-up.
func ParseSecrets(scheme signature.Scheme, csv string) ([]signature.Secret, error) {
	secrets, err := signature.ParseSecrets(scheme, csv)
	if err != nil {
		return nil, err
	}
	if err := signature.CheckKeyLength(secrets); err != nil {
		return nil, err
	}
	return secrets, nil
}
