package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/source"
)

// destinationKeys are the keys of one destination of the sources file's
// destinations map.
var destinationKeys = []string{"url", "secrets_env", "types", "filter", "retry", "max_attempts", "timeout", "headers", "concurrency", "rate",
	"park_after", "probe"}

// destinationName is a destination's name: like a source's.
var destinationName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// fileDestination is one destination of the sources file.
type fileDestination struct {
	URL    string
	Policy forward.Policy
}

// destinationError is a bad destination of the sources file: it names the
// destination and its key. It prints as a *source.Error does, and wraps
// what is wrong (forward.ErrFilter, ...).
func destinationError(file, name, key string, err error) error {
	field := "destinations." + name
	if key != "" {
		field += "." + key
	}
	return &source.Error{File: file, Field: field, Err: err}
}

// parseDestinations reads the destinations map of the sources file (data;
// nil: none), reading the variables it names (secrets_env, headers' env)
// with getenv. withSecrets is false where no message is sent (a process
// that only inserts jobs routes by fingerprints, which hold the
// variables' names only): the variables are then not read. Every
// error is a *source.Error naming the destination and key.
func parseDestinations(file string, data []byte, getenv func(string) string, withSecrets bool) (map[string]fileDestination, error) {
	if data == nil {
		return nil, nil
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, &source.Error{File: file, Err: err}
	}
	var top struct {
		Destinations map[string]json.RawMessage `json:"destinations"`
	}
	if err := json.Unmarshal(j, &top); err != nil {
		return nil, &source.Error{File: file, Field: "destinations", Err: errors.New("want a map of destination name to settings")}
	}
	out := map[string]fileDestination{}
	for _, name := range slices.Sorted(maps.Keys(top.Destinations)) {
		d, err := parseDestination(name, top.Destinations[name], getenv, withSecrets)
		if err != nil {
			var se *source.Error
			if errors.As(err, &se) {
				se.File = file
				return nil, se
			}
			return nil, destinationError(file, name, "", err)
		}
		out[name] = d
	}
	return out, nil
}

func parseDestination(name string, raw json.RawMessage, getenv func(string) string, withSecrets bool) (fileDestination, error) {
	fail := func(key string, err error) (fileDestination, error) {
		return fileDestination{}, destinationError("", name, key, err)
	}
	if !destinationName.MatchString(name) {
		return fail("", errors.New("not a valid name: want lower-case letters, digits, _ and - (at most 63, starting with a letter or digit)"))
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return fail("", fmt.Errorf("want a map of %s", strings.Join(destinationKeys, ", ")))
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !slices.Contains(destinationKeys, k) {
			return fail(k, fmt.Errorf("unknown key (want %s)", strings.Join(destinationKeys, ", ")))
		}
		if bytes.Equal(bytes.TrimSpace(keys[k]), []byte("null")) {
			return fail(k, errors.New("no value"))
		}
	}
	var d fileDestination
	decode := destinationDecoder(name, keys)
	if err := decode("url", &d.URL, "want a string"); err != nil {
		return d, err
	}
	if d.URL == "" {
		return fail("url", errors.New("missing: any "+strings.Join(forward.Schemes(), ", ")+" URL"))
	}
	if err := checkForwardURL(d.URL); err != nil {
		return fail("url", fmt.Errorf("%q: %v", forward.Redact(d.URL), err))
	}
	p := &d.Policy
	if err := decode("types", &p.Types, "want a list of type patterns (payment.*)"); err != nil {
		return d, err
	}
	if _, ok := keys["types"]; ok && len(p.Types) == 0 {
		return fail("types", errors.New("empty: it would take no message (omit the key to take every type)"))
	}
	if err := decode("filter", &p.Filter, "want a string: an expression over type and data"); err != nil {
		return d, err
	}
	if err := parseAttempts(name, keys, p); err != nil {
		return d, err
	}
	if err := parseDelivery(name, keys, d.URL, p, getenv, withSecrets); err != nil {
		return d, err
	}
	return d, nil
}

