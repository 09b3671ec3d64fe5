package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/source"
)

const reconcilePaymentsUsage = `Usage: paylock reconcile payments --source stripe [--since 72h] [--dry-run] [--json] [flags]

Lists the successful payment events of the source's provider created within
--since (Stripe: GET {PAYLOCK_STRIPE_API_URL}/v1/events for each event type
the source records, with STRIPE_API_KEY) and gives each one to the pipeline a
webhook of the source takes (same adapter, lock, insert and forward job),
without the signature check: the body comes from the provider's API.

  recorded_now   paylock had not recorded the payment; it is recorded now
                 (--dry-run: "would_record", and nothing is written)
  mismatch       paylock recorded the transaction id with other content
  error          the event could not be settled (it is tried again next run)

It prints a table of those events (RESULT, TRANSACTION_ID, EVENT_ID,
DETAIL) and a line of counts; --json prints the events as a JSON array
(result, transaction_id, event_id, detail; [] when every event was
recorded) and the line of counts on stderr.

--source is a source whose provider lists its events (stripe; default:
the only such source); --since a
duration such as 72h, 3d or 1d12h (default 72h). A second run right after finds nothing
missing. Exit status: 0 when every event was already recorded, 1 when one
was missing or mismatched (or the check could not run), 2 on usage or
configuration errors. PAYLOCK_RECONCILE_INTERVAL runs it inside serve.
The other flags are those of "paylock serve -h".
`

// listers are the names of the registered providers that can list their
// events (provider.Lister): the adapters whose sources can be reconciled.
func listers() []string { return source.ProvidersWhere(isLister) }

func isLister(p provider.Provider) bool {
	_, ok := p.(provider.Lister)
	return ok
}

// reconcilable returns the source named name if its provider can list its
// events.
func reconcilable(sources []handler.Source, name string) (handler.Source, error) {
	if name == "" {
		return onlyReconcilable(sources)
	}
	for _, s := range sources {
		if s.Name != name {
			continue
		}
		if p, ok := provider.Lookup(s.Provider); !ok || !isLister(p) {
			return s, fmt.Errorf("source %q has adapter %q: only %s sources can be reconciled", name, s.Provider, source.OrList(listers()))
		}
		return s, nil
	}
	return handler.Source{}, fmt.Errorf("no source %q (PAYLOCK_SOURCES_FILE)", name)
}

