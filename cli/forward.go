package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/source"
	"github.com/paylock/paylock/store"
)

// routeForwards names the destinations of cfg and specs (forward.NewRoutes)
// for the payment sources, adds the sources file's destinations with their
// policies, routes each source to its forward_to, and compiles the router
// (types, filters, fingerprints); loans and payouts forward nothing of
// their own. withSecrets reads the variables the destinations name
// (secrets_env, headers): the worker needs them, a process that only
// enqueues does not. Every error is a *source.Error naming the file, the
// source or destination, and the field.
func routeForwards(cfg Config, specs []source.Spec, withSecrets bool) (forward.Routes, error) {
	var sources []forward.SourceURL
	for _, s := range specs {
		if s.Adapter != handler.ProviderLoans && s.Adapter != handler.ProviderPayouts {
			sources = append(sources, forward.SourceURL{Source: s.Name, URL: s.ForwardURL})
		}
	}
	file := cfg.Sources.File
	r, err := forward.NewRoutes(cfg.Forward.URL, sources)
	var de *forward.DestinationError
	if errors.As(err, &de) {
		return forward.Routes{}, &source.Error{File: file, Source: de.Source, Field: "forward_url",
			Err: fmt.Errorf("the forward destination %q is PAYLOCK_FORWARD_URL's: rename the source, or give it the same URL", de.Source)}
	}
	if err != nil {
		return forward.Routes{}, err
	}
	data, err := source.ReadFile(file)
	if err != nil {
		return forward.Routes{}, err
	}
	getenv := cfg.getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	dests, err := parseDestinations(file, data, getenv, withSecrets)
	if err != nil {
		return forward.Routes{}, err
	}
	if r.Operations, err = parseOperations(file, data); err != nil {
		return forward.Routes{}, err
	}
	signed := len(cfg.Forward.Secrets) > 0
	for _, name := range slices.Sorted(maps.Keys(dests)) {
		d := dests[name]
		if _, taken := r.Destinations[name]; taken {
			owner := "PAYLOCK_FORWARD_URL's"
			if name != forward.DefaultDestination {
				owner = "source " + strconv.Quote(name) + "'s forward_url"
			}
			return forward.Routes{}, destinationError(file, name, "", fmt.Errorf("%w: the name is %s", forward.ErrDestinationTaken, owner))
		}
		if forward.NeedsSignature(d.URL) && d.Policy.SecretsEnv == "" && !signed {
			return forward.Routes{}, destinationError(file, name, "url", errors.New("an http(s) destination is signed: set PAYLOCK_FORWARD_SECRETS, or secrets_env"))
		}
		r.Destinations[name], r.Policies[name] = d.URL, d.Policy
	}
	if r.Router, err = forward.NewRouter(r.Destinations, r.Policies, signed); err != nil {
		return forward.Routes{}, &source.Error{File: file, Field: "destinations", Err: err}
	}
	if r.Operations != "" {
		if err := r.Router.Check([]string{r.Operations}); err != nil {
			return forward.Routes{}, &source.Error{File: file, Field: "operations.destination", Err: err}
		}
	}
	for _, s := range specs {
		if len(s.ForwardTo) == 0 {
			continue
		}
		if s.Adapter == handler.ProviderLoans || s.Adapter == handler.ProviderPayouts {
			return forward.Routes{}, &source.Error{File: file, Source: s.Name, Field: "forward_to", Err: errors.New("loans and payouts forward nothing of their own")}
		}
		if err := r.Router.Check(s.ForwardTo); err != nil {
			if slices.Contains(s.ForwardTo, forward.DefaultDestination) && cfg.Forward.URL == "" {
				err = fmt.Errorf("%w; default is PAYLOCK_FORWARD_URL, which is not set", err)
			}
			return forward.Routes{}, &source.Error{File: file, Source: s.Name, Field: "forward_to", Err: err}
		}
		r.ForwardTo[s.Name], r.BySource[s.Name] = slices.Clone(s.ForwardTo), s.ForwardTo[0]
	}
	return r, nil
}

