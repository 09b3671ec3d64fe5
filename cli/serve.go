package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/store"
)

// serveCommand is "paylock serve".
var serveCommand = Command[noOpts]{
	Name: "paylock serve", Usage: flagsUsage("serve"), ArgsIgnored: true, Traced: true, New: newNoOpts,
	Run: func(ctx context.Context, b *Base, _ noOpts) error { return serve(ctx, b.Config, b.Logger, nil, nil) },
}

// errNoSource stops serve when no webhook source is configured: it would
// answer 404 to every delivery.
var errNoSource = errors.New("no webhook source is configured: set PAYLOCK_WEBHOOK_SECRETS (POST /webhooks/payments), PAYLOCK_LOAN_SECRETS, PAYLOCK_PAYOUT_SECRETS or PAYLOCK_SOURCES_FILE (or PAYLOCK_ALLOW_UNSIGNED=true to serve the built-in sources unsigned, for local development only)")

// serve runs the webhook server until ctx is cancelled, then stops
// accepting, lets in-flight requests finish (and release their locks) within
// PAYLOCK_SHUTDOWN_TIMEOUT, and returns nil. A nil ln listens on
// PAYLOCK_ADDR, a nil mln on PAYLOCK_METRICS_ADDR (unless that is off).
func serve(ctx context.Context, cfg Config, logger *slog.Logger, ln, mln net.Listener) (err error) {
	s := &serving{cfg: cfg, logger: logger}
	defer s.close()
	if err := s.open(ctx); err != nil {
		return err
	}
	if err := s.startPipeline(ctx); err != nil {
		return err
	}
	if ln, err = listen(ln, cfg.Server.Addr, "webhook"); err != nil {
		return err
	}
	ln = s.conns.limit("webhook", ln, cfg.Server.MaxConns)
	var inflight sync.WaitGroup
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Done()
		s.h.ServeHTTP(w, r)
	}), logger, cfg.Server.MaxHeaderBytes)
	stopMetrics, err := serveMetrics(s.reg, s.conns, cfg.Server, mln, cfg.Admin.Pprof, logger)
	if err != nil {
		return err
	}
	s.later(stopMetrics)
	if err := s.startAdmin(ctx); err != nil {
		return err
	}
	logger.Info("paylock listening", slog.String("url", "http://"+ln.Addr().String()), slog.String("version", currentVersion().String()), slog.Any("config", cfg))
	return s.serveUntilDone(ctx, srv, ln, &inflight)
}

// serving is what serve opened and started, stopped and closed by close
// in the reverse order.
type serving struct {
	cfg    Config
	logger *slog.Logger

	sources []handler.Source
	routes  forward.Routes
	st      *store.Store
	rdb     redis.UniversalClient
	reg     *prometheus.Registry
	conns   *connCollector // the webhook and admin listeners' connections
	h       *handler.Handler
	sync    *reconcile.Sync // the admin API's sync and confirm, and the janitor's
	closers []func()
}

// later has close call fn.
func (s *serving) later(fn func()) { s.closers = append(s.closers, fn) }

func (s *serving) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// open loads the sources (refusing none at all), opens and migrates the
// store, and builds the Redis client, checking that the server is of the
// mode PAYLOCK_REDIS_MODE says.
func (s *serving) open(ctx context.Context) error {
	var err error
	if s.sources, s.routes, err = handlerSources(s.cfg, s.logger); err != nil {
		return err
	}
	if len(s.sources) == 0 {
		return errNoSource
	}
	if s.st, err = openStoreMigrated(ctx, &s.cfg); err != nil {
		return err
	}
	s.later(s.st.Close)
	forwardOnRecord(s.cfg, s.routes, s.st)
	if s.rdb, err = s.cfg.Lock.Redis.open(); err != nil {
		return err
	}
	s.later(func() { s.rdb.Close() })
	traceRedis(s.cfg.Telemetry, s.rdb, s.logger)
	logRedisTo(s.logger)
	cctx, cancel := context.WithTimeout(ctx, 4*s.cfg.Lock.Redis.Timeout)
	err = s.cfg.Lock.Redis.checkMode(cctx, s.rdb)
	cancel()
	if errors.Is(err, errRedisMode) {
		return err
	} else if err != nil {
		s.logger.Warn("could not check the Redis deployment's mode", slog.Any("error", err))
	}
	return nil
}

// startPipeline builds the metrics and the handler, and starts the jobs
// (payouts with PAYLOCK_WORKER, forwards, the periodic reconciliation) and
// the purge of old webhook events (PAYLOCK_EVENT_RETENTION).
func (s *serving) startPipeline(ctx context.Context) error {
	cfg := s.cfg
	s.reg = newRegistry(s.st, s.rdb)
	s.conns = &connCollector{}
	s.reg.MustRegister(s.conns)
	s.reg.MustRegister(deliveryLogCollector(s.st, s.sources))
	metrics := handler.NewMetrics(s.reg, cfg.Lock.TTL)
	payoutAttempts := payout.NewMetrics(s.reg)
	forwards := forward.NewMetrics(s.reg)
	lk := newLocker(lockClient(cfg.Lock, s.rdb, s.logger), metrics)
	checks := []handler.Check{
		{Name: "postgres", Critical: true, Ping: s.st.Ping},
		{Name: "redis", Critical: cfg.Lock.Unavailable == handler.Reject, Ping: lk.Ping},
	}
	var err error
	if s.h, err = newPipeline(cfg, s.logger, s.sources, s.st, lk, s.rdb, metrics, checks); err != nil {
		return err
	}
	if s.sync, err = paymentSync(cfg, s.sources, s.h, s.logger); err != nil {
		return err
	}
	stopJobs, err := startJobs(ctx, cfg, s.st, s.logger, jobObservers{payout: payoutAttempts.Observe, forward: forwards,
		reconcile: reconcileWorker(cfg, s.sources, s.h, s.reg, s.logger), janitor: janitor(cfg, s.sync, s.st, s.logger),
		orders: ordersWorker(cfg, s.st, s.reg, s.logger)})
	if err != nil {
		return err
	}
	s.later(stopJobs)
	s.later(s.st.Review().StartForwardPurger(ctx, purgeInterval, s.logger))
	if cfg.Database.EventRetention > 0 {
		s.later(s.st.Disbursements().StartPurger(ctx, cfg.Database.EventRetention, purgeInterval, s.logger))
	}
	return nil
}