// destinationDecoder decodes key k of destination name into dst; its
// error (want) names the key.
func destinationDecoder(name string, keys map[string]json.RawMessage) func(k string, dst any, want string) error {
	return func(k string, dst any, want string) error {
		raw, ok := keys[k]
		if !ok {
			return nil
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return destinationError("", name, k, errors.New(want))
		}
		return nil
	}
}

// parseOperations reads the sources file's operations map (data; nil:
// none): the destination the operator events go to ("": none). That it
// is a destination is checked with the routes (routeForwards).
func parseOperations(file string, data []byte) (string, error) {
	if data == nil {
		return "", nil
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return "", &source.Error{File: file, Err: err}
	}
	var top struct {
		Operations json.RawMessage `json:"operations"`
	}
	if err := json.Unmarshal(j, &top); err != nil || top.Operations == nil {
		return "", nil
	}
	var ops map[string]json.RawMessage
	if err := json.Unmarshal(top.Operations, &ops); err != nil || ops == nil {
		return "", &source.Error{File: file, Field: "operations", Err: errors.New("want a map with the key destination")}
	}
	for k := range ops {
		if k != "destination" {
			return "", &source.Error{File: file, Field: "operations." + k, Err: errors.New("unknown key (want destination)")}
		}
	}
	var name string
	if err := json.Unmarshal(ops["destination"], &name); err != nil || name == "" {
		return "", &source.Error{File: file, Field: "operations.destination", Err: errors.New("want a destination's name: where destination.parked, destination.recovered, destination.failing and message.exhausted go")}
	}
	return name, nil
}

// parseAttempts decodes a destination's retry, max_attempts, timeout,
// concurrency, rate, park_after and probe into p.
func parseAttempts(name string, keys map[string]json.RawMessage, p *forward.Policy) error {
	decode := destinationDecoder(name, keys)
	fail := func(key string, err error) error { return destinationError("", name, key, err) }
	var retry []string
	if err := decode("retry", &retry, "want a list of durations ([1s, 10s, 1m])"); err != nil {
		return err
	}
	if _, ok := keys["retry"]; ok && len(retry) == 0 {
		return fail("retry", fmt.Errorf("%w: empty (omit the key for the default backoff)", forward.ErrRetry))
	}
	for i, r := range retry {
		v, err := time.ParseDuration(r)
		if err != nil {
			return fail("retry", fmt.Errorf("%w: step %d %q: want a duration (10s, 1m)", forward.ErrRetry, i+1, r))
		}
		p.Retry = append(p.Retry, v)
	}
	if err := decode("max_attempts", &p.MaxAttempts, "want a whole number"); err != nil {
		return err
	}
	if _, ok := keys["max_attempts"]; ok && p.MaxAttempts < 1 {
		return fail("max_attempts", fmt.Errorf("%w: %d: want 1 or more", forward.ErrRetry, p.MaxAttempts))
	}
	var timeout string
	if err := decode("timeout", &timeout, "want a duration (10s)"); err != nil {
		return err
	}
	if timeout != "" {
		v, err := time.ParseDuration(timeout)
		if err != nil || v <= 0 {
			return fail("timeout", fmt.Errorf("%q: want a positive duration (10s)", timeout))
		}
		p.Timeout = v
	}
	if err := decode("concurrency", &p.Concurrency, "want a whole number"); err != nil {
		return err
	}
	if _, ok := keys["concurrency"]; ok && p.Concurrency < 1 {
		return fail("concurrency", fmt.Errorf("%w: %d: want 1 or more deliveries in flight per replica", forward.ErrConfig, p.Concurrency))
	}
	if err := decode("rate", &p.Rate, "want a number of messages per second"); err != nil {
		return err
	}
	if _, ok := keys["rate"]; ok && p.Rate <= 0 {
		return fail("rate", fmt.Errorf("%w: %v: want messages per second per replica above 0", forward.ErrConfig, p.Rate))
	}
	if err := decode("park_after", &p.ParkAfter, "want a whole number of consecutive failed attempts"); err != nil {
		return err
	}
	if _, ok := keys["park_after"]; ok && (p.ParkAfter < 1 || p.ParkAfter > 1000) {
		return fail("park_after", fmt.Errorf("%w: %d: want 1 to 1000 consecutive failed attempts (a destination is never left unparked: nothing is disabled silently)", forward.ErrConfig, p.ParkAfter))
	}
	var probe string
	if err := decode("probe", &probe, "want a duration (2s)"); err != nil {
		return err
	}
	if probe != "" {
		v, err := time.ParseDuration(probe)
		if err != nil || v <= 0 || v > forward.ProbeMost {
			return fail("probe", fmt.Errorf("%w: %q: want a duration above 0, at most %v", forward.ErrConfig, probe, forward.ProbeMost))
		}
		p.Probe = v
	}
	return nil
}

