// Package latency summarises a run's latencies as nearest-rank
// percentiles in milliseconds, the shape the storm commands (cmd/pspsim,
// cmd/syncrace) print in their JSON and scripts/chaos.sh reads
// (ack_latency_ms.p99, .max).
package latency

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Percentiles of a latency distribution, in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	N   int     `json:"n"`
}

// Of returns the percentiles of ds by the nearest-rank method (the
// smallest sample at or above the rank ⌈p·n⌉); ds is sorted in place. No
// samples: the zero Percentiles.
func Of(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	rank := func(p float64) float64 {
		i := int(p*float64(len(ds))+0.999999) - 1 // ceil(p·n) - 1
		i = min(max(i, 0), len(ds)-1)
		return ms(ds[i])
	}
	return Percentiles{P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: ms(ds[len(ds)-1]), N: len(ds)}
}

func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// String is "p50 1.2ms  p90 3.4ms  p99 5.6ms  max 7.8ms", or "-" for no
// samples.
func (p Percentiles) String() string {
	if p.N == 0 {
		return "-"
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + "ms" }
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  max %s", f(p.P50), f(p.P90), f(p.P99), f(p.Max))
}