// startAdmin serves the admin listener (unless PAYLOCK_ADMIN_ADDR=off):
// the console, the review queue, the disbursements and River UI, behind
// the admin tokens.
func (s *serving) startAdmin(ctx context.Context) error {
	cfg := s.cfg.Admin
	if cfg.Addr == "" {
		return nil
	}
	aln, err := listen(cfg.listener, cfg.Addr, "admin")
	if err != nil {
		return err
	}
	aln = s.conns.limit("admin", aln, sideListenerConns)
	mounts, stopMounts, err := admin.RiverUI(ctx, s.st, s.logger)
	if err != nil {
		return err
	}
	s.later(stopMounts)
	var verified func(string, []byte) []byte
	if specs, err := forwardSpecs(s.cfg); err == nil {
		verified = verifiedPayloads(s.cfg, specs)
	}
	var dests admin.DestinationView
	if len(s.routes.Destinations) > 0 {
		dests = destinationView{routes: s.routes, st: s.st.Outbox()}
	}
	asrv := newServer(admin.New(admin.Config{Token: cfg.Token, Tokens: cfg.Tokens, Verified: verified, ForwardDestinations: dests,
		Disbursements: s.st.Disbursements(), Review: newReviewQueue(s.cfg, s.st), Console: consoleStore{s.st.Payments(), s.st.Outbox()},
		Payments: s.st.Payments(), Sync: syncAdmin{s.sync}, Orders: ordersAdmin(s.cfg, s.st), PaymentOrders: paymentOrders(s.cfg, s.st), Deliveries: s.st.Deliveries(), ReplayDelivery: s.replayDelivery,
		Forwards: s.routes.BySource, Destinations: s.routes.Destinations, Mounts: mounts, Hosts: cfg.Hosts, Logger: s.logger}), s.logger, s.cfg.Server.MaxHeaderBytes)
	go asrv.Serve(aln)
	s.later(func() { asrv.Close() })
	if cfg.Token == "" && len(cfg.Tokens) == 0 {
		s.logger.Warn("admin listener without PAYLOCK_ADMIN_TOKEN: anyone who can reach this loopback address can use it", slog.String("addr", aln.Addr().String()))
	}
	base := "http://" + aln.Addr().String()
	s.logger.Info("admin listening", slog.String("console", base+admin.ConsolePath), slog.String("api", base+admin.APIBase+"/"))
	return nil
}

// replayDelivery runs a kept delivery through the pipeline again, as
// "paylock deliveries replay --id" does, and notes the result on it. A
// result the pipeline could not confirm is an error wrapping
// store.ErrUnavailable.
func (s *serving) replayDelivery(ctx context.Context, d store.Delivery) (admin.DeliveryReplay, error) {
	result, detail, recorded := replayOne(ctx, s.h, d, false)
	if err := s.st.Deliveries().MarkReplayed(ctx, d.ID, result, recorded); err != nil {
		return admin.DeliveryReplay{}, err
	}
	if result == "error" {
		return admin.DeliveryReplay{}, fmt.Errorf("%w: replaying delivery %d: %s", store.ErrUnavailable, d.ID, detail)
	}
	return admin.DeliveryReplay{Result: result, Detail: detail, Recorded: recorded}, nil
}

// serveUntilDone serves srv on ln until ctx is cancelled, then shuts it
// down: in-flight requests (counted by inflight) finish within
// PAYLOCK_SHUTDOWN_TIMEOUT, or are cut off and given a moment to release
// their locks.
func (s *serving) serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener, inflight *sync.WaitGroup) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.logger.Info("shutting down: finishing in-flight requests", slog.Duration("deadline", s.cfg.Server.ShutdownTimeout))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Server.ShutdownTimeout)
	defer cancel()
	shutdownErr := srv.Shutdown(sctx)
	if shutdownErr != nil {
		// Past the deadline: close the connections, which cancels the
		// requests still running (their transactions roll back, the PSP
		// retries), and let them release their locks before the Redis and
		// Postgres clients close.
		s.logger.Warn("shutdown deadline passed: cutting off in-flight requests", slog.Any("error", shutdownErr))
		srv.Close()
	}
	waitTimeout(inflight, 10*time.Second)
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if shutdownErr != nil {
		return fmt.Errorf("shutdown: %w", shutdownErr)
	}
	s.logger.Info("stopped")
	return nil
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

// newServer is an http.Server with read, write and idle timeouts and
// headers of at most maxHeader bytes (431 beyond): no listener of paylock's
// waits forever on a slow or silent client, nor buffers a megabyte of
// headers per connection.
func newServer(h http.Handler, logger *slog.Logger, maxHeader int) *http.Server {
	return &http.Server{
		Handler:           h,
		MaxHeaderBytes:    maxHeader,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// readHeaderTimeout bounds how long a client may take to send its request
// headers, on every listener.
const readHeaderTimeout = 5 * time.Second

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
