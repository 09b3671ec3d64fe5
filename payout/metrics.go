package payout

import "github.com/prometheus/client_golang/prometheus"

// outcomes are the outcomes the worker reports, each exported from the
// start (at 0) so that rates and ratios exist before the first event.
var outcomes = []Outcome{
	OutcomeSent, OutcomeAdopted, OutcomeRetry, OutcomeFailed,
	OutcomeReview, OutcomeNotPending, OutcomeError,
}

// Metrics counts the worker's attempts, paylock_payout_attempts_total
// {outcome}; its Observe method is a Config.Observe.
type Metrics struct {
	attempts *prometheus.CounterVec
}

// NewMetrics registers paylock_payout_attempts_total with reg, every
// outcome's series at 0.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_payout_attempts_total",
		Help: "Payout attempts (River payout jobs worked), by outcome: sent, adopted (found by a lookup of the key: after the key retention, or when a retry was refused), retry (temporary failure: River runs the job again after a backoff), failed (the provider refused), review (flagged for a person), not_pending (the row had moved on: nothing to do), error (the outcome could not be saved; River retries).",
	}, []string{"outcome"})}
	reg.MustRegister(m.attempts)
	for _, o := range outcomes {
		m.attempts.WithLabelValues(string(o))
	}
	return m
}

// Observe counts ev's outcome.
func (m *Metrics) Observe(ev Event) {
	m.attempts.WithLabelValues(string(ev.Outcome)).Inc()
}