// forwardSpecs are the sources the forward worker routes by
// (routeForwards) and reads payloads of: it may run in a process that
// serves no source (paylock worker), so they are the sources' shapes
// (sourceShapes), their secrets unread: a source whose secrets the
// process lacks still names its destination.
// A source forwarding to an http(s) URL needs PAYLOCK_FORWARD_SECRETS
// (source.CheckForwardSigned): the worker signs what it sends.
func forwardSpecs(cfg Config) ([]source.Spec, error) {
	opts := sourceOptions(cfg)
	specs, err := source.Shapes(opts)
	if err != nil {
		return nil, err
	}
	for _, s := range specs {
		if se := source.CheckForwardSigned(s, opts.ForwardSecrets); se != nil {
			// A source's forward_url is always the file's.
			return nil, &source.Error{File: cfg.Sources.File, Source: s.Name, Field: se.Field, Err: se.Err}
		}
	}
	return specs, nil
}

// unsignedMembers returns, for forward.Config.Unsigned, what each source's
// signature leaves uncovered of its payloads (provider.PartlySigned, such
// as an Adyen source without basic_auth_env); nil when no source is partly
// signed.
func unsignedMembers(cfg Config, specs []source.Spec) func(source string, payload []byte) []string {
	partly := map[string]provider.PartlySigned{}
	for _, s := range specs {
		p, ok := provider.Lookup(s.Adapter)
		if !ok {
			continue
		}
		a, err := p.New(provider.Config{Source: s.Name, Settings: s.Settings, Rules: payload.NewRules(cfg.Sources.DefaultCurrency, cfg.Sources.Currencies)})
		if ps, ok := a.(provider.PartlySigned); ok && err == nil {
			partly[s.Name] = ps
		}
	}
	if len(partly) == 0 {
		return nil
	}
	return func(source string, payload []byte) []string {
		if ps, ok := partly[source]; ok {
			return ps.Unsigned(payload)
		}
		return nil
	}
}

// verifiedPayloads returns, for forward.Config.Verified, each source's
// payloads without the signature material they carry
// (provider.SignatureBearer, such as Adyen's hmacSignature); nil when no
// source's payloads carry any.
func verifiedPayloads(cfg Config, specs []source.Spec) func(source string, payload []byte) []byte {
	bearers := map[string]provider.SignatureBearer{}
	for _, s := range specs {
		p, ok := provider.Lookup(s.Adapter)
		if !ok {
			continue
		}
		a, err := p.New(provider.Config{Source: s.Name, Settings: s.Settings, Rules: payload.NewRules(cfg.Sources.DefaultCurrency, cfg.Sources.Currencies)})
		if sb, ok := a.(provider.SignatureBearer); ok && err == nil {
			bearers[s.Name] = sb
		}
	}
	if len(bearers) == 0 {
		return nil
	}
	return func(source string, payload []byte) []byte {
		if sb, ok := bearers[source]; ok {
			return sb.WithoutSignature(payload)
		}
		return payload
	}
}

// forwarding reports whether this deployment forwards anything: whether
// PAYLOCK_FORWARD_URL or a source's forward_url names a destination
// (forwardSpecs, routeForwards). It turns the forward queue on, in serve
// and in "paylock worker" alike. An http(s) destination needs
// PAYLOCK_FORWARD_SECRETS (ForwardConfig.validate, checkSpec); a broker
// destination does not.
func forwarding(cfg Config) (bool, error) {
	if cfg.Forward.URL != "" {
		return true, nil
	}
	specs, err := forwardSpecs(cfg)
	if err != nil {
		return false, err
	}
	routes, err := routeForwards(cfg, specs, false)
	return len(routes.Destinations) > 0, err
}

