package cli

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/payout"
)

// workerCommand is "paylock worker".
var workerCommand = Command[noOpts]{
	Name: "paylock worker", Usage: flagsUsage("worker"), ArgsIgnored: true, Traced: true, New: newNoOpts,
	Run: func(ctx context.Context, b *Base, _ noOpts) error { return runWorker(ctx, b.Config, b.Logger, nil) },
}

// errNoPayoutURL stops a worker that would have nothing to do: no payout
// provider to pay out through and nothing to forward.
var errNoPayoutURL = errors.New("invalid PAYLOCK_PAYOUT_URL: the worker needs the payout provider's base URL (or a forward destination, PAYLOCK_FORWARD_URL or a source's forward_url, to forward recorded payments)")

// runWorker implements "paylock worker": the payout worker (with
// PAYLOCK_PAYOUT_URL), the forward worker (with a forward destination)
// and the periodic reconciliation (with PAYLOCK_RECONCILE_INTERVAL, as in
// serve) in one River client, as a process of its own, until ctx is cancelled
// (SIGTERM), after which the jobs in hand finish and it returns nil. It
// serves its metrics on mln, or when mln is nil on PAYLOCK_METRICS_ADDR
// (unless that is off).
func runWorker(ctx context.Context, cfg Config, logger *slog.Logger, mln net.Listener) error {
	if cfg.Payout.URL == "" {
		if fwd, err := forwarding(cfg); err != nil {
			return err
		} else if !fwd {
			return errNoPayoutURL
		}
	}
	st, err := openStoreMigrated(ctx, &cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	reg := newWorkerRegistry(st)
	// River's leader may be this process: it schedules the order deriver
	// only if it has it too.
	fm := forward.NewMetrics(reg)
	obs := jobObservers{payout: payout.NewMetrics(reg).Observe, forward: fm,
		orders: ordersWorker(cfg, st, reg, logger)}
	if cfg.Reconcile.Interval > 0 || cfg.Reconcile.SyncPendingAfter > 0 {
		// River's leader may be this process: it schedules the periodic
		// reconciliation and the janitor only if it has them too.
		h, sources, closeRedis, err := openPipeline(cfg, st, logger)
		if err != nil {
			return err
		}
		defer closeRedis()
		obs.reconcile = reconcileWorker(cfg, sources, h, reg, logger)
		sy, err := paymentSync(cfg, sources, h, logger)
		if err != nil {
			return err
		}
		obs.janitor = janitor(cfg, sy, st, logger)
	}
	rcfg, closeSinks, express, err := jobsConfig(cfg, st, logger, cfg.Payout.URL != "", obs)
	if err != nil {
		return err
	}
	defer closeSinks()
	stopMetrics, err := serveMetrics(reg, nil, cfg.Server, mln, cfg.Admin.Pprof, logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	var drained sync.WaitGroup
	if express != nil {
		drained.Go(func() { express(ctx) })
	}
	err = st.RunJobs(ctx, rcfg, logger, logJobsStarted(logger, rcfg))
	drained.Wait()
	logger.Info("job worker stopped")
	return err
}
