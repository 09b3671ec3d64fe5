package forward

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// Routing: which messages go to which destination, and how each
// destination is tried.
//
// A sender (a payment source) forwards to a list of destinations
// (forward_to); each destination takes the messages whose type matches one
// of its Types and for which its Filter is true. One job is enqueued per
// (message, destination) taking it, in the transaction that records the
// message (store.ForwardRouter), so that each destination has its own
// attempts, retry schedule and order per payment; a message a destination
// refuses is never enqueued for it.
//
// Each job carries its destination's fingerprint (Fingerprint): a hash of
// what the destination is (URL, scheme, signing, headers: never a secret
// or a header's value). A replica whose definition of the destination has
// another fingerprint leaves the job to one that agrees (snooze, no
// attempt spent) and counts it (Config.Mismatch).

// Policy is a destination's routing and delivery settings beside its URL
// (Destinations). The zero Policy takes every type, has no filter and
// uses the worker's settings (Config).
type Policy struct {
	// Types are the message types the destination takes: an exact type
	// (payment.refunded), a prefix and ".*" (payment.*: payment.recorded,
	// payment.dispute.opened...), or "*". Empty: every type.
	Types []string
	// Filter is an expression (github.com/expr-lang/expr) over the
	// message, {type, data}, that must be true for the destination to
	// take it: `data.amount >= 1000 && data.currency == "EUR"`. Empty:
	// no filter.
	Filter string
	// Retry is the wait after failed attempt n: Retry[n-1], the last step
	// repeating. Empty: Config.Backoff.
	Retry []time.Duration
	// MaxAttempts is the attempts of one of its jobs; 0: the store's
	// (PAYLOCK_FORWARD_MAX_ATTEMPTS).
	MaxAttempts int
	// Timeout bounds one delivery; 0: Config.Timeout.
	Timeout time.Duration
	// Concurrency caps the destination's deliveries in flight at once in
	// one process (a replica), within Config.Concurrency; 0: no cap of its
	// own. Rate caps the deliveries it starts per second in one process;
	// 0: none. A job over either waits (snoozed, no attempt spent). They
	// are tuning, not definition: not part of the fingerprint.
	Concurrency int
	Rate        float64
	// ParkAfter is the consecutive failed attempts (by one replica), with
	// no success for ParkStreak, that park the destination (breaker.go);
	// 0: DefaultParkAfter. Probe is the wait
	// before the first probe of it parked; 0: DefaultProbe. Tuning, not
	// definition: not part of the fingerprint.
	ParkAfter int
	Probe     time.Duration
	// Headers are added to each message's headers, by name.
	Headers map[string]HeaderValue
	// SecretsEnv names the variable holding Secrets, the destination's own
	// Standard Webhooks secrets (http(s) only): the first signs, the
	// others add their entries during a rotation. Empty: the worker's
	// (PAYLOCK_FORWARD_SECRETS).
	SecretsEnv string
	Secrets    []signature.Secret
}

// HeaderValue is a header's value and where it comes from: Env, the
// variable it was read from ("" for a literal in the file). Only Env is
// part of the destination's fingerprint, never Value.
type HeaderValue struct {
	Env   string
	Value string
}

// Errors of a destination's Policy (NewRouter); each wraps ErrConfig too.
var (
	ErrTypePattern = errors.New("forward: bad type pattern")
	ErrFilter      = errors.New("forward: bad filter")
	ErrRetry       = errors.New("forward: bad retry schedule")
	ErrHeader      = errors.New("forward: bad header")
	// ErrUnknownDestination is wrapped when a sender forwards to a
	// destination that is not defined.
	ErrUnknownDestination = errors.New("forward: unknown destination")
)

// typePattern is a Policy.Types entry: a type or prefix of lower-case
// segments, optionally ending in ".*"; or "*".
var typePattern = regexp.MustCompile(`^(\*|[a-z0-9_]+(\.[a-z0-9_]+)*(\.\*)?)$`)

// messageFamilies are the first segments of every message type paylock
// forwards: a pattern naming another family would match nothing.
var messageFamilies = []string{"payment", "disbursement", "order", "destination", "message"}

