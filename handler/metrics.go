package handler

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylock/paylock/lock"
)

// Metrics are the Prometheus series that tell an SRE whether the lock TTL
// is right, how often the database backstop catches what the lock let
// through, and whether Redis or Postgres is degrading the service. Build it
// with NewMetrics; a nil *Metrics records nothing.
type Metrics struct {
	requests         *prometheus.CounterVec
	duration         *prometheus.HistogramVec
	lockObtain       *prometheus.CounterVec
	lockWait         prometheus.Histogram
	lockHold         prometheus.Histogram
	lockTTL          prometheus.Gauge
	lockRelease      *prometheus.CounterVec
	leaseLost        prometheus.Counter
	lockRefresh      *prometheus.CounterVec
	backstopDups     prometheus.Counter
	mismatches       prometheus.Counter
	sigFailures      *prometheus.CounterVec
	sigVerified      *prometheus.CounterVec
	redisUnavailable *prometheus.CounterVec
	dbWrites         *prometheus.CounterVec
	shedTotal        prometheus.Counter
	stages           *prometheus.GaugeVec
	deliveryDrops    *prometheus.CounterVec
	ignored          *prometheus.CounterVec
	fetches          *prometheus.CounterVec
	// reading and processing are the stages' series, bound once: every
	// delivery moves each of them twice.
	reading, processing prometheus.Gauge
	// children caches the per-delivery series by their labels, so that
	// observe neither hashes label values nor formats a status code on
	// every delivery. Its keys are bounded: sources are configured, results
	// and status codes are the handler's own, secret indexes are the
	// sources' secrets.
	children seriesCache
}

// Families of the cached series.
const (
	famRequests = iota
	famDuration
	famSigFailures
	famSigVerified
	famDBWrites
	famIgnored
	famLockObtain
	famLockRelease
)

// seriesKey names one child series: its family and label values.
type seriesKey struct {
	family int
	source string
	label  string
	code   int
}

// seriesCache is a copy-on-write map of child series: reads are a map
// lookup with no lock, a first use copies the map under mu.
type seriesCache struct {
	mu sync.Mutex
	m  atomic.Pointer[map[seriesKey]any]
}

// get returns k's series, made by newSeries on first use.
func (c *seriesCache) get(k seriesKey, newSeries func() any) any {
	if m := c.m.Load(); m != nil {
		if s, ok := (*m)[k]; ok {
			return s
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if s, ok := (*old)[k]; ok {
			return s
		}
	}
	next := make(map[seriesKey]any, 1+len(ptrMap(old)))
	for key, s := range ptrMap(old) {
		next[key] = s
	}
	s := newSeries()
	next[k] = s
	c.m.Store(&next)
	return s
}

func ptrMap(m *map[seriesKey]any) map[seriesKey]any {
	if m == nil {
		return nil
	}
	return *m
}

func (m *Metrics) counter(k seriesKey, vec *prometheus.CounterVec, labels ...string) prometheus.Counter {
	return m.children.get(k, func() any { return vec.WithLabelValues(labels...) }).(prometheus.Counter)
}

// ttlBuckets spreads histogram buckets around the lock TTL, so that the
// hold-time distribution can be read against it: the top buckets sit at and
// beyond the TTL, where a request outlives its lock.
func ttlBuckets(ttl time.Duration) []float64 {
	fractions := []float64{0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.33, 0.5, 0.75, 1, 1.5, 2, 4}
	out := make([]float64, len(fractions))
	for i, f := range fractions {
		out[i] = ttl.Seconds() * f
	}
	return out
}

// NewMetrics registers paylock's metrics with reg. lockTTL shapes the
// buckets of the lock histograms and is exported as paylock_lock_ttl_seconds.
func NewMetrics(reg prometheus.Registerer, lockTTL time.Duration) *Metrics {
	m := &Metrics{}
	m.webhookMetrics()
	m.lockMetrics(lockTTL)
	m.signatureMetrics()
	m.lockTTL.Set(lockTTL.Seconds())
	reg.MustRegister(m.requests, m.duration, m.lockObtain, m.lockWait, m.lockHold, m.lockTTL,
		m.lockRelease, m.leaseLost, m.lockRefresh, m.backstopDups, m.mismatches, m.sigFailures, m.sigVerified,
		m.redisUnavailable, m.dbWrites, m.shedTotal, m.stages, m.deliveryDrops, m.ignored, m.fetches)
	for _, o := range []string{"acquired", "busy", "finished", "error"} {
		m.lockObtain.WithLabelValues(o)
	}
	for _, o := range []string{"released", "expired", "lost", "error"} {
		m.lockRelease.WithLabelValues(o)
	}
	return m
}

// webhookMetrics makes the series of the deliveries: answers, latency,
// load shed, database writes and what the constraint caught.
func (m *Metrics) webhookMetrics() {
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_webhook_requests_total",
		Help: "Webhook deliveries answered, by source, result and HTTP status code.",
	}, []string{"source", "result", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "paylock_webhook_request_duration_seconds",
		Help:    "Time to answer a webhook delivery.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"source"})
	m.shedTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paylock_webhook_shed_total",
		Help: "Webhook deliveries answered 503 overloaded: unread because PAYLOCK_MAX_READING bodies were being read, or once read because PAYLOCK_MAX_INFLIGHT deliveries were being processed.",
	})
	m.stages = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paylock_webhook_deliveries_open",
		Help: "Webhook deliveries holding a slot, by stage: reading (their body, at most PAYLOCK_MAX_READING) or processing (at most PAYLOCK_MAX_INFLIGHT).",
	}, []string{"stage"})
	m.reading = m.stages.WithLabelValues("reading")
	m.processing = m.stages.WithLabelValues("processing")
	m.dbWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_db_write_attempts_total",
		Help: "Database write transactions attempted, by source.",
	}, []string{"source"})
	m.backstopDups = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paylock_backstop_duplicates_total",
		Help: "Duplicates caught by the database constraint while the lock was not exclusive (expired, lost, or Redis down).",
	})
	m.mismatches = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paylock_payload_mismatch_total",
		Help: "Deliveries whose transaction id is recorded with another amount or currency.",
	})
	m.deliveryDrops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_delivery_log_dropped_total",
		Help: "Verified deliveries that recorded nothing and were not kept in the delivery log, by source and reason (cap: the source's hourly cap of new bodies was reached; error: the database failed).",
	}, []string{"source", "reason"})
	m.ignored = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_deliveries_ignored_total",
		Help: "Verified deliveries (or items of a batch) answered \"ignored\": they carried nothing the source records, by source and event type (a type the source's adapter names, else \"other\"). A lifecycle type here (a refund, a dispute, a failure, a cancellation, a capture) is money moving that paylock does not see.",
	}, []string{"source", "type"})
	m.fetches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_provider_fetches_total",
		Help: "Payments named by webhooks that carry no payment (Mollie, GoCardless, Stripe thin events), by source and outcome: fetched (the provider's API was asked and what it said recorded), coalesced (a fetch that began after the notice arrived answered it: no request), not_final (the API says the payment is in no state to record yet), gone (the API knows no such payment), paced (over the source's fetch budget: 503, the provider retries), failed (the API did not answer: 503).",
	}, []string{"source", "outcome"})
}

