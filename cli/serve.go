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
	"strings"
	"sync"
	"time"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/payout"
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
                            and the forward worker (every serve runs it too when forwarding)
  paylock forward list [--discarded] [--limit N]
                            list forward jobs (recorded payments and disbursement changes sent on)
  paylock forward retry <id>|--discarded
                            put a discarded (or cancelled) forward back in the queue
  paylock review list|show|resolve
                            the review queue: mismatches, flagged disbursements, discarded forwards
  paylock disbursements stuck [--older-than 1h]
                            list disbursements pending or sent too long, or flagged for review
  paylock purge --older-than 90d
                            delete webhook_events past the retention window (at least 7d)
  paylock reconcile [--grace 1h]
                            compare pending and sent disbursements with the payout provider
                            (exit 1 when they differ)
  paylock reconcile payments --source stripe [--since 72h] [--dry-run]
                            record the payments the provider's API lists and paylock missed
                            (exit 1 when one was missing or differs)
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
	case "forward":
		return runForward(ctx, args, getenv, stdout, stderr)
	case "review":
		return runReview(ctx, args, getenv, stdout, stderr)
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

		ForwardMaxAttempts: cfg.Forward.MaxAttempts,
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
	if cfg.Forward.URL != "" {
		// Every process that changes a disbursement's status (serve's
		// payout notifications, the payout worker) forwards the change, to
		// PAYLOCK_FORWARD_URL's destination.
		st.Disbursements().OnStatusChange(st.Outbox().ForwardStatusHook(forward.DefaultDestination))
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

// handlerSources loads the sources serve serves (loadSources) and builds
// each one's own verifier from its own secrets: a secret verifies only its
// own source. Every source that will accept unsigned deliveries is logged
// loudly.
// It also returns where each payment source's forwards go (routeForwards),
// for forwardOnRecord once the store is open.
func handlerSources(cfg config, logger *slog.Logger) ([]handler.Source, forward.Routes, error) {
	getenv := cfg.getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	specs, unsigned, err := loadSources(cfg, getenv)
	if err != nil {
		return nil, forward.Routes{}, err
	}
	routes, err := routeForwards(cfg, specs)
	if err != nil {
		return nil, forward.Routes{}, err
	}
	out := make([]handler.Source, 0, len(specs))
	for _, spec := range specs {
		src := handler.Source{Name: spec.Name, Provider: spec.Adapter, Settings: spec.Settings,
			LegacyLockKey: spec.Builtin && spec.Name == "payments"}
		if !spec.unsigned() {
			secrets, err := signature.ParseSecrets(spec.Scheme, strings.Join(spec.Secrets, ","))
			if err != nil {
				return nil, forward.Routes{}, fmt.Errorf("source %q: invalid %s: %v", spec.Name, spec.SecretsEnv, err)
			}
			v, err := signature.NewVerifier(spec.Scheme, secrets, cfg.SigTolerance)
			if err != nil {
				return nil, forward.Routes{}, fmt.Errorf("source %q: %w", spec.Name, err)
			}
			src.Verifier = v
			logger.Info("verifying webhook signatures", slog.String("source", spec.Name),
				slog.String("scheme", string(spec.Scheme)), slog.Int("secrets", len(secrets)))
		}
		out = append(out, src)
	}
	for _, name := range unsigned {
		logger.Warn("!!! PAYLOCK_ALLOW_UNSIGNED=true: webhook signatures are NOT verified for this source; anyone who can reach POST /webhooks/"+name+" can record what it accepts. For local development only. !!!",
			slog.String("source", name))
	}
	return out, routes, nil
}

// forwardOnRecord makes each source that forwards insert every newly
// recorded payment's forward job, naming the source's destination, in the
// recording transaction (store.Outbox.EnqueueForwardTx): the job exists if
// and only if the payment does, and a duplicate inserts none.
func forwardOnRecord(sources []handler.Source, routes forward.Routes, st *store.Store) {
	for i := range sources {
		dest := routes.BySource[sources[i].Name]
		if dest == "" {
			continue
		}
		sources[i].OnRecord = st.Outbox().ForwardRecordHook(dest)
	}
}

// consoleStore is what the admin console reads and does: the payments
// (search, read) and their forward jobs (list, replay).
type consoleStore struct {
	*store.Payments
	*store.Outbox
}

// listen returns ln, or a listener on addr when ln is nil.
func listen(ln net.Listener, addr, what string) (net.Listener, error) {
	if ln != nil {
		return ln, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", what, err)
	}
	return l, nil
}

// newServer is an http.Server with read, write and idle timeouts: no
// listener of paylock's waits forever on a slow or silent client.
func newServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// errNoSource stops serve when no webhook source is configured: it would
// answer 404 to every delivery.
var errNoSource = errors.New("no webhook source is configured: set PAYLOCK_WEBHOOK_SECRETS (POST /webhooks/payments), PAYLOCK_LOAN_SECRETS, PAYLOCK_PAYOUT_SECRETS or PAYLOCK_SOURCES_FILE (or PAYLOCK_ALLOW_UNSIGNED=true to serve the built-in sources unsigned, for local development only)")

// serve runs the webhook server until ctx is cancelled, then stops
// accepting, lets in-flight requests finish (and release their locks) within
// ShutdownTimeout, and returns nil. A nil ln listens on cfg.Addr, a nil mln
// on cfg.MetricsAddr (unless that is off).
func serve(ctx context.Context, cfg config, logger *slog.Logger, ln, mln net.Listener) error {
	sources, routes, err := handlerSources(cfg, logger)
	if err != nil {
		return err
	}
	if len(sources) == 0 {
		return errNoSource
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	forwardOnRecord(sources, routes, st)
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
	payoutAttempts := payout.NewMetrics(reg)
	forwards := forward.NewMetrics(reg)
	checks := []handler.Check{
		{Name: "postgres", Critical: true, Ping: st.Ping},
		{Name: "redis", Critical: cfg.RedisUnavailable == handler.Reject,
			Ping: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
	}
	h, err := newPipeline(cfg, logger, sources, st, rdb, metrics, checks)
	if err != nil {
		return err
	}
	stopJobs, err := startJobs(ctx, cfg, st, logger, jobObservers{payout: payoutAttempts.Observe, forward: forwards.Observe,
		reconcile: reconcileWorker(cfg, sources, h, reg, logger)})
	if err != nil {
		return err
	}
	defer stopJobs()
	if cfg.EventRetention > 0 {
		defer st.Disbursements().StartPurger(ctx, cfg.EventRetention, purgeInterval, logger)()
	}

	if ln, err = listen(ln, cfg.Addr, "webhook"); err != nil {
		return err
	}
	var inflight sync.WaitGroup
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Done()
		h.ServeHTTP(w, r)
	}), logger)
	stopMetrics, err := serveMetrics(reg, cfg.MetricsAddr, mln, cfg.Pprof, logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	if cfg.AdminAddr != "" {
		aln, err := listen(cfg.adminListener, cfg.AdminAddr, "admin")
		if err != nil {
			return err
		}
		mounts, stopMounts, err := admin.RiverUI(ctx, st, logger)
		if err != nil {
			return err
		}
		defer stopMounts()
		asrv := newServer(admin.New(admin.Config{Token: cfg.AdminToken, Tokens: cfg.AdminTokens,
			Disbursements: st.Disbursements(), Review: newReviewQueue(cfg, st), Console: consoleStore{st.Payments(), st.Outbox()}, Forwards: routes.BySource, Destinations: routes.Destinations, Mounts: mounts, Logger: logger}), logger)
		go asrv.Serve(aln)
		defer asrv.Close()
		if cfg.AdminToken == "" && len(cfg.AdminTokens) == 0 {
			logger.Warn("admin listener without PAYLOCK_ADMIN_TOKEN: anyone who can reach this loopback address can use it", slog.String("addr", aln.Addr().String()))
		}
		logger.Info("admin listening", slog.String("url", "http://"+aln.Addr().String()+"/"))
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