// checkType refuses a Policy.Types entry that is not a pattern, or that
// names no family of messages paylock forwards.
func checkType(p string) error {
	if !typePattern.MatchString(p) {
		return fmt.Errorf("%w %q: want a type (payment.refunded), a prefix and .* (payment.*), or *", ErrTypePattern, p)
	}
	if fam, _, _ := strings.Cut(p, "."); p != "*" && !slices.Contains(messageFamilies, fam) {
		return fmt.Errorf("%w %q: no message type starts with %q (want %s)", ErrTypePattern, p, fam, strings.Join(messageFamilies, ", "))
	}
	return nil
}

// matchType reports whether message type t matches pattern p.
func matchType(p, t string) bool {
	switch {
	case p == "*":
		return true
	case strings.HasSuffix(p, ".*"):
		return strings.HasPrefix(t, p[:len(p)-1])
	}
	return p == t
}

// headerName is a header name a destination may set: an HTTP token, not
// one the worker writes itself.
var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

var ownHeaders = []string{HeaderID, HeaderTimestamp, HeaderSignature, "traceparent", "tracestate", "content-type", "user-agent"}

// filterEnv is what a filter is compiled against: the message's type and
// data, whose members are known only when it runs.
func filterEnv() map[string]any { return map[string]any{"type": "", "data": map[string]any{}} }

// route is one destination as a Router holds it: its policy compiled.
type route struct {
	name    string
	url     string
	policy  Policy
	program *vm.Program // nil: no filter
	// afterRecord: the filter names received_at, which a payment has only
	// once recorded (store.ErrRouteAfterRecord).
	afterRecord bool
	fingerprint string
	// signer signs with Policy.Secrets; nil: the destination has none of
	// its own (the worker's sign).
	signer *signature.StandardSigner
}

// Router routes messages to destinations (Route) and knows each
// destination's fingerprint and delivery settings. Build it once at
// start-up (NewRouter); it is safe for concurrent use.
type Router struct {
	routes map[string]*route
}

// NewRouter checks and compiles each destination's policy (a destination
// without one takes the zero Policy). defaultSigned says whether the
// worker's own secrets (PAYLOCK_FORWARD_SECRETS) are set: it is part of a
// destination's fingerprint. Its errors wrap ErrConfig and one of
// ErrTypePattern, ErrFilter, ErrRetry, ErrHeader, and name the destination.
func NewRouter(dests Destinations, policies map[string]Policy, defaultSigned bool) (*Router, error) {
	r := &Router{routes: map[string]*route{}}
	for _, name := range slices.Sorted(maps.Keys(policies)) {
		if _, ok := dests[name]; !ok {
			return nil, fmt.Errorf("%w: %w %q: a policy without a URL", ErrConfig, ErrUnknownDestination, name)
		}
	}
	for _, name := range dests.Names() {
		rt, err := compileRoute(name, dests[name], policies[name], defaultSigned)
		if err != nil {
			return nil, fmt.Errorf("%w: destination %q: %w", ErrConfig, name, err)
		}
		r.routes[name] = rt
	}
	return r, nil
}