// onlyReconcilable is the one source whose provider lists its events, for
// a --source left out; an error naming them when there are several, or
// saying which adapters can when there is none.
func onlyReconcilable(sources []handler.Source) (handler.Source, error) {
	var found []handler.Source
	for _, s := range sources {
		if p, ok := provider.Lookup(s.Provider); ok && isLister(p) {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return handler.Source{}, fmt.Errorf("no source can be reconciled: only %s sources can (PAYLOCK_SOURCES_FILE)", source.OrList(listers()))
	}
	names := make([]string, len(found))
	for i, s := range found {
		names[i] = s.Name
	}
	return handler.Source{}, fmt.Errorf("sources %s can be reconciled: name one with --source", strings.Join(names, ", "))
}

// reconciler is the reconciliation of src, a reconcilable source, through
// h: its provider's API at PAYLOCK_STRIPE_API_URL with STRIPE_API_KEY.
func reconciler(cfg Config, src handler.Source, h *handler.Handler, dryRun bool) (reconcile.Payments, error) {
	p, _ := provider.Lookup(src.Provider)
	url, key, err := apiOf(cfg, src)
	if err != nil {
		return reconcile.Payments{}, err
	}
	l, err := p.(provider.Lister).NewLister(provider.ListerConfig{
		Source: src.Name, Settings: src.Settings, URL: url, Key: key,
	})
	if err != nil {
		return reconcile.Payments{}, fmt.Errorf("source %q: %w", src.Name, err)
	}
	return reconcile.Payments{Source: src.Name, Events: l, Handler: h, DryRun: dryRun}, nil
}

// reconcilePaymentsCommand is "paylock reconcile payments".
var reconcilePaymentsCommand = Command[*reconcilePaymentsOpts]{
	Name: "paylock reconcile payments", Usage: reconcilePaymentsUsage, Open: OpenMigratedStore, Traced: true,
	New: func() *reconcilePaymentsOpts { return &reconcilePaymentsOpts{since: 72 * time.Hour} },
	Run: runReconcilePayments,
}

// reconcilePaymentsOpts are "reconcile payments"' own: --source, --since
// and --dry-run; Validate finds the source.
type reconcilePaymentsOpts struct {
	listOpts
	source string
	since  time.Duration
	dryRun bool
	src    handler.Source // the source named, once validated
}

func (o *reconcilePaymentsOpts) Parse(args []string) ([]string, error) {
	o.dryRun, args = cutBool(o.listOpts.cut(args), "dry-run")
	value, found, args, err := cutFlag(args, "source")
	if err != nil {
		return nil, fmt.Errorf("%v (e.g. stripe)", err)
	}
	if found {
		o.source = value
	}
	value, found, args, err = cutFlag(args, "since")
	if err != nil {
		return nil, fmt.Errorf("%v (e.g. 72h)", err)
	}
	if found {
		if o.since, err = parseAge(value); err != nil {
			return nil, fmt.Errorf("invalid --since %q: %v", value, err)
		}
	}
	return args, nil
}

// Validate finds the source among the sources' shapes (pipelineSources:
// its webhook secrets are not needed, the bodies come from the provider's
// API), whose provider must list its events, and needs the key to list
// them with.
//
// One that records (not --dry-run) queues forwards: a source forwarding to
// an http(s) URL needs PAYLOCK_FORWARD_SECRETS (forwardSpecs).
func (o *reconcilePaymentsOpts) Validate(cfg *Config) error {
	if !o.dryRun {
		if _, err := forwardSpecs(*cfg); err != nil {
			return err
		}
	}
	sources, _, err := pipelineSources(*cfg)
	if err != nil {
		return err
	}
	if o.src, err = reconcilable(sources, o.source); err != nil {
		return err
	}
	if _, key, err := apiOf(*cfg, o.src); err != nil {
		return err
	} else if key == "" {
		return errors.New("STRIPE_API_KEY is required (or the source's api_key_env): the secret key events are listed with")
	}
	return nil
}

// runReconcilePayments lists the source's events of the window and gives
// each to the pipeline its webhook takes; it prints what it found. Exit 1
// when a payment was missing or mismatched (or the listing failed).
func runReconcilePayments(ctx context.Context, b *Base, o *reconcilePaymentsOpts) error {
	h, _, closeRedis, err := openPipeline(b.Config, b.Store, b.Logger)
	if err != nil {
		return usage(err)
	}
	defer closeRedis()
	run, err := reconciler(b.Config, o.src, h, o.dryRun)
	if err != nil {
		return usage(err)
	}
	from := time.Now().Add(-o.since)
	rep, err := run.Run(ctx, from)
	perr := printPaymentsReport(b.Stdout, b.Stderr, o.src.Name, from, rep, o.dryRun, o.json)
	switch {
	case perr != nil && err == nil:
		return perr
	case err != nil:
		return err
	case !rep.Clean():
		return errReported
	}
	return nil
}

// paymentsRow is one event reconcile payments did not find recorded as
// listed, as its --json prints it.
type paymentsRow struct {
	Result        string `json:"result"` // recorded_now (would_record with --dry-run), mismatch or error
	TransactionID string `json:"transaction_id"`
	EventID       string `json:"event_id"`
	Detail        string `json:"detail"`
}

// printPaymentsReport writes one row per event recorded now (or that
// would be), mismatched or failed, then the counts: the table and the
// counts on w, or with asJSON the rows as a JSON array on w and the counts
// on counts.
func printPaymentsReport(w, counts io.Writer, source string, from time.Time, rep reconcile.Report, dryRun, asJSON bool) error {
	recorded := "recorded_now"
	if dryRun {
		recorded = "would_record"
	}
	rows := []paymentsRow{}
	for _, ref := range rep.Recorded {
		rows = append(rows, paymentsRow{Result: recorded, TransactionID: ref})
	}
	for _, d := range rep.Mismatched {
		rows = append(rows, paymentsRow{Result: "mismatch", TransactionID: d.Ref, EventID: d.EventID, Detail: d.Err.Error()})
	}
	for _, d := range rep.Errors {
		rows = append(rows, paymentsRow{Result: "error", TransactionID: d.Ref, EventID: d.EventID, Detail: d.Err.Error()})
	}
	if len(rows) > 0 || asJSON {
		err := printList(w, asJSON, rows, table[paymentsRow]{
			header: []string{"RESULT", "TRANSACTION_ID", "EVENT_ID", "DETAIL"},
			cells:  func(r paymentsRow) []string { return []string{r.Result, r.TransactionID, r.EventID, r.Detail} },
		})
		if err != nil {
			return err
		}
	}
	if !asJSON {
		counts = w
	}
	_, err := fmt.Fprintf(counts, "%s: %d events since %s: %d already recorded, %d %s, %d mismatched, %d errors, %d ignored\n",
		source, rep.Seen, from.UTC().Format(time.RFC3339), rep.AlreadyRecorded, rep.RecordedNow,
		strings.ReplaceAll(recorded, "_", " "), len(rep.Mismatched), len(rep.Errors), rep.Ignored)
	return err
}

// reconcileWorker is serve's periodic reconciliation
// (PAYLOCK_RECONCILE_INTERVAL) of every source whose provider lists its
// events (stripe), through h; nil when the interval is off, or no such
// source has a key (STRIPE_API_KEY or its api_key_env; logged).
func reconcileWorker(cfg Config, sources []handler.Source, h *handler.Handler, reg prometheus.Registerer, logger *slog.Logger) *reconcile.Worker {
	if cfg.Reconcile.Interval == 0 {
		return nil
	}
	runs := map[string]reconcile.Payments{}
	var names []string
	for _, s := range sources {
		if _, err := reconcilable(sources, s.Name); err != nil {
			continue
		}
		if _, key, err := apiOf(cfg, s); err == nil && key == "" {
			logger.Warn("PAYLOCK_RECONCILE_INTERVAL is set without STRIPE_API_KEY or the source's api_key_env: the source is not reconciled", slog.String("source", s.Name))
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
	if len(runs) == 0 {
		logger.Warn("PAYLOCK_RECONCILE_INTERVAL is set, but no source of adapter " + source.OrList(listers()) + " has an API key: nothing to reconcile")
		return nil
	}
	logger.Info("reconciling payments periodically on the River leader", slog.Any("sources", names),
		slog.Duration("interval", cfg.Reconcile.Interval), slog.Duration("window", cfg.Reconcile.Window))
	return &reconcile.Worker{Sources: runs, Interval: cfg.Reconcile.Interval, Window: cfg.Reconcile.Window,
		Logger: logger, Observe: reconcile.NewMetrics(reg, names)}
}
