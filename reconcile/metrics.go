package reconcile

import "github.com/prometheus/client_golang/prometheus"

// outcomes are the outcome labels of paylock_reconcile_payments_total.
var outcomes = []string{"seen", "recorded", "mismatched", "error"}

// NewMetrics registers paylock_reconcile_payments_total{source,outcome}
// with reg, with every series of sources at 0, and returns what counts a
// run: a Worker's Observe.
func NewMetrics(reg prometheus.Registerer, sources []string) func(source string, rep Report, err error) {
	total := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paylock_reconcile_payments_total",
		Help: "Payment events of the provider's API seen by the periodic reconciliation (PAYLOCK_RECONCILE_INTERVAL), by outcome: seen, recorded (paylock had missed it: recorded now), mismatched (recorded with other content: investigate), error (an event or the listing failed; the next run tries again).",
	}, []string{"source", "outcome"})
	reg.MustRegister(total)
	for _, s := range sources {
		for _, o := range outcomes {
			total.WithLabelValues(s, o)
		}
	}
	return func(source string, rep Report, err error) {
		total.WithLabelValues(source, "seen").Add(float64(rep.Seen))
		total.WithLabelValues(source, "recorded").Add(float64(rep.RecordedNow))
		total.WithLabelValues(source, "mismatched").Add(float64(len(rep.Mismatched)))
		errs := len(rep.Errors)
		if err != nil {
			errs++
		}
		total.WithLabelValues(source, "error").Add(float64(errs))
	}
}
