package main

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/store"
)

// newRegistry returns a registry with the Go runtime and process collectors
// and the connection-pool statistics of st and rdb, and the disbursement
// gauges read from st at scrape time (store.DisbursementCollector,
// store.ReviewCollector).
func newRegistry(st *store.Store, rdb redisPoolStats) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		poolCollector{st: st, rdb: rdb},
		store.DisbursementCollector{Disbursements: st.Disbursements()},
		store.ReviewCollector{Review: st.Review()},
	)
	return reg
}

var (
	dbConns = prometheus.NewDesc("paylock_db_pool_connections",
		"Postgres pool connections by state (acquired, idle, constructing) and the pool's maximum (max).", []string{"state"}, nil)
	dbAcquires = prometheus.NewDesc("paylock_db_pool_acquires_total",
		"Connections acquired from the Postgres pool.", nil, nil)
	dbAcquireWait = prometheus.NewDesc("paylock_db_pool_acquire_wait_seconds_total",
		"Time spent waiting for a Postgres pool connection.", nil, nil)
	dbEmptyAcquires = prometheus.NewDesc("paylock_db_pool_empty_acquires_total",
		"Acquires that had to wait because the Postgres pool was empty.", nil, nil)
	redisConns = prometheus.NewDesc("paylock_redis_pool_connections",
		"Redis pool connections by state (total, idle, stale).", []string{"state"}, nil)
	redisPool = prometheus.NewDesc("paylock_redis_pool_requests_total",
		"Redis pool lookups by result (hit, miss, timeout).", []string{"result"}, nil)
)

// redisPoolStats is any go-redis client: *redis.Client (standalone, sentinel)
// and *redis.ClusterClient (whose statistics sum its nodes' pools).
type redisPoolStats interface{ PoolStats() *redis.PoolStats }

// poolCollector reads pool statistics at scrape time.
type poolCollector struct {
	st  *store.Store
	rdb redisPoolStats
}

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dbConns, dbAcquires, dbAcquireWait, dbEmptyAcquires, redisConns, redisPool} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.st.Pool().Stat()
	ch <- prometheus.MustNewConstMetric(dbConns, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(dbConns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(dbConns, prometheus.GaugeValue, float64(s.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(dbConns, prometheus.GaugeValue, float64(s.MaxConns()), "max")
	ch <- prometheus.MustNewConstMetric(dbAcquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(dbAcquireWait, prometheus.CounterValue, s.AcquireDuration().Seconds())
	ch <- prometheus.MustNewConstMetric(dbEmptyAcquires, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	if c.rdb == nil { // paylock worker: no Redis
		return
	}
	r := c.rdb.PoolStats()
	ch <- prometheus.MustNewConstMetric(redisConns, prometheus.GaugeValue, float64(r.TotalConns), "total")
	ch <- prometheus.MustNewConstMetric(redisConns, prometheus.GaugeValue, float64(r.IdleConns), "idle")
	ch <- prometheus.MustNewConstMetric(redisConns, prometheus.GaugeValue, float64(r.StaleConns), "stale")
	ch <- prometheus.MustNewConstMetric(redisPool, prometheus.CounterValue, float64(r.Hits), "hit")
	ch <- prometheus.MustNewConstMetric(redisPool, prometheus.CounterValue, float64(r.Misses), "miss")
	ch <- prometheus.MustNewConstMetric(redisPool, prometheus.CounterValue, float64(r.Timeouts), "timeout")
}

// metricsMux serves /metrics and, with withPprof (PAYLOCK_PPROF=true), on
// this listener only, pprof. The pprof cmdline handler is left out: it would
// print flags such as --webhook-secrets or --database-url.
func metricsMux(reg *prometheus.Registry, withPprof bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if !withPprof {
		return mux
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
