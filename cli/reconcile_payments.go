package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/store"
)

const reconcilePaymentsUsage = `Usage: paylock reconcile payments --source stripe [--since 72h] [--dry-run] [flags]

Lists the successful payment events of the source's provider created within
--since (Stripe: GET {PAYLOCK_STRIPE_API_URL}/v1/events for each event type
the source records, with STRIPE_API_KEY) and gives each one to the pipeline a
webhook of the source takes (same adapter, lock, insert and forward job),
without the signature check: the body comes from the provider's API.

  recorded_now   paylock had not recorded the payment; it is recorded now
                 (--dry-run: "would_record", and nothing is written)
  mismatch       paylock recorded the transaction id with other content
  error          the event could not be settled (it is tried again next run)

--source is a source of adapter stripe (default "stripe"); --since a Go
duration or whole days (default 72h). A second run right after finds nothing
missing. Exit status: 0 when every event was already recorded, 1 when one
was missing or mismatched (or the check could not run), 2 on usage or
configuration errors. PAYLOCK_RECONCILE_INTERVAL runs it inside serve.
The other flags are those of "paylock serve -h".
`

// defaultStripeURL is the default of PAYLOCK_STRIPE_API_URL: Stripe's API.
const defaultStripeURL = "https://api.stripe.com"

// reconcileSettings configure reconciliation against a provider's API.
type reconcileSettings struct {
	Interval  time.Duration // PAYLOCK_RECONCILE_INTERVAL: serve's periodic job; 0 is off
	Window    time.Duration // PAYLOCK_RECONCILE_WINDOW: how far back the periodic job looks
	StripeURL string        // PAYLOCK_STRIPE_API_URL

	stripeKey string // STRIPE_API_KEY; never printed
}

// reconcileInterval parses PAYLOCK_RECONCILE_INTERVAL: 0 (off) or at least
// a minute.
func reconcileInterval(c *config, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	if d != 0 && d < time.Minute {
		return errors.New("must be 0 (off) or at least 1m")
	}
	c.Reconcile.Interval = d
	return nil
}

// newPipeline is the handler of serve and of "reconcile payments": the same
// sources, adapters, locks and record hooks, so that a payment reconciled
// from the provider's API takes the steps of its webhook.
func newPipeline(cfg config, logger *slog.Logger, sources []handler.Source, st *store.Store, rdb redis.UniversalClient, metrics *handler.Metrics, checks []handler.Check) (*handler.Handler, error) {
	return handler.New(handler.Config{
		LockTTL:          cfg.LockTTL,
		LockWait:         lockWait(cfg.LockWait),
		FinishedTTL:      lockWait(cfg.LockFinishedTTL),
		RequestTimeout:   cfg.RequestTimeout,
		LockPrefix:       cfg.LockPrefix,
		MaxBody:          cfg.MaxBody,
		DefaultCurrency:  cfg.DefaultCurrency,
		Currencies:       cfg.Currencies,
		RedisUnavailable: cfg.RedisUnavailable,
		NoLock:           cfg.NoLock,
		Sources:          sources,
		MaxInFlight:      cfg.MaxInflight,
		Metrics:          metrics,
		Checks:           checks,
		Version:          buildVersion(),
		Logger:           logger,
		Disbursements:    st.Disbursements(),
	}, lock.New(rdb, lock.WithObserver(metrics.LockObserver())), st.Payments())
}

