package forward

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylock/paylock/store"
)

// outcomes are exported from the start (at 0) so that increase() and rates
// exist before the first forward.
var outcomes = []Outcome{OutcomeDelivered, OutcomeFailedAttempt, OutcomeDiscarded}

// Metrics counts forward attempts, paylock_forward_total{outcome} and
// paylock_forward_destination_total{destination,outcome}, and times the
// delivered ones' lag, paylock_forward_lag_seconds; its Observe
// method is a Config.Observe. It counts the jobs left to another replica,
// paylock_forward_destination_mismatch_total{destination}; its Mismatch
// method is a Config.Mismatch.
type Metrics struct {
	total         *prometheus.CounterVec
	byDestination *prometheus.CounterVec
	lag           prometheus.Histogram
	mismatch      *prometheus.CounterVec
	moves         *prometheus.CounterVec
	paceFallbacks *prometheus.CounterVec
	states        *stateCollector
}

// destinationStates are the states paylock_forward_destination_state
// exports, each at 0 or 1.
var destinationStates = []store.DestinationState{store.DestinationHealthy, store.DestinationFailing, store.DestinationParked}

// stateCollector exports each destination's state as a worker last read it
// (Worker.DestinationStates), once a worker is watched.
type stateCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	read func() map[string]store.DestinationState
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	read := c.read
	c.mu.Unlock()
	if read == nil {
		return
	}
	for dest, st := range read() {
		for _, s := range destinationStates {
			v := 0.0
			if s == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, dest, string(s))
		}
	}
}

// NewMetrics registers the forward counters with reg, every outcome of
// paylock_forward_total at 0.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_forward_total",
		Help: "Forward attempts (recorded payments and disbursement status changes sent to PAYLOCK_FORWARD_URL or a source's forward_url), by outcome: delivered (2xx), failed_attempt (anything else; River retries), discarded (the last attempt failed, or the payment is gone: 'paylock forward retry' puts it back).",
	}, []string{"outcome"}), byDestination: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_forward_destination_total",
		Help: "Forward attempts as paylock_forward_total counts them, by destination (default: PAYLOCK_FORWARD_URL; a source's own forward_url is named after the source; (url): a job from before destinations were named) and outcome.",
	}, []string{"destination", "outcome"}), lag: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "paylock_forward_lag_seconds",
		Help:    "Time from a forward job's creation (in the transaction that recorded its payment or change) to the destination's success: how far the outbox runs behind the intake.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 900},
	}), mismatch: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_forward_destination_mismatch_total",
		Help: "Forward jobs this replica left to another (snoozed, no attempt spent) because the destination they name is defined otherwise here, or not at all: its fingerprint (URL, scheme, signing, types, filter, header names) differs from the job's. Replicas disagree on the sources file.",
	}, []string{"destination"}), moves: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_forward_destination_moves_total",
		Help: "Moves of a destination's health made by this replica's breaker, by destination and the state it entered: failing (3 consecutive failed attempts, or half of the last 20), parked (park_after consecutive failures with no success for 5s: its jobs wait, kept, no attempt spent), healthy (a probe or an attempt succeeded, or 'paylock forward resume').",
	}, []string{"destination", "to"}), paceFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_forward_pace_fallbacks_total",
		Help: "Deliveries to a destination with a concurrency or rate that this replica paced on its own because the shared pacer (Redis) could not answer: meanwhile the destination may see up to one cap per replica.",
	}, []string{"destination"}), states: &stateCollector{desc: prometheus.NewDesc("paylock_forward_destination_state",
		"A destination's health as this replica last read it (every second): 1 for its state (healthy, failing, parked), 0 for the others. Parked: its jobs wait until a probe succeeds or 'paylock forward resume'.",
		[]string{"destination", "state"}, nil)}}
	reg.MustRegister(m.total, m.byDestination, m.lag, m.mismatch, m.moves, m.paceFallbacks, m.states)
	for _, o := range outcomes {
		m.total.WithLabelValues(string(o))
	}
	return m
}

// Moved counts a move of a destination (Config.Moved).
func (m *Metrics) Moved(destination string, to store.DestinationState) {
	m.moves.WithLabelValues(destination, string(to)).Inc()
}

// Watch exports w's destinations' states as paylock_forward_destination_state.
func (m *Metrics) Watch(w *Worker) {
	m.states.mu.Lock()
	defer m.states.mu.Unlock()
	m.states.read = w.DestinationStates
}

// PaceFallback counts a delivery this replica paced on its own
// (Config.PaceFallback).
func (m *Metrics) PaceFallback(destination string) {
	m.paceFallbacks.WithLabelValues(destination).Inc()
}

// Mismatch counts a job left to another replica (Config.Mismatch).
func (m *Metrics) Mismatch(destination string) {
	m.mismatch.WithLabelValues(destination).Inc()
}

// Observe counts ev's attempt.
func (m *Metrics) Observe(ev Event) {
	m.total.WithLabelValues(string(ev.Outcome)).Inc()
	m.byDestination.WithLabelValues(ev.Destination, string(ev.Outcome)).Inc()
	if ev.Outcome == OutcomeDelivered && ev.Lag > 0 {
		m.lag.Observe(ev.Lag.Seconds())
	}
}
