package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

const usage = `paylock: exactly-once payment webhooks behind an efficiency lock.

Usage:
  paylock serve [flags]     run the webhook server (migrates first unless PAYLOCK_MIGRATE=false)
  paylock migrate [flags]   apply the database migrations and exit
  paylock worker [flags]    run the payout worker (PAYLOCK_WORKER=true runs it inside serve instead)
  paylock disbursements stuck [--older-than 1h]
                            list disbursements pending or sent too long, or flagged for review
  paylock purge --older-than 90d
                            delete webhook_events past the retention window (at least 7d)
  paylock reconcile [--grace 1h]
                            compare pending and sent disbursements with the payout provider
                            (exit 1 when they differ)
  paylock sign [flags]      sign a body from stdin as a PSP would (headers or a curl command)
  paylock healthcheck       exit 0 when the local replica answers /healthz (container health checks)
  paylock version           print the version

Every flag has an environment variable; run "paylock serve -h" for the list.
`

// Run is paylock's main, testable: args without the program name, the
// environment as a lookup function, and the standard streams. It returns the
// process exit code.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "paylock", buildVersion())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "sign":
		return runSign(args, getenv, stdin, stdout, stderr)
	case "healthcheck":
		return runHealthcheck(ctx, args, getenv, stdout, stderr)
	case "disbursements":
		return runDisbursements(ctx, args, getenv, stdout, stderr)
	case "purge":
		return runPurge(ctx, args, getenv, stdout, stderr)
	case "reconcile":
		return runReconcile(ctx, args, getenv, stdout, stderr)
	case "serve", "migrate", "worker":
	default:
		fmt.Fprintf(stderr, "paylock: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	cfg, _, err := loadConfig("paylock "+cmd, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		printFlags(stdout, cmd)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "paylock %s: %v\n", cmd, err)
		return 2
	}
	logger := newLogger(cfg, stderr)
	switch cmd {
	case "migrate":
		err = migrate(ctx, cfg)
	case "serve":
		err = serve(ctx, cfg, logger, nil, nil)
	case "worker":
		err = runWorker(ctx, cfg, logger, nil)
	}
	if err != nil {
		fmt.Fprintf(stderr, "paylock %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func printFlags(w io.Writer, cmd string) {
	fmt.Fprintf(w, "Usage: paylock %s [flags]\n\nFlags (each overrides its environment variable):\n", cmd)
	for _, s := range settings() {
		def := s.def
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "  --%-22s %-28s %s (default %s)\n", s.flag, s.env, s.usage, def)
	}
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func storeConfig(cfg config) store.Config {
	return store.Config{
		URL:              cfg.DatabaseURL,
		MaxConns:         cfg.DBMaxConns,
		StatementTimeout: cfg.StatementTimeout,
		ExecMode:         cfg.DBExecMode,
		MigrateURL:       cfg.MigrateDatabaseURL,
	}
}

// migrate applies the migrations, over PAYLOCK_MIGRATE_DATABASE_URL alone
// when it is set (DATABASE_URL may be a pooler that cannot hold the
// migration's session lock).
// openStore opens the store and, unless PAYLOCK_MIGRATE=false, migrates it:
// what serve and worker do first.
func openStore(ctx context.Context, cfg config) (*store.Store, error) {
	st, err := store.Open(ctx, storeConfig(cfg))
	if err != nil {
		return nil, err
	}
	if cfg.Migrate {
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			return nil, fmt.Errorf("migrate: %w", err)
		}
	}
	return st, nil
}

func migrate(ctx context.Context, cfg config) error {
	sc := storeConfig(cfg)
	if cfg.MigrateDatabaseURL != "" {
		sc.URL, sc.ExecMode, sc.MaxConns = cfg.MigrateDatabaseURL, "", 2
	}
	st, err := store.Open(ctx, sc)
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Migrate(ctx)
}

// errNoSecrets stops serve when deliveries could not be verified.
var errNoSecrets = errors.New("no PAYLOCK_WEBHOOK_SECRETS: refusing to accept unsigned webhooks (set PAYLOCK_ALLOW_UNSIGNED=true for local development only)")

