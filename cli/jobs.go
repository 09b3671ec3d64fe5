package cli

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/store"
)

// newPayoutWorker builds the payout worker from cfg; observe, when not
// nil, sees every processed row (paylock_payout_attempts_total{outcome}).
func newPayoutWorker(cfg Config, st *store.Store, logger *slog.Logger, observe func(payout.Event)) (*payout.Worker, error) {
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
	payout func(payout.Event)
	// forward counts forward attempts, jobs left to another replica,
	// destinations' moves and states (forward.Metrics); nil: not counted.
	forward *forward.Metrics
	// reconcile is serve's periodic reconciliation (reconcileWorker); nil:
	// none.
	reconcile *reconcile.Worker
	// janitor syncs unsettled payments (PAYLOCK_SYNC_PENDING_AFTER); nil:
	// none.
	janitor *reconcile.Janitor
	// orders is the order deriver (ordersWorker); nil: off.
	orders *store.OrderDeriveWorker
}

// jobsConfig is the one River client of a process: the payout queue when
// withPayout, the forward queue when forwarding(cfg), and always the
// delivery log's periodic purge (deliveries.go).
// Both share PAYLOCK_WORKER_POLL; the client's rescuer waits for the longer
// of the two workers' RescueAfter. closeSinks closes the forward worker's
// sinks: call it once the client has stopped.
func jobsConfig(cfg Config, st *store.Store, logger *slog.Logger, withPayout bool, obs jobObservers) (rcfg *river.Config, closeSinks func(), express func(context.Context), err error) {
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
		w, err := newPayoutWorker(cfg, st, logger, obs.payout)
		if err != nil {
			return nil, nil, nil, err
		}
		rcfg.ID = w.ID()
		if err := w.AddTo(rcfg); err != nil {
			return nil, nil, nil, err
		}
	}
	withForward, err := forwarding(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	if withForward {
		fw, closePacer, err := newForwardWorker(cfg, st, logger, obs.forward)
		if err != nil {
			return nil, nil, nil, err
		}
		closeSinks = func() {
			if err := fw.Close(); err != nil {
				logger.Warn("closing the forward sinks", slog.Any("error", err))
			}
			closePacer()
		}
		if err := fw.AddTo(rcfg); err != nil {
			return nil, nil, nil, err
		}
		if cfg.Forward.Express {
			// The express lane's drainer beside River's forward queue: the
			// messages the store starts there (store.Config.ExpressForwards).
			express = func(ctx context.Context) { _ = fw.RunExpress(ctx, st.Outbox()) }
		}
	}
	if obs.reconcile != nil {
		if err := obs.reconcile.AddTo(rcfg); err != nil {
			return nil, nil, nil, err
		}
	}
	if obs.janitor != nil {
		if err := obs.janitor.AddTo(rcfg); err != nil {
			return nil, nil, nil, err
		}
	}
	if obs.orders != nil {
		if err := obs.orders.AddTo(rcfg); err != nil {
			return nil, nil, nil, err
		}
	}
	// The delivery log's retention, in every River client of paylock:
	// whichever process is River's leader schedules it.
	if err := deliveryLogWorker(cfg, st, logger).AddTo(rcfg); err != nil {
		return nil, nil, nil, err
	}
	if len(rcfg.Queues) == 0 {
		return nil, closeSinks, nil, nil
	}
	return rcfg, closeSinks, express, nil
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

// startJobs runs the process's River client in the background of serve:
// the payout queue with PAYLOCK_WORKER=true, the forward queue when
// forwarding, the delivery log's purge. stop cancels it and waits until
// the jobs in hand are done; call it before closing st.
func startJobs(ctx context.Context, cfg Config, st *store.Store, logger *slog.Logger, obs jobObservers) (stop func(), err error) {
	rcfg, closeSinks, express, err := jobsConfig(cfg, st, logger, cfg.Payout.InServe, obs)
	if err != nil || rcfg == nil {
		return func() {}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = st.RunJobs(ctx, rcfg, logger, logJobsStarted(logger, rcfg)) // returns once ctx is done
	})
	if express != nil {
		wg.Go(func() { express(ctx) })
	}
	return func() {
		cancel()
		wg.Wait()
		closeSinks()
	}, nil
}
