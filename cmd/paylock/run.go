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
	"time"

	"github.com/redis/go-redis/v9"

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
	case "serve", "migrate":
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
	}
}

func migrate(ctx context.Context, cfg config) error {
	st, err := store.Open(ctx, storeConfig(cfg))
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Migrate(ctx)
}

// newRedis builds the lock's Redis client. ContextTimeoutEnabled makes the
// request's context bound every command, and the read/write timeouts sit
// well below the lock TTL, so a slow Redis cannot hold a request past its
// deadline.
func newRedis(cfg config) (*redis.Client, error) {
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("invalid REDIS_URL: %w", err)
	}
	opt.ContextTimeoutEnabled = true
	opt.DialTimeout = cfg.RedisTimeout
	opt.ReadTimeout = cfg.RedisTimeout
	opt.WriteTimeout = cfg.RedisTimeout
	return redis.NewClient(opt), nil
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
	st, err := store.Open(ctx, storeConfig(cfg))
	if err != nil {
		return err
	}
	defer st.Close()
	if cfg.Migrate {
		if err := st.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	rdb, err := newRedis(cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()

	reg := newRegistry(st, rdb)
	metrics := handler.NewMetrics(reg, cfg.LockTTL)
	checks := []handler.Check{
		{Name: "postgres", Critical: true, Ping: st.Ping},
		{Name: "redis", Critical: cfg.RedisUnavailable == handler.Reject,
			Ping: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
	}
	h := handler.New(handler.Config{
		LockTTL:          cfg.LockTTL,
		LockWait:         lockWait(cfg.LockWait),
		LockPrefix:       cfg.LockPrefix,
		MaxBody:          cfg.MaxBody,
		DefaultCurrency:  cfg.DefaultCurrency,
		Currencies:       cfg.Currencies,
		RedisUnavailable: cfg.RedisUnavailable,
		NoLock:           cfg.NoLock,
		Verifier:         verifier,
		Metrics:          metrics,
		Checks:           checks,
		Version:          buildVersion(),
		Logger:           logger,
	}, lock.New(rdb, lock.WithObserver(metrics.LockObserver())), st)

	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return err
		}
	}
	srv := &http.Server{
		Handler:           h,
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
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("stopped")
	return nil
}

// lockWait maps PAYLOCK_LOCK_WAIT=0 ("do not wait") to the handler's
// negative value; the handler reads zero as "use the default".
func lockWait(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