// newForwardWorker builds the forward worker from cfg, with a sink open
// for each destination (close it with Worker.Close once River has
// stopped); metrics, when not nil, count every attempt
// (paylock_forward_total{outcome}), the jobs left to another replica and
// the destinations' moves, and export their states. It signs with the
// first of PAYLOCK_FORWARD_SECRETS when they are set. Its breaker keeps
// the destinations' health in st, and sends the operator events to the
// sources file's operations destination.
func newForwardWorker(cfg Config, st *store.Store, logger *slog.Logger, metrics *forward.Metrics) (*forward.Worker, func(), error) {
	specs, err := forwardSpecs(cfg)
	if err != nil {
		return nil, nil, err
	}
	routes, err := routeForwards(cfg, specs, true)
	if err != nil {
		return nil, nil, err
	}
	pacer, closePacer, err := forwardPacer(cfg, routes.Policies, logger)
	if err != nil {
		return nil, nil, err
	}
	var secret signature.Secret
	var others []signature.Secret
	if len(cfg.Forward.Secrets) > 0 {
		secret, others = cfg.Forward.Secrets[0], cfg.Forward.Secrets[1:]
	}
	logger.Info("forwarding", slog.Any("destinations", routes.Destinations.Redacted()), slog.Bool("signed", len(cfg.Forward.Secrets) > 0))
	var observe func(forward.Event)
	var mismatch, paceFallback func(string)
	var moved func(string, store.DestinationState)
	if metrics != nil {
		observe, mismatch, moved, paceFallback = metrics.Observe, metrics.Mismatch, metrics.Moved, metrics.PaceFallback
	}
	w, err := forward.New(forward.Config{
		Secret:       secret,
		OtherSecrets: others,
		Destinations: routes.Destinations,
		Policies:     routes.Policies,
		Health:       st.Outbox(),
		Operations:   routes.Operations,
		Moved:        moved,
		Mismatch:     mismatch,
		Timeout:      cfg.Forward.Timeout,
		Backoff:      cfg.Forward.backoff(),
		Concurrency:  cfg.Forward.Concurrency,
		// A quarter of the pool the intake shares: PAYLOCK_FORWARD_CONCURRENCY
		// workers must not hold every connection when the database slows.
		Reads:        max(1, int(st.Pool().Config().MaxConns)/4),
		Logger:       logger,
		Observe:      observe,
		Unsigned:     unsignedMembers(cfg, specs),
		Verified:     verifiedPayloads(cfg, specs),
		Pacer:        pacer,
		PaceFallback: paceFallback,
		// The no-op provider with tracing off: an attempt's span then
		// costs nothing (the global one's would still be made).
		TracerProvider: cfg.Telemetry.tracerProvider(),
	}, st.Payments())
	if err != nil {
		closePacer()
		return nil, nil, err
	}
	if metrics != nil {
		metrics.Watch(w)
	}
	return w, closePacer, nil
}

// forwardPacer is the pacer that shares the destinations' concurrency and
// rate among the replicas (lock.Pacer, on the lock's Redis, its keys under
// PAYLOCK_LOCK_PREFIX), with the function that closes its client; nil
// when no destination has either, or with PAYLOCK_LOCK=off (no Redis is
// expected then: each replica paces on its own, as it says).
func forwardPacer(cfg Config, policies map[string]forward.Policy, logger *slog.Logger) (forward.Pacer, func(), error) {
	var paced []string
	for name, p := range policies {
		if p.Concurrency > 0 || p.Rate > 0 {
			paced = append(paced, name)
		}
	}
	if len(paced) == 0 {
		return nil, func() {}, nil
	}
	slices.Sort(paced)
	if cfg.Lock.Off {
		logger.Warn("forward: destinations' concurrency and rate are paced by each replica on its own (PAYLOCK_LOCK=off: no Redis to share them)",
			slog.Any("destinations", paced))
		return nil, func() {}, nil
	}
	rdb, err := cfg.Lock.Redis.open()
	if err != nil {
		return nil, nil, err
	}
	return lock.NewPacer(rdb, cfg.Lock.Prefix), func() { _ = rdb.Close() }, nil
}