func compileRoute(name, rawURL string, p Policy, defaultSigned bool) (*route, error) {
	rt := &route{name: name, url: rawURL, policy: p}
	for _, t := range p.Types {
		if err := checkType(t); err != nil {
			return nil, err
		}
	}
	if strings.TrimSpace(p.Filter) != "" {
		prog, err := expr.Compile(p.Filter, expr.Env(filterEnv()), expr.AsBool())
		if err != nil {
			return nil, fmt.Errorf("%w: %s", ErrFilter, strings.Join(strings.Fields(err.Error()), " "))
		}
		rt.program, rt.afterRecord = prog, strings.Contains(p.Filter, "received_at")
	}
	for i, d := range p.Retry {
		if d <= 0 || d > 24*time.Hour {
			return nil, fmt.Errorf("%w: step %d is %v: want a duration above 0 and at most 24h", ErrRetry, i+1, d)
		}
	}
	if p.MaxAttempts < 0 || p.MaxAttempts > 1000 {
		return nil, fmt.Errorf("%w: max_attempts %d: want 1 to 1000", ErrRetry, p.MaxAttempts)
	}
	if p.Concurrency < 0 || p.Concurrency > 10000 {
		return nil, fmt.Errorf("%w: concurrency %d: want 1 to 10000", ErrConfig, p.Concurrency)
	}
	if p.Rate < 0 || p.Rate > 100000 || p.Rate != p.Rate {
		return nil, fmt.Errorf("%w: rate %v: want a number of messages per second above 0, at most 100000", ErrConfig, p.Rate)
	}
	if p.Timeout < 0 {
		return nil, fmt.Errorf("%w: timeout %v: want a positive duration", ErrConfig, p.Timeout)
	}
	if p.ParkAfter < 0 || p.ParkAfter > 1000 {
		return nil, fmt.Errorf("%w: park_after %d: want 1 to 1000 consecutive failed attempts", ErrConfig, p.ParkAfter)
	}
	if p.Probe < 0 || p.Probe > ProbeMost {
		return nil, fmt.Errorf("%w: probe %v: want a duration above 0, at most %v", ErrConfig, p.Probe, ProbeMost)
	}
	for _, h := range slices.Sorted(maps.Keys(p.Headers)) {
		if !headerName.MatchString(h) || slices.Contains(ownHeaders, strings.ToLower(h)) {
			return nil, fmt.Errorf("%w %q: want a header name that paylock does not set itself (%s)", ErrHeader, h, strings.Join(ownHeaders, ", "))
		}
		if v := p.Headers[h]; v.Env == "" && v.Value == "" || strings.ContainsAny(v.Value, "\r\n") {
			return nil, fmt.Errorf("%w %q: empty, or holding a line break", ErrHeader, h)
		}
	}
	if p.SecretsEnv != "" && !NeedsSignature(rawURL) {
		return nil, fmt.Errorf("%w: secrets_env %s: its sink may send unsigned, so it has no secrets of its own: only a destination that takes signed messages only (an http(s) receiver) has", ErrConfig, p.SecretsEnv)
	}
	if len(p.Secrets) > 0 {
		signer, err := signature.NewStandardSigner(p.Secrets)
		if err != nil {
			return nil, fmt.Errorf("%w: secrets_env %s: %w", ErrConfig, p.SecretsEnv, err)
		}
		rt.signer = signer
	}
	rt.fingerprint = fingerprint(rawURL, p, defaultSigned)
	return rt, nil
}

// fingerprint hashes what a destination is: its URL and scheme, how it is
// signed (the variable its secrets come from, never a secret), its type
// patterns and filter, and its headers' names and variables (never a
// value). Two replicas with the same fingerprint send the same messages to
// the same place the same way.
func fingerprint(rawURL string, p Policy, defaultSigned bool) string {
	scheme := ""
	if u, err := url.Parse(rawURL); err == nil {
		scheme = strings.ToLower(u.Scheme)
	}
	signing := "unsigned"
	switch {
	case p.SecretsEnv != "":
		signing = "env:" + p.SecretsEnv
	case defaultSigned:
		signing = "env:PAYLOCK_FORWARD_SECRETS"
	}
	h := sha256.New()
	fmt.Fprintf(h, "url\x00%s\x00scheme\x00%s\x00signing\x00%s\x00types\x00%s\x00filter\x00%s\x00",
		rawURL, scheme, signing, strings.Join(p.Types, ","), strings.TrimSpace(p.Filter))
	for _, name := range slices.Sorted(maps.Keys(p.Headers)) {
		fmt.Fprintf(h, "header\x00%s\x00%s\x00", strings.ToLower(name), p.Headers[name].Env)
	}
	return "fp1_" + hex.EncodeToString(h.Sum(nil))[:24]
}

// Fingerprint returns destination name's fingerprint; "" when the router
// has no such destination.
func (r *Router) Fingerprint(name string) string {
	if rt, ok := r.routes[name]; ok {
		return rt.fingerprint
	}
	return ""
}

