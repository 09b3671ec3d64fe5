package latency_test

import (
	"testing"
	"time"

	"github.com/paylock/paylock/internal/latency"
)

func TestPercentilesUseNearestRank(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p := latency.Of(ds)
	if p.P50 != 50 || p.P90 != 90 || p.P99 != 99 || p.Max != 100 || p.N != 100 {
		t.Fatalf("percentiles = %+v", p)
	}
	if got, want := p.String(), "p50 50.0ms  p90 90.0ms  p99 99.0ms  max 100.0ms"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if one := latency.Of([]time.Duration{3500 * time.Microsecond}); one.P50 != 3.5 || one.P99 != 3.5 || one.N != 1 {
		t.Fatalf("one sample: %+v", one)
	}
	if none := latency.Of(nil); none != (latency.Percentiles{}) || none.String() != "-" {
		t.Fatalf("no samples: %+v %q", none, none.String())
	}
}
