// Command ladderd is the floor ladder's server (issue #34): one process
// per step of the ladder that `paybench run` measures under the same load,
// so that each feature of paylock's hot path has a measured price.
//
//	ladderd -step bare        the bare floor: net/http, encoding/json and natural batching
//	                          into one multi-row INSERT … ON CONFLICT DO NOTHING RETURNING
//	                          (bare.go), nothing of paylock's
//	ladderd -step batching    paylock's store (store.Payments.RecordPayment, its batcher)
//	                          behind the same lax net/http handler
//	ladderd -step strict      + paylock's handler pipeline: the payments source, unsigned,
//	                          strict decoding and validation, admission, the answers;
//	                          no lock (Config.NoLock), no log line, no metrics
//	ladderd -step signature   + the Standard Webhooks signature (PAYLOCK_WEBHOOK_SECRETS)
//	ladderd -step lock        + the Redis lock, auto-pipelined as serve builds it
//	ladderd -step log         + the log line, JSON at info to stdout, as serve's
//	ladderd -step metrics     + the handler's and the lock's metrics
//
// Every step traces with OpenTelemetry's no-op provider, as serve does with
// no OTEL_* variable. The ladder's last row is `paylock serve` itself, as
// shipped, so the gap between this assembly and the service is measured
// too.
//
// ladderd lives in the bench module and is built by scripts/bench.sh only:
// the shipped binary has no setting that turns the signature or the lock
// off silently (PAYLOCK_ALLOW_UNSIGNED and PAYLOCK_LOCK=off are its own,
// documented and logged). ladderd reads the variables paybench gives a
// replica: DATABASE_URL, REDIS_URL, PAYLOCK_ADDR, PAYLOCK_METRICS_ADDR
// (/metrics with the Go runtime's counters, and /debug/pprof/),
// PAYLOCK_WEBHOOK_SECRETS, PAYLOCK_LOCK_PREFIX and PAYLOCK_BATCH_MAX.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/lock"
	_ "github.com/paylock/paylock/provider/all" // the providers serve registers, the payments source's among them
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
	"github.com/paylock/paylock/telemetry"
)

// steps are the ladder's rungs, in order: each adds one feature to the one
// before it.
var steps = []string{"bare", "batching", "strict", "signature", "lock", "log", "metrics"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	step := flag.String("step", "", "the ladder's step: one of "+fmt.Sprint(steps))
	flag.Parse()
	if err := run(ctx, *step, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ladderd:", err)
		os.Exit(1)
	}
}

// has reports whether step includes feature: the steps are cumulative.
func has(step, feature string) bool {
	return slices.Index(steps, step) >= slices.Index(steps, feature)
}

func run(ctx context.Context, step string, getenv func(string) string, logOut io.Writer) error {
	if !slices.Contains(steps, step) {
		return fmt.Errorf("-step %q: want one of %v", step, steps)
	}
	batchMax := store.DefaultBatchMax
	if v := getenv("PAYLOCK_BATCH_MAX"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("PAYLOCK_BATCH_MAX=%q: want a positive integer", v)
		}
		batchMax = n
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector()) // go_memstats_mallocs_total: the allocations per delivery

	var h http.Handler
	if step == "bare" {
		pool, err := pgxpool.New(ctx, getenv("DATABASE_URL"))
		if err != nil {
			return err
		}
		defer pool.Close()
		if err := pool.Ping(ctx); err != nil {
			return err
		}
		h = withReady(newBareServer(pool, batchMax, store.DefaultBatchWriters))
	} else {
		st, err := store.Open(ctx, store.Config{URL: getenv("DATABASE_URL"), BatchMax: batchMax, TracerProvider: noop.NewTracerProvider()})
		if err != nil {
			return err
		}
		defer st.Close()
		if step == "batching" {
			h = withReady(laxServer{st.Payments()})
		} else if h, err = pipeline(step, getenv, st, reg, logOut); err != nil {
			return err
		}
	}
	return serve(ctx, getenv("PAYLOCK_ADDR"), h, getenv("PAYLOCK_METRICS_ADDR"), reg)
}

// pipeline is paylock's handler with the features of step, assembled as
// cli's newPipeline does.
func pipeline(step string, getenv func(string) string, st *store.Store, reg *prometheus.Registry, logOut io.Writer) (http.Handler, error) {
	cfg := handler.Config{
		NoLock:         !has(step, "lock"),
		LockPrefix:     getenv("PAYLOCK_LOCK_PREFIX"),
		Logger:         slog.New(slog.DiscardHandler),
		TracerProvider: noop.NewTracerProvider(),
		Sources:        []handler.Source{handler.PaymentsSource(nil)},
	}
	if has(step, "signature") {
		secrets, err := signature.ParseSecrets(signature.SchemeStandard, getenv("PAYLOCK_WEBHOOK_SECRETS"))
		if err != nil {
			return nil, fmt.Errorf("PAYLOCK_WEBHOOK_SECRETS: %w", err)
		}
		v, err := signature.NewVerifier(signature.SchemeStandard, secrets, 5*time.Minute)
		if err != nil {
			return nil, err
		}
		cfg.Sources = []handler.Source{handler.PaymentsSource(v)}
	}
	if has(step, "log") {
		cfg.Logger = slog.New(telemetry.LogHandler(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo})))
	}
	if has(step, "metrics") {
		cfg.Metrics = handler.NewMetrics(reg, 5*time.Second)
	}
	var locker handler.Locker
	if has(step, "lock") {
		opt, err := redis.ParseURL(getenv("REDIS_URL"))
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		opt.ContextTimeoutEnabled = true
		rdb := redis.NewClient(opt)
		ap, err := rdb.AutoPipeline()
		if err != nil {
			return nil, err
		}
		locker = lock.New(lock.NewAdaptive(rdb, ap), lock.WithObserver(cfg.Metrics.LockObserver()))
	}
	return handler.New(cfg, locker, st.Payments())
}

// laxServer is the batching step: paylock's store behind the bare floor's
// lax handler (encoding/json into three fields, nothing validated).
type laxServer struct{ payments *store.Payments }

func (s laxServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var p barePayment
	if err := json.Unmarshal(body, &p); err != nil || p.TransactionID == "" {
		http.Error(w, "bad payment", http.StatusBadRequest)
		return
	}
	_, err = s.payments.RecordPayment(r.Context(), store.Payment{Source: "payments", TransactionID: p.TransactionID,
		Amount: p.Amount, Currency: p.Currency, Payload: body, EventID: r.Header.Get("Webhook-Id")})
	res := "processed"
	switch {
	case errors.Is(err, store.ErrDuplicate):
		res = "duplicate"
	case err != nil:
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"result": res, "transaction_id": p.TransactionID})
}

// withReady answers GET /readyz, which paybench waits for, beside h.
func withReady(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.Handle("/", h)
	return mux
}

// serve serves h on addr and the metrics and profiles on maddr until ctx is
// done, then shuts both down.
func serve(ctx context.Context, addr string, h http.Handler, maddr string, reg *prometheus.Registry) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	servers := []*http.Server{
		{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second},
		{Addr: maddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second},
	}
	errs := make(chan error, len(servers))
	for _, srv := range servers {
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			return err
		}
		go func() { errs <- srv.Serve(ln) }()
	}
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(sctx)
	}
	return nil
}