// fetched counts one notice's outcome (paylock_provider_fetches_total).
func (m *Metrics) fetched(source, outcome string) {
	if m != nil {
		m.fetches.WithLabelValues(source, outcome).Inc()
	}
}

// deliveryDropped counts a delivery the delivery log did not keep.
func (m *Metrics) deliveryDropped(source, reason string) {
	if m != nil {
		m.deliveryDrops.WithLabelValues(source, reason).Inc()
	}
}

// lockMetrics makes the series of the lock: obtains, waits, holds against
// the TTL, releases, refreshes, lost leases and Redis outages.
func (m *Metrics) lockMetrics(lockTTL time.Duration) {
	m.lockObtain = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_lock_obtain_total",
		Help: "Lock obtain attempts by outcome (acquired, busy, finished: the transaction settled moments ago, error); every poll of a busy lock counts.",
	}, []string{"outcome"})
	m.lockWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "paylock_lock_wait_seconds",
		Help:    "Time a delivery spent waiting on a busy lock.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10},
	})
	m.lockHold = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "paylock_lock_hold_seconds",
		Help:    "Time from obtaining a lock to releasing it; compare with paylock_lock_ttl_seconds.",
		Buckets: ttlBuckets(lockTTL),
	})
	m.lockTTL = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "paylock_lock_ttl_seconds",
		Help: "The configured lock TTL (PAYLOCK_LOCK_TTL).",
	})
	m.lockRelease = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_lock_release_total",
		Help: "Lock releases by outcome: released; expired (the TTL ran out before release: the TTL is too short); lost (the key vanished while the lease still ran: a Redis failover, flush or eviction); error.",
	}, []string{"outcome"})
	m.leaseLost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paylock_lock_lease_lost_total",
		Help: "Leases the watchdog could not confirm; the request's database work was cancelled.",
	})
	m.lockRefresh = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_lock_refresh_total",
		Help: "Watchdog refreshes by outcome (ok, not_held, error).",
	}, []string{"outcome"})
	m.redisUnavailable = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_redis_unavailable_total",
		Help: "Deliveries that could not reach Redis for their lock, by policy (backstop, reject).",
	}, []string{"policy"})
}

