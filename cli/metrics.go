package cli

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/store"
)

// newRegistry returns a registry with the Go runtime and process
// collectors, the connection-pool statistics of st and rdb, and the
// disbursement and review queue gauges read from st at scrape time (serve
// adds the delivery log's, which names its sources: startPipeline).
func newRegistry(st *store.Store, rdb redisPoolStats) *prometheus.Registry {
	reg := newWorkerRegistry(st)
	reg.MustRegister(
		redisPoolCollector{rdb: rdb},
		store.DisbursementCollector{Disbursements: st.Disbursements()},
		store.ReviewCollector{Review: st.Review()},
	)
	return reg
}

// newWorkerRegistry is what "paylock worker" exports: the Go runtime, the
// process and its Postgres pool (it has no Redis). The disbursement gauges
// stay with serve, which every deployment runs: one query per scrape is
// enough.
func newWorkerRegistry(st *store.Store) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		store.PoolCollector{Store: st},
	)
	return reg
}

var (
	redisConns = prometheus.NewDesc("paylock_redis_pool_connections",
		"Redis pool connections by state (total, idle, stale).", []string{"state"}, nil)
	redisPool = prometheus.NewDesc("paylock_redis_pool_requests_total",
		"Redis pool lookups by result (hit, miss, timeout).", []string{"result"}, nil)
)

// redisPoolStats is any go-redis client: *redis.Client (standalone, sentinel)
// and *redis.ClusterClient (whose statistics sum its nodes' pools).
type redisPoolStats interface{ PoolStats() *redis.PoolStats }

// redisPoolCollector reads the Redis client's pool statistics at scrape
// time.
type redisPoolCollector struct{ rdb redisPoolStats }

func (c redisPoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- redisConns
	ch <- redisPool
}

func (c redisPoolCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.rdb.PoolStats()
	ch <- prometheus.MustNewConstMetric(redisConns, prometheus.GaugeValue, float64(r.TotalConns), "total")
	ch <- prometheus.MustNewConstMetric(redisConns, prometheus.GaugeValue, float64(r.IdleConns), "idle")
	ch <- prometheus.MustNewConstMetric(redisConns, prometheus.GaugeValue, float64(r.StaleConns), "stale")
	ch <- prometheus.MustNewConstMetric(redisPool, prometheus.CounterValue, float64(r.Hits), "hit")
	ch <- prometheus.MustNewConstMetric(redisPool, prometheus.CounterValue, float64(r.Misses), "miss")
	ch <- prometheus.MustNewConstMetric(redisPool, prometheus.CounterValue, float64(r.Timeouts), "timeout")
}

// metricsMux serves /metrics (in the OpenMetrics format to a scraper that
// asks for it, which carries the latency histograms' trace id exemplars) and, with withPprof (PAYLOCK_PPROF=true), on
// this listener only, pprof. The pprof cmdline handler is left out: it would
// print flags such as --webhook-secrets or --database-url.
func metricsMux(reg *prometheus.Registry, withPprof bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true}))
	if !withPprof {
		return mux
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// serveMetrics serves reg (and pprof, with withPprof) on mln, or on a
// listener of its own at srv.MetricsAddr when mln is nil; with neither, it
// does nothing. The listener, reported by conns (nil: a collector of its
// own, registered in reg), takes at most sideListenerConns connections
// and headers of srv.MaxHeaderBytes. stop closes it.
func serveMetrics(reg *prometheus.Registry, conns *connCollector, srv ServerConfig, mln net.Listener, withPprof bool, logger *slog.Logger) (stop func(), err error) {
	if mln == nil && srv.MetricsAddr == "" {
		return func() {}, nil
	}
	if mln, err = listen(mln, srv.MetricsAddr, "metrics (PAYLOCK_METRICS_ADDR, off: none)"); err != nil {
		return nil, err
	}
	if conns == nil {
		conns = &connCollector{}
		reg.MustRegister(conns)
	}
	mln = conns.limit("metrics", mln, sideListenerConns)
	msrv := newServer(metricsMux(reg, withPprof), logger, srv.MaxHeaderBytes)
	msrv.WriteTimeout = 0 // a CPU profile streams for as long as it was asked to run
	go msrv.Serve(mln)
	logger.Info("metrics listening", slog.String("url", "http://"+mln.Addr().String()+"/metrics"), slog.Bool("pprof", withPprof))
	return func() { msrv.Close() }, nil
}