const forwardUsage = `Usage:
  paylock forward list [--discarded] [--since T] [--limit N] [--json] [flags]
  paylock forward destinations [--json] [flags]
  paylock forward retry <id>|--discarded [flags]
  paylock forward replay --source S (--since T [--until T] | --transaction ID) [--dry-run] [flags]
  paylock forward resume <destination> [flags]
  paylock forward recover <destination> --since T [--until T] [flags]

list prints forward jobs, newest first (at most --limit, default 50): id,
state, attempts, what is forwarded (source/transaction_id, or the loan and
tranche) and to which destination (default: PAYLOCK_FORWARD_URL; a
source's own forward_url is named after the source), when it was created
and last attempted, and the last error.
--discarded lists only those River gave up on (discarded after their last
attempt, or cancelled because the payment is gone). --since lists only
those created since T: an RFC 3339 time or a duration ago (72h, 3d,
1d12h). --json prints a JSON
array of the jobs instead of the table (id, webhook_id, state, attempt,
max_attempts, type, subject, source, transaction_id, loan_id, tranche,
destination, created_at, last_attempt_at, finalized_at, last_error).

destinations prints each destination with its state, backlog, failing
and recently discarded jobs, lag and last error ("paylock forward
destinations -h").

retry puts forward job <id>, or with --discarded every discarded or
cancelled one, back in the queue at once, with one more attempt if it had
used them all. The forward worker (serve, or "paylock worker") sends it.

replay forwards stored payments again with their original webhook-ids
("paylock forward replay -h").

resume brings a parked destination back at once and releases its waiting
jobs ("paylock forward resume -h"); recover puts back what a destination
gave up in a window ("paylock forward recover -h").

The other flags are those of "paylock serve -h" (DATABASE_URL...).
`

// forwardArgs are the subcommand's own flags, taken out of the arguments
// before the serve flags are parsed.
type forwardArgs struct {
	discarded bool
	limit     int
	since     time.Time // list's --since: created at or after it
	id        int64
	rest      []string
}

func parseForwardArgs(sub string, args []string) (forwardArgs, error) {
	fa := forwardArgs{limit: 50}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-") && sub == "retry" && fa.id == 0:
			id, err := strconv.ParseInt(a, 10, 64)
			if err != nil || id < 1 {
				return fa, fmt.Errorf("invalid job id %q: want a positive integer", a)
			}
			fa.id = id
		case strings.HasPrefix(a, "-") && name == "discarded" && !hasValue:
			fa.discarded = true
		case strings.HasPrefix(a, "-") && name == "since" && sub == "list":
			if !hasValue {
				if i+1 >= len(args) {
					return fa, errors.New("--since needs a value such as 3d")
				}
				i++
				value = args[i]
			}
			t, err := parseReplayTime(value, time.Now())
			if err != nil {
				return fa, fmt.Errorf("invalid --since %v", err)
			}
			fa.since = t
		case strings.HasPrefix(a, "-") && name == "limit" && sub == "list":
			if !hasValue {
				if i+1 >= len(args) {
					return fa, errors.New("--limit needs a number")
				}
				i++
				value = args[i]
			}
			n, err := positiveInt(value)
			if err != nil {
				return fa, fmt.Errorf("invalid --limit %q: %v", value, err)
			}
			fa.limit = n
		default:
			fa.rest = append(fa.rest, a)
		}
	}
	if sub == "retry" && (fa.id == 0) == !fa.discarded {
		return fa, errors.New("give one job id or --discarded")
	}
	return fa, nil
}

// forwardListCommand is "paylock forward list".
var forwardListCommand = Command[*forwardOpts]{
	Name: "paylock forward list", Usage: forwardUsage, Open: OpenStore,
	New: func() *forwardOpts { return &forwardOpts{sub: "list"} },
	Run: func(ctx context.Context, b *Base, o *forwardOpts) error {
		jobs, err := b.Store.Outbox().ForwardJobs(ctx, store.ForwardJobFilter{GivenUp: o.discarded, Limit: o.limit, Since: o.since})
		if err != nil {
			return err
		}
		return printForwards(b.Stdout, jobs, o.discarded, o.json)
	},
}

// forwardRetryCommand is "paylock forward retry".
var forwardRetryCommand = Command[*forwardOpts]{
	Name: "paylock forward retry", Usage: forwardUsage, Open: OpenStore,
	New: func() *forwardOpts { return &forwardOpts{sub: "retry"} },
	Run: func(ctx context.Context, b *Base, o *forwardOpts) error {
		if o.discarded {
			n, err := b.Store.Outbox().RetryGivenUpForwards(ctx)
			if err != nil {
				return fmt.Errorf("%v (%d put back before the error)", err, n)
			}
			b.Printf("put %d discarded or cancelled forward jobs back in the queue\n", n)
			return nil
		}
		j, err := b.Store.Outbox().RetryForward(ctx, o.id)
		if err != nil {
			return err
		}
		b.Printf("forward job %d (%s %s to %s) is %s: attempt %d of %d so far\n",
			j.ID, j.Args.Type, forwardSubject(j.Args), j.Args.Target(), j.State, j.Attempt, j.MaxAttempts)
		return nil
	},
}