// signatureMetrics makes the series of the signature checks, by source.
func (m *Metrics) signatureMetrics() {
	m.sigFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_signature_failures_total",
		Help: "Deliveries refused for their signature, by source and reason.",
	}, []string{"source", "reason"})
	m.sigVerified = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_signature_verified_total",
		Help: "Deliveries whose signature verified, by source and the index of the source's configured secret that matched (watch the old one fall to zero during a rotation).",
	}, []string{"source", "secret_index"})
}

// LockObserver returns the function to pass to lock.WithObserver, which
// turns the lock's events into metrics.
func (m *Metrics) LockObserver() func(lock.Event) {
	return func(e lock.Event) {
		if m == nil {
			return
		}
		switch e.Kind {
		case lock.EventObtain:
			m.counter(seriesKey{family: famLockObtain, label: e.Outcome}, m.lockObtain, e.Outcome).Inc()
		case lock.EventRelease:
			m.counter(seriesKey{family: famLockRelease, label: e.Outcome}, m.lockRelease, e.Outcome).Inc()
			m.lockHold.Observe(e.Held.Seconds())
		case lock.EventRefresh:
			m.lockRefresh.WithLabelValues(e.Outcome).Inc()
		case lock.EventLeaseLost:
			m.leaseLost.Inc()
		}
	}
}

// sources makes the per-source series exist from the start, at zero, for
// every configured source (the label's only values).
func (m *Metrics) sources(names []string) {
	if m == nil {
		return
	}
	for _, n := range names {
		m.durationOf(n)
		m.counter(seriesKey{family: famDBWrites, source: n}, m.dbWrites, n)
	}
}

// stageReading and stageProcessing count a delivery entering (+1) or
// leaving (-1) a stage.
func (m *Metrics) stageReading(delta float64) {
	if m != nil {
		m.reading.Add(delta)
	}
}

func (m *Metrics) stageProcessing(delta float64) {
	if m != nil {
		m.processing.Add(delta)
	}
}

// shed counts a delivery refused for want of a slot.
func (m *Metrics) shed() {
	if m != nil {
		m.shedTotal.Inc()
	}
}

// observe records one answered delivery.
func (m *Metrics) observe(ctx context.Context, o outcome, took time.Duration) {
	if m == nil {
		return
	}
	result := o.metricResult()
	m.children.get(seriesKey{family: famRequests, source: o.source, label: result, code: o.status}, func() any {
		return m.requests.WithLabelValues(o.source, result, strconv.Itoa(o.status))
	}).(prometheus.Counter).Inc()
	observe(ctx, m.durationOf(o.source), took.Seconds())
	if o.waited {
		observe(ctx, m.lockWait, o.lockWait.Seconds())
	}
	if o.backstopDup {
		m.backstopDups.Inc()
	}
	if o.result == "mismatch" {
		m.mismatches.Inc()
	}
	if o.sigFailure != "" {
		m.counter(seriesKey{family: famSigFailures, source: o.source, label: o.sigFailure}, m.sigFailures, o.source, o.sigFailure).Inc()
	}
	if o.secretIndex >= 0 {
		m.children.get(seriesKey{family: famSigVerified, source: o.source, code: o.secretIndex}, func() any {
			return m.sigVerified.WithLabelValues(o.source, strconv.Itoa(o.secretIndex))
		}).(prometheus.Counter).Inc()
	}
	if o.redisDown != "" {
		m.redisUnavailable.WithLabelValues(o.redisDown).Inc()
	}
	if o.dbWrites > 0 {
		m.counter(seriesKey{family: famDBWrites, source: o.source}, m.dbWrites, o.source).Add(float64(o.dbWrites))
	}
	for _, typ := range o.ignoredTypes {
		if o.result != "ignored" {
			break // the delivery log failed: the sender retries it
		}
		if !o.knownTypes[typ] {
			typ = "other"
		}
		m.counter(seriesKey{family: famIgnored, source: o.source, label: typ}, m.ignored, o.source, typ).Inc()
	}
}

// durationOf is the request duration series of source.
func (m *Metrics) durationOf(source string) prometheus.Observer {
	return m.children.get(seriesKey{family: famDuration, source: source}, func() any {
		return m.duration.WithLabelValues(source)
	}).(prometheus.Observer)
}

// metricResult is the bounded label value for an outcome.
func (o outcome) metricResult() string {
	switch {
	case o.status == http.StatusOK:
		return o.result
	case o.result == "mismatch":
		return "mismatch"
	case o.status == http.StatusUnauthorized:
		return "unauthenticated"
	case o.status == http.StatusConflict:
		return "busy"
	case errors.Is(o.err, context.Canceled):
		return "canceled" // the client went away; not a paylock failure
	case o.status == http.StatusServiceUnavailable:
		return "unavailable"
	case o.status >= 500:
		return "error"
	default:
		return "rejected"
	}
}
