package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

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

// CommonKeys returns the keys every source may have in the file, whatever
// its adapter; a source's other keys are its provider's (Spec.Settings).
func CommonKeys() []string { return slices.Clone(commonKeys) }

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
			return nil, &Error{Source: n, Err: fmt.Errorf("want a map of %s", strings.Join(keyNames, ", "))}
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
				return nil, &Error{Source: n, Field: k, Err: fmt.Errorf("unknown key (want %s)%s", strings.Join(keyNames, ", "), hint)}
			}
			if bytes.Equal(bytes.TrimSpace(keys[k]), []byte("null")) {
				return nil, &Error{Source: n, Field: k, Err: errors.New("no value")}
			}
			has[k] = true
		}
		out = append(out, rawSource{name: n, keys: keys, has: has})
	}
	return out, nil
}

// applySource decodes the file's common keys for one source over base (a
// built-in, or the zero Spec for a new source), and keeps the others,
// the provider's, as its Settings. Its error names the field.
func applySource(base Spec, rs rawSource) (Spec, *Error) {
	s := base
	fail := func(field string, err error) *Error { return &Error{Field: field, Err: err} }
	str := func(k string, dst *string) *Error {
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
		if s.Scheme == SchemeNone {
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
	if !rs.has["secrets_env"] && !base.Builtin && s.Scheme != SchemeNone {
		return s, fail("secrets_env", errors.New("missing: name the environment variable holding this source's secrets"))
	}
	return s, nil
}

// parseOrders reads a source's orders key, {pointer: "/..."}: unknown
// keys, a missing or empty pointer and one that is not an RFC 6901
// pointer to a member are errors.
func parseOrders(raw json.RawMessage) (string, error) {
	var o struct {
		Pointer *string `json:"pointer"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return "", errors.New("want a map with one key, pointer (an RFC 6901 JSON pointer into the payment's body)")
	}
	if o.Pointer == nil || *o.Pointer == "" {
		return "", errors.New("pointer: missing (an RFC 6901 JSON pointer such as /metadata/order_id)")
	}
	p, err := payload.ParsePointer(*o.Pointer)
	if err != nil {
		return "", fmt.Errorf("pointer: %v", err)
	}
	if len(p.Tokens()) == 0 {
		return "", errors.New("pointer: points at the whole body, not at a member")
	}
	for _, t := range p.Tokens() {
		if strings.ContainsRune(t, 0) {
			return "", errors.New("pointer: a token holds a NUL character")
		}
	}
	return *o.Pointer, nil
}