// Check reports whether every one of names is a destination of the
// router: errors wrap ErrUnknownDestination and name the first that is
// not.
func (r *Router) Check(names []string) error {
	for _, n := range names {
		if _, ok := r.routes[n]; !ok {
			return fmt.Errorf("%w %q (destinations: %s)", ErrUnknownDestination, n, strings.Join(slices.Sorted(maps.Keys(r.routes)), ", "))
		}
	}
	return nil
}

// Route returns the store.ForwardRouter of a sender forwarding to names
// (which Check accepted): each message goes to every one of them whose
// types and filter take it, with its fingerprint and max attempts. A
// filter that fails on a message (a member it compares is missing)
// refuses it, and so does a type that matches no pattern. A filter that
// names received_at routes a payment.recorded message only once its
// payment is recorded (store.ErrRouteAfterRecord): in the recording
// transaction.
func (r *Router) Route(names []string) store.ForwardRouter {
	names = slices.Clone(names)
	return func(_ context.Context, a store.ForwardArgs, p *store.Payment) ([]store.ForwardTarget, error) {
		var env map[string]any
		var out []store.ForwardTarget
		for _, n := range names {
			rt, ok := r.routes[n]
			if !ok {
				return nil, fmt.Errorf("%w: %w %q", store.ErrForward, ErrUnknownDestination, n)
			}
			if !rt.takesType(a.Type) {
				continue
			}
			if rt.program != nil {
				if rt.afterRecord && p != nil && p.ReceivedAt.IsZero() {
					return nil, store.ErrRouteAfterRecord
				}
				if env == nil {
					var err error
					if env, err = filterInput(a, p); err != nil {
						return nil, err
					}
				}
				if ok, err := expr.Run(rt.program, env); err != nil || ok != true {
					continue
				}
			}
			out = append(out, store.ForwardTarget{Destination: n, Fingerprint: rt.fingerprint, MaxAttempts: rt.policy.MaxAttempts})
		}
		return out, nil
	}
}

// Takes reports whether destination name takes a message of type t with
// data (any JSON-shaped value): its types and filter. For tests and the
// documentation's examples.
func (r *Router) Takes(name, t string, data map[string]any) bool {
	rt, ok := r.routes[name]
	if !ok || !rt.takesType(t) {
		return false
	}
	if rt.program == nil {
		return true
	}
	ok2, err := expr.Run(rt.program, map[string]any{"type": t, "data": data})
	return err == nil && ok2 == true
}

func (rt *route) takesType(t string) bool {
	if len(rt.policy.Types) == 0 {
		return true
	}
	return slices.ContainsFunc(rt.policy.Types, func(p string) bool { return matchType(p, t) })
}

// filterInput is a filter's input for the message of a: {type, data},
// data as the message carries it (the payment's for payment.recorded, p),
// decoded from its JSON so that a filter sees the names a receiver does.
func filterInput(a store.ForwardArgs, p *store.Payment) (map[string]any, error) {
	d, err := messageData(a, p, nil, nil)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("forward: filter input: %w", err)
	}
	var data map[string]any
	if err := json.Unmarshal(b, &data); err != nil {
		return nil, fmt.Errorf("forward: filter input: %w", err)
	}
	return map[string]any{"type": a.Type, "data": data}, nil
}

// parkAfter is p.ParkAfter or its default.
func (p Policy) parkAfter() int {
	if p.ParkAfter > 0 {
		return p.ParkAfter
	}
	return DefaultParkAfter
}

// probe is p.Probe or its default.
func (p Policy) probe() time.Duration {
	if p.Probe > 0 {
		return p.Probe
	}
	return DefaultProbe
}

// names returns the router's destinations, sorted.
func (r *Router) names() []string { return slices.Sorted(maps.Keys(r.routes)) }

// policy returns destination name's route; nil when the router has none.
func (r *Router) route(name string) *route {
	if r == nil {
		return nil
	}
	return r.routes[name]
}