// forwardOpts are the options of "forward list" and "forward retry".
type forwardOpts struct {
	sub string // list or retry
	forwardArgs
	listOpts // list's --json
}

func (o *forwardOpts) Parse(args []string) (rest []string, err error) {
	if o.sub == "list" {
		args = o.listOpts.cut(args)
	}
	o.forwardArgs, err = parseForwardArgs(o.sub, args)
	return o.rest, err
}

func (o *forwardOpts) Validate(*Config) error { return nil }

// forwardSubject names what a forward job sends on.
func forwardSubject(a store.ForwardArgs) string {
	if a.Disbursement != nil {
		return fmt.Sprintf("loan %s tranche %d", a.Disbursement.LoanID, a.Disbursement.Tranche)
	}
	return a.Source + "/" + a.TransactionID
}

// forwardRow is one forward job as "forward list --json" prints it.
type forwardRow struct {
	ID            int64      `json:"id"`
	WebhookID     string     `json:"webhook_id"`
	State         string     `json:"state"`
	Attempt       int        `json:"attempt"`
	MaxAttempts   int        `json:"max_attempts"`
	Type          string     `json:"type"`
	Subject       string     `json:"subject"`
	Source        string     `json:"source"`         // a payment's; "" for a disbursement
	TransactionID string     `json:"transaction_id"` // a payment's; "" for a disbursement
	LoanID        string     `json:"loan_id"`        // a disbursement's; "" for a payment
	Tranche       int        `json:"tranche"`        // a disbursement's; 0 for a payment
	Destination   string     `json:"destination"`
	CreatedAt     *time.Time `json:"created_at"`
	LastAttemptAt *time.Time `json:"last_attempt_at"` // null before the first attempt
	FinalizedAt   *time.Time `json:"finalized_at"`    // null until completed, cancelled or discarded
	LastError     string     `json:"last_error"`
}

func newForwardRow(j store.ForwardJob) forwardRow {
	r := forwardRow{ID: j.ID, WebhookID: j.Args.ID, State: j.State, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		Type: j.Args.Type, Subject: forwardSubject(j.Args), Source: j.Args.Source, TransactionID: j.Args.TransactionID,
		Destination: j.Args.Target(), CreatedAt: jsonTime(j.CreatedAt), LastAttemptAt: jsonTime(j.AttemptedAt),
		FinalizedAt: jsonTime(j.FinalizedAt), LastError: j.LastError}
	if d := j.Args.Disbursement; d != nil {
		r.LoanID, r.Tranche = d.LoanID, d.Tranche
	}
	return r
}

func printForwards(w io.Writer, jobs []store.ForwardJob, givenUp, asJSON bool) error {
	empty := "no forward jobs"
	if givenUp {
		empty = "no discarded or cancelled forward jobs"
	}
	rows := make([]forwardRow, len(jobs))
	for i, j := range jobs {
		rows[i] = newForwardRow(j)
	}
	return printList(w, asJSON, rows, table[forwardRow]{
		header: []string{"ID", "STATE", "ATTEMPTS", "TYPE", "SUBJECT", "DESTINATION", "CREATED", "LAST_ATTEMPT", "FINALIZED", "LAST_ERROR"},
		empty:  empty,
		cells: func(r forwardRow) []string {
			return []string{strconv.FormatInt(r.ID, 10), r.State, fmt.Sprintf("%d/%d", r.Attempt, r.MaxAttempts), r.Type, r.Subject,
				r.Destination, stamp(deref(r.CreatedAt)), stamp(deref(r.LastAttemptAt)), stamp(deref(r.FinalizedAt)), r.LastError}
		},
	})
}

// deref is *t, or the zero time for nil.
func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
