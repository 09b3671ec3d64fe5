package main

import (
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/paylock/paylock/store"
)

// newWorkerRegistry is what "paylock worker" exports: the Go runtime, the
// process and its Postgres pool (it has no Redis). The disbursement gauges
// stay with serve, which every deployment runs: one query per scrape is
// enough.
func newWorkerRegistry(st *store.Store) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		poolCollector{st: st},
	)
	return reg
}

// serveMetrics serves reg (and pprof, with withPprof) on mln, or on a
// listener of its own at addr when mln is nil; with neither, it does
// nothing. stop closes it.
func serveMetrics(reg *prometheus.Registry, addr string, mln net.Listener, withPprof bool, logger *slog.Logger) (stop func(), err error) {
	if mln == nil && addr == "" {
		return func() {}, nil
	}
	if mln, err = listen(mln, addr, "metrics (PAYLOCK_METRICS_ADDR, off: none)"); err != nil {
		return nil, err
	}
	msrv := newServer(metricsMux(reg, withPprof), logger)
	msrv.WriteTimeout = 0 // a CPU profile streams for as long as it was asked to run
	go msrv.Serve(mln)
	logger.Info("metrics listening", slog.String("url", "http://"+mln.Addr().String()+"/metrics"), slog.Bool("pprof", withPprof))
	return func() { msrv.Close() }, nil
}
