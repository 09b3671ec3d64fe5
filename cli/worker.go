package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/riverqueue/river"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/store"
)

// payoutSettings configure the payout worker: "paylock worker", or "paylock
// serve" with PAYLOCK_WORKER=true.
type payoutSettings struct {
	InServe      bool          // PAYLOCK_WORKER
	URL          string        // PAYLOCK_PAYOUT_URL
	Timeout      time.Duration // PAYLOCK_PAYOUT_TIMEOUT
	BackoffCap   time.Duration // PAYLOCK_PAYOUT_BACKOFF_CAP
	KeyRetention time.Duration // PAYLOCK_PROVIDER_KEY_RETENTION
	Concurrency  int           // PAYLOCK_WORKER_CONCURRENCY
	Poll         time.Duration // PAYLOCK_WORKER_POLL
}

// checkPayoutURL accepts "" (no worker) or an http(s) URL with a host.
func checkPayoutURL(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http:// or https:// URL")
	}
	return nil
}

func positiveInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, errors.New("want a positive integer")
	}
	return n, nil
}

// errNoPayoutURL stops a worker that would have nothing to do: no payout
// provider to pay out through and nothing to forward.
var errNoPayoutURL = errors.New("invalid PAYLOCK_PAYOUT_URL: the worker needs the payout provider's base URL (or PAYLOCK_FORWARD_SECRETS, with a forward URL, to forward recorded payments)")

// newWorker builds the payout worker from cfg; observe, when not nil, sees
// every processed row (paylock_payout_attempts_total{outcome}).
func newWorker(cfg config, st *store.Store, logger *slog.Logger, observe func(payout.Event)) (*payout.Worker, error) {
	if cfg.Payout.URL == "" {
		return nil, errNoPayoutURL
	}
	return payout.New(payout.Config{
		ProviderURL:  cfg.Payout.URL,
		Timeout:      cfg.Payout.Timeout,
		Concurrency:  cfg.Payout.Concurrency,
		PollInterval: cfg.Payout.Poll,
		BackoffCap:   cfg.Payout.BackoffCap,
		KeyRetention: cfg.Payout.KeyRetention,
		Logger:       logger,
		Observe:      observe,
	}, st.Disbursements())
}

// jobObservers are the metrics callbacks of a process's River workers.
type jobObservers struct {
	payout  func(payout.Event)
	forward func(forward.Event)
	// reconcile is serve's periodic reconciliation (reconcileWorker); nil:
	// none.
	reconcile *reconcile.Worker
}

// jobsConfig is the one River client of a process: the payout queue when
// withPayout, the forward queue when forwarding(cfg); nil when neither.
// Both share PAYLOCK_WORKER_POLL; the client's rescuer waits for the longer
// of the two workers' RescueAfter. closeSinks closes the forward worker's
// sinks: call it once the client has stopped.
func jobsConfig(cfg config, st *store.Store, logger *slog.Logger, withPayout bool, obs jobObservers) (rcfg *river.Config, closeSinks func(), err error) {
	closeSinks = func() {}
	defer func() {
		if err != nil {
			closeSinks()
		}
	}()
	poll := cfg.Payout.Poll
	if poll <= 0 {
		poll = 5 * time.Second
	}
	rcfg = &river.Config{Logger: logger, FetchPollInterval: poll, FetchCooldown: min(poll, 100*time.Millisecond)}
	if withPayout {
		w, err := newWorker(cfg, st, logger, obs.payout)
		if err != nil {
			return nil, nil, err
		}
		rcfg.ID = w.ID()
		if err := w.AddTo(rcfg); err != nil {
			return nil, nil, err
		}
	}
	if forwarding(cfg) {
		fw, err := newForwardWorker(cfg, st, logger, obs.forward)
		if err != nil {
			return nil, nil, err
		}
		closeSinks = func() {
			if err := fw.Close(); err != nil {
				logger.Warn("closing the forward sinks", slog.Any("error", err))
			}
		}
		if err := fw.AddTo(rcfg); err != nil {
			return nil, nil, err
		}
	}
	if obs.reconcile != nil {
		if err := obs.reconcile.AddTo(rcfg); err != nil {
			return nil, nil, err
		}
	}
	if len(rcfg.Queues) == 0 {
		return nil, closeSinks, nil
	}
	return rcfg, closeSinks, nil
}

func logJobsStarted(logger *slog.Logger, rcfg *river.Config) func() {
	return func() {
		queues := make([]string, 0, len(rcfg.Queues))
		for q, qc := range rcfg.Queues {
			queues = append(queues, fmt.Sprintf("%s:%d", q, qc.MaxWorkers))
		}
		sort.Strings(queues)
		logger.Info("job worker started", slog.Any("queues", queues), slog.Duration("rescue_after", rcfg.RescueStuckJobsAfter))
	}
}