// newVerifier builds the signature check, or nil when unsigned deliveries
// are explicitly allowed.
func newVerifier(cfg config, logger *slog.Logger) (handler.Verifier, error) {
	if len(cfg.WebhookSecrets) == 0 {
		if !cfg.AllowUnsigned {
			return nil, errNoSecrets
		}
		logger.Warn("!!! PAYLOCK_ALLOW_UNSIGNED=true: webhook signatures are NOT verified; anyone who can reach this endpoint can record payments. For local development only. !!!")
		return nil, nil
	}
	v, err := signature.NewVerifier(cfg.SignatureScheme, cfg.WebhookSecrets, cfg.SigTolerance)
	if err != nil {
		return nil, err
	}
	logger.Info("verifying webhook signatures", slog.String("scheme", string(cfg.SignatureScheme)), slog.Int("secrets", len(cfg.WebhookSecrets)))
	return v, nil
}

// serve runs the webhook server until ctx is cancelled, then stops
// accepting, lets in-flight requests finish (and release their locks) within
// ShutdownTimeout, and returns nil. A nil ln listens on cfg.Addr, a nil mln
// on cfg.MetricsAddr (unless that is off).
func serve(ctx context.Context, cfg config, logger *slog.Logger, ln, mln net.Listener) error {
	verifier, err := newVerifier(cfg, logger)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	rdb, err := newRedis(cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	logRedisTo(logger)
	cctx, cancel := context.WithTimeout(ctx, 4*cfg.RedisTimeout)
	err = checkRedisMode(cctx, rdb, cfg.RedisMode)
	cancel()
	if errors.Is(err, errRedisMode) {
		return err
	} else if err != nil {
		logger.Warn("could not check the Redis deployment's mode", slog.Any("error", err))
	}

	reg := newRegistry(st, rdb)
	metrics := handler.NewMetrics(reg, cfg.LockTTL)
	payoutAttempts := newPayoutMetrics(reg)
	checks := []handler.Check{
		{Name: "postgres", Critical: true, Ping: st.Ping},
		{Name: "redis", Critical: cfg.RedisUnavailable == handler.Reject,
			Ping: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
	}
	h, err := handler.New(handler.Config{
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
		Sources: []handler.Source{handler.PaymentsSource(verifier),
			{Name: "loans", Adapter: handler.AdapterLoans, Verifier: verifier},
			{Name: "payouts", Adapter: handler.AdapterPayouts, Verifier: verifier}},
		Metrics:       metrics,
		Checks:        checks,
		Version:       buildVersion(),
		Logger:        logger,
		Disbursements: st,
	}, lock.New(rdb, lock.WithObserver(metrics.LockObserver())), st)
	if err != nil {
		return err
	}
	if cfg.Payout.InServe {
		stopWorker, err := startWorker(ctx, cfg, st, logger, payoutAttempts.observe)
		if err != nil {
			return err
		}
		defer stopWorker()
	}
	if cfg.EventRetention > 0 {
		defer startPurger(ctx, st, cfg.EventRetention, purgeInterval, logger)()
	}

	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return err
		}
	}
	var inflight sync.WaitGroup
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inflight.Add(1)
			defer inflight.Done()
			h.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if mln == nil && cfg.MetricsAddr != "" {
		if mln, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
	}
	if mln != nil {
		msrv := &http.Server{Handler: metricsMux(reg), ReadHeaderTimeout: 5 * time.Second}
		go msrv.Serve(mln)
		defer msrv.Close()
		logger.Info("metrics listening", slog.String("url", "http://"+mln.Addr().String()+"/metrics"))
	}
	logger.Info("paylock listening", slog.String("url", "http://"+ln.Addr().String()), slog.String("version", buildVersion()), slog.Any("config", cfg))

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing in-flight requests", slog.Duration("deadline", cfg.ShutdownTimeout))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	shutdownErr := srv.Shutdown(sctx)
	if shutdownErr != nil {
		// Past the deadline: close the connections, which cancels the
		// requests still running (their transactions roll back, the PSP
		// retries), and let them release their locks before the Redis and
		// Postgres clients close.
		logger.Warn("shutdown deadline passed: cutting off in-flight requests", slog.Any("error", shutdownErr))
		srv.Close()
	}
	waitTimeout(&inflight, 10*time.Second)
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if shutdownErr != nil {
		return fmt.Errorf("shutdown: %w", shutdownErr)
	}
	logger.Info("stopped")
	return nil
}

// waitTimeout waits for wg, at most d.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// lockWait maps a zero setting (PAYLOCK_LOCK_WAIT=0: do not wait;
// PAYLOCK_LOCK_FINISHED_TTL=0: no marker) to the handler's negative value;
// the handler reads zero as "use the default".
func lockWait(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
