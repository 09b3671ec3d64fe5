package main

import (
	"slices"
	"time"
)

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method, or 0 for none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted)) + 0.999999999)
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

// latencies is a latency record: every sample, sorted when summarised. At
// the rates of one replica on this machine (tens of thousands of samples a
// run) keeping them all is cheaper than a histogram and exact.
type latencies []time.Duration

// summary sorts l and returns its percentiles.
func (l latencies) summary() latencySummary {
	slices.Sort(l)
	return latencySummary{
		N:   len(l),
		P50: percentile(l, 50),
		P90: percentile(l, 90),
		P99: percentile(l, 99),
		Max: percentile(l, 100),
	}
}

type latencySummary struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

// ms formats d in milliseconds with a precision that suits its size.
func ms(d time.Duration) string {
	return fmtFloat(float64(d)/float64(time.Millisecond)) + " ms"
}