// runWorker implements "paylock worker": the payout worker (with
// PAYLOCK_PAYOUT_URL), the forward worker (with PAYLOCK_FORWARD_SECRETS)
// and the periodic reconciliation (with PAYLOCK_RECONCILE_INTERVAL, as in
// serve) in one River client, as a process of its own, until ctx is cancelled
// (SIGTERM), after which the jobs in hand finish and it returns nil. It
// serves its metrics on mln, or when mln is nil on PAYLOCK_METRICS_ADDR
// (unless that is off).
func runWorker(ctx context.Context, cfg config, logger *slog.Logger, mln net.Listener) error {
	if cfg.Payout.URL == "" && !forwarding(cfg) {
		return errNoPayoutURL
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	reg := newWorkerRegistry(st)
	obs := jobObservers{payout: payout.NewMetrics(reg).Observe, forward: forward.NewMetrics(reg).Observe}
	if cfg.Reconcile.Interval > 0 {
		// River's leader may be this process: it schedules the periodic
		// reconciliation only if it has it too.
		h, sources, closeRedis, err := openPipeline(cfg, st, logger)
		if err != nil {
			return err
		}
		defer closeRedis()
		obs.reconcile = reconcileWorker(cfg, sources, h, reg, logger)
	}
	rcfg, closeSinks, err := jobsConfig(cfg, st, logger, cfg.Payout.URL != "", obs)
	if err != nil {
		return err
	}
	defer closeSinks()
	stopMetrics, err := serveMetrics(reg, cfg.MetricsAddr, mln, cfg.Pprof, logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	err = st.RunJobs(ctx, rcfg, logger, logJobsStarted(logger, rcfg))
	logger.Info("job worker stopped")
	return err
}

// startJobs runs the process's River client in the background of serve:
// the payout queue with PAYLOCK_WORKER=true, the forward queue when
// forwarding. stop cancels it and waits until the jobs in hand are done;
// call it before closing st. With neither queue, it starts nothing.
func startJobs(ctx context.Context, cfg config, st *store.Store, logger *slog.Logger, obs jobObservers) (stop func(), err error) {
	rcfg, closeSinks, err := jobsConfig(cfg, st, logger, cfg.Payout.InServe, obs)
	if err != nil || rcfg == nil {
		return func() {}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = st.RunJobs(ctx, rcfg, logger, logJobsStarted(logger, rcfg)) // returns once ctx is done
	}()
	return func() {
		cancel()
		<-done
		closeSinks()
	}, nil
}

const disbursementsUsage = `Usage: paylock disbursements stuck [--older-than 1h] [flags]

Lists the disbursements still pending or sent for longer than --older-than
(a Go duration, or whole days such as 2d; default 1h), and the pending ones
flagged for review, oldest first. The other flags are those of
"paylock serve -h" (DATABASE_URL...).
`

// runDisbursements implements "paylock disbursements stuck".
func runDisbursements(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, disbursementsUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "stuck" {
		fmt.Fprint(stderr, disbursementsUsage)
		return 2
	}
	olderThan, rest, err := cutOlderThan(args[1:])
	if err != nil {
		fmt.Fprintf(stderr, "paylock disbursements stuck: %v\n", err)
		return 2
	}
	cfg, code, ok := subcommandConfig("paylock disbursements stuck", disbursementsUsage, "", rest, getenv, stdout, stderr)
	if !ok {
		return code
	}
	st, err := store.Open(ctx, storeConfig(cfg))
	if err != nil {
		fmt.Fprintf(stderr, "paylock disbursements stuck: %v\n", err)
		return 1
	}
	defer st.Close()
	rows, err := st.Disbursements().StuckDisbursements(ctx, olderThan)
	if err != nil {
		fmt.Fprintf(stderr, "paylock disbursements stuck: %v\n", err)
		return 1
	}
	printStuck(stdout, rows, olderThan, time.Now())
	return 0
}

// cutOlderThan takes --older-than (or -older-than, with a space or "=")
// out of args and returns its value, 1h when absent.
func cutOlderThan(args []string) (time.Duration, []string, error) {
	d := time.Hour
	var rest []string
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || name != "older-than" {
			rest = append(rest, args[i])
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return 0, nil, errors.New("--older-than needs a value such as 1h or 2d")
			}
			i++
			value = args[i]
		}
		v, err := parseAge(value)
		if err != nil {
			return 0, nil, fmt.Errorf("invalid --older-than %q: %v", value, err)
		}
		d = v
	}
	return d, rest, nil
}

// parseAge reads a Go duration ("90m", "1h") or whole days ("2d").
func parseAge(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, errors.New("want a duration such as 1h or 2d")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New("want a duration such as 1h or 2d")
	}
	return d, nil
}

func printStuck(w io.Writer, rows []store.Disbursement, olderThan time.Duration, now time.Time) {
	if len(rows) == 0 {
		fmt.Fprintf(w, "no disbursement pending or sent for more than %s, none flagged for review\n", olderThan)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOAN_ID\tTRANCHE\tAMOUNT\tSTATUS\tFOR\tATTEMPTS\tPROVIDER_REF\tNOTE")
	for _, d := range rows {
		note := d.LastError
		if d.ReviewReason != "" {
			note = "REVIEW: " + d.ReviewReason
		}
		ref := d.ProviderRef
		if ref == "" {
			ref = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d %s\t%s\t%s\t%d\t%s\t%s\n", d.LoanID, d.Tranche, d.Amount, d.Currency,
			d.Status, now.Sub(d.StatusSince).Round(time.Second), d.Attempts, ref, note)
	}
	tw.Flush()
}