// parseDelivery decodes a destination's headers and secrets_env into p,
// reading their variables with getenv when withSecrets.
func parseDelivery(name string, keys map[string]json.RawMessage, rawURL string, p *forward.Policy, getenv func(string) string, withSecrets bool) error {
	decode := destinationDecoder(name, keys)
	fail := func(key string, err error) error { return destinationError("", name, key, err) }
	var headers map[string]json.RawMessage
	if err := decode("headers", &headers, "want a map of header name to {env: VARIABLE} or a string"); err != nil {
		return err
	}
	for _, h := range slices.Sorted(maps.Keys(headers)) {
		hv, err := headerValue(headers[h], getenv, withSecrets)
		if err != nil {
			return fail("headers."+h, fmt.Errorf("%w: %w", forward.ErrHeader, err))
		}
		if p.Headers == nil {
			p.Headers = map[string]forward.HeaderValue{}
		}
		p.Headers[h] = hv
	}
	if err := decode("secrets_env", &p.SecretsEnv, "want a string: the variable holding the destination's whsec_ secrets"); err != nil {
		return err
	}
	if _, ok := keys["secrets_env"]; ok {
		if !forward.NeedsSignature(rawURL) {
			return fail("secrets_env", fmt.Errorf("%w: a %s destination is not signed with secrets of its own: only http(s) ones are", forward.ErrConfig, schemeOf(rawURL)))
		}
		if p.SecretsEnv == "" {
			return fail("secrets_env", errors.New("empty (omit the key to sign with PAYLOCK_FORWARD_SECRETS)"))
		}
		if withSecrets {
			raw := getenv(p.SecretsEnv)
			if raw == "" {
				return fail("secrets_env", fmt.Errorf("%w: %s is empty or not set", errDestinationEnv, p.SecretsEnv))
			}
			secrets, err := source.ParseSecrets(signature.SchemeStandard, raw)
			if err != nil {
				return fail("secrets_env", fmt.Errorf("invalid %s: %w", p.SecretsEnv, err))
			}
			p.Secrets = secrets
		}
	}
	return nil
}

// errDestinationEnv is wrapped when a variable a destination names
// (secrets_env, a header's env) is empty or not set.
var errDestinationEnv = errors.New("a destination's variable is unset")

// headerValue decodes a destination's header: {env: VARIABLE}, read with
// getenv when read is true (it must be set then), or a literal string.
func headerValue(raw json.RawMessage, getenv func(string) string, read bool) (forward.HeaderValue, error) {
	var lit string
	if err := json.Unmarshal(raw, &lit); err == nil {
		return forward.HeaderValue{Value: lit}, nil
	}
	var ref map[string]string
	if err := json.Unmarshal(raw, &ref); err != nil || len(ref) != 1 || ref["env"] == "" {
		return forward.HeaderValue{}, errors.New("want {env: VARIABLE} or a string")
	}
	if !read {
		return forward.HeaderValue{Env: ref["env"]}, nil
	}
	v := getenv(ref["env"])
	if v == "" {
		return forward.HeaderValue{}, fmt.Errorf("%w: %s is empty or not set", errDestinationEnv, ref["env"])
	}
	return forward.HeaderValue{Env: ref["env"], Value: v}, nil
}

// schemeOf is rawURL's scheme, for errors.
func schemeOf(rawURL string) string {
	s, _, _ := strings.Cut(rawURL, "://")
	return strings.ToLower(s)
}