// openPipeline builds serve's handler over st outside serve (reconcile
// payments, paylock worker): the same sources with their forward hooks,
// a Redis client of its own (closed by closeRedis), and metrics nobody
// scrapes.
func openPipeline(cfg config, st *store.Store, logger *slog.Logger) (h *handler.Handler, sources []handler.Source, closeRedis func(), err error) {
	sources, routes, err := handlerSources(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, nil, err
	}
	forwardOnRecord(sources, routes, st)
	rdb, err := newRedis(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	h, err = newPipeline(cfg, logger, sources, st, rdb, handler.NewMetrics(prometheus.NewRegistry(), cfg.LockTTL), nil)
	if err != nil {
		rdb.Close()
		return nil, nil, nil, err
	}
	return h, sources, func() { rdb.Close() }, nil
}

// listers are the names of the registered providers that can list their
// events (provider.Lister): the adapters whose sources can be reconciled.
func listers() []string { return providersWhere(isLister) }

func isLister(p provider.Provider) bool {
	_, ok := p.(provider.Lister)
	return ok
}

// reconcilable returns the source named name if its provider can list its
// events.
func reconcilable(sources []handler.Source, name string) (handler.Source, error) {
	for _, s := range sources {
		if s.Name != name {
			continue
		}
		if p, ok := provider.Lookup(s.Provider); !ok || !isLister(p) {
			return s, fmt.Errorf("source %q has adapter %q: only %s sources can be reconciled", name, s.Provider, orList(listers()))
		}
		return s, nil
	}
	return handler.Source{}, fmt.Errorf("no source %q (PAYLOCK_SOURCES_FILE)", name)
}

// reconciler is the reconciliation of src, a reconcilable source, through
// h: its provider's API at PAYLOCK_STRIPE_API_URL with STRIPE_API_KEY.
func reconciler(cfg config, src handler.Source, h *handler.Handler, dryRun bool) (reconcile.Payments, error) {
	p, _ := provider.Lookup(src.Provider)
	l, err := p.(provider.Lister).NewLister(provider.ListerConfig{
		Source: src.Name, Settings: src.Settings, URL: cfg.Reconcile.StripeURL, Key: cfg.Reconcile.stripeKey,
	})
	if err != nil {
		return reconcile.Payments{}, fmt.Errorf("source %q: %w", src.Name, err)
	}
	return reconcile.Payments{Source: src.Name, Events: l, Handler: h, DryRun: dryRun}, nil
}

// cutBool removes --name (or --name=true/false) from args.
func cutBool(args []string, name string) (on bool, rest []string) {
	for _, a := range args {
		switch strings.TrimLeft(a, "-") {
		case name, name + "=true":
			if strings.HasPrefix(a, "-") {
				on = true
				continue
			}
		case name + "=false":
			if strings.HasPrefix(a, "-") {
				on = false
				continue
			}
		}
		rest = append(rest, a)
	}
	return on, rest
}

// runReconcilePayments implements "paylock reconcile payments".
func runReconcilePayments(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	const name = "paylock reconcile payments"
	if isHelp(args) {
		fmt.Fprint(stdout, reconcilePaymentsUsage)
		return 0
	}
	dryRun, args := cutBool(args, "dry-run")
	sourceName, found, args, err := cutFlag(args, "source")
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v (e.g. stripe)\n", name, err)
		return 2
	}
	if !found {
		sourceName = "stripe"
	}
	value, found, args, err := cutFlag(args, "since")
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v (e.g. 72h)\n", name, err)
		return 2
	}
	since := 72 * time.Hour
	if found {
		if since, err = parseAge(value); err != nil {
			fmt.Fprintf(stderr, "%s: invalid --since %q: %v\n", name, value, err)
			return 2
		}
	}
	cfg, code, ok := subcommandConfig(name, reconcilePaymentsUsage, "", args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	logger := newLogger(cfg, stderr)
	sources, _, err := handlerSources(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	src, err := reconcilable(sources, sourceName)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if cfg.Reconcile.stripeKey == "" {
		fmt.Fprintf(stderr, "%s: STRIPE_API_KEY is required: the secret key events are listed with\n", name)
		return 2
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	defer st.Close()
	h, _, closeRedis, err := openPipeline(cfg, st, logger)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	defer closeRedis()
	run, err := reconciler(cfg, src, h, dryRun)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	from := time.Now().Add(-since)
	rep, err := run.Run(ctx, from)
	printPaymentsReport(stdout, src.Name, from, rep, dryRun)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	if !rep.Clean() {
		return 1
	}
	return 0
}

// printPaymentsReport writes one line per difference, then the counts.
func printPaymentsReport(w io.Writer, source string, from time.Time, rep reconcile.Report, dryRun bool) {
	recorded := "recorded_now"
	if dryRun {
		recorded = "would_record"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, ref := range rep.Recorded {
		fmt.Fprintf(tw, "%s\t%s\t\n", recorded, ref)
	}
	for _, d := range rep.Mismatched {
		fmt.Fprintf(tw, "mismatch\t%s\t%s\t%s\n", d.Ref, d.EventID, oneLine(d.Err.Error()))
	}
	for _, d := range rep.Errors {
		fmt.Fprintf(tw, "error\t%s\t%s\t%s\n", d.Ref, d.EventID, oneLine(d.Err.Error()))
	}
	tw.Flush()
	fmt.Fprintf(w, "%s: %d events since %s: %d already recorded, %d %s, %d mismatched, %d errors, %d ignored\n",
		source, rep.Seen, from.UTC().Format(time.RFC3339), rep.AlreadyRecorded, rep.RecordedNow,
		strings.ReplaceAll(recorded, "_", " "), len(rep.Mismatched), len(rep.Errors), rep.Ignored)
}

// reconcileWorker is serve's periodic reconciliation
// (PAYLOCK_RECONCILE_INTERVAL) of every source whose provider lists its
// events (stripe), through h; nil when the interval is off, or there is no
// such source or no STRIPE_API_KEY (logged).
func reconcileWorker(cfg config, sources []handler.Source, h *handler.Handler, reg prometheus.Registerer, logger *slog.Logger) *reconcile.Worker {
	if cfg.Reconcile.Interval == 0 {
		return nil
	}
	runs := map[string]reconcile.Payments{}
	var names []string
	for _, s := range sources {
		if _, err := reconcilable(sources, s.Name); err != nil {
			continue
		}
		run, err := reconciler(cfg, s, h, false)
		if err != nil {
			logger.Warn("a source cannot be reconciled", slog.String("source", s.Name), slog.Any("error", err))
			continue
		}
		runs[s.Name] = run
		names = append(names, s.Name)
	}
	switch {
	case len(runs) == 0:
		logger.Warn("PAYLOCK_RECONCILE_INTERVAL is set, but no source has adapter " + orList(listers()) + ": nothing to reconcile")
		return nil
	case cfg.Reconcile.stripeKey == "":
		logger.Warn("PAYLOCK_RECONCILE_INTERVAL is set without STRIPE_API_KEY: the stripe sources are not reconciled", slog.Any("sources", names))
		return nil
	}
	logger.Info("reconciling payments periodically on the River leader", slog.Any("sources", names),
		slog.Duration("interval", cfg.Reconcile.Interval), slog.Duration("window", cfg.Reconcile.Window))
	return &reconcile.Worker{Sources: runs, Interval: cfg.Reconcile.Interval, Window: cfg.Reconcile.Window,
		Logger: logger, Observe: reconcile.NewMetrics(reg, names)}
}
