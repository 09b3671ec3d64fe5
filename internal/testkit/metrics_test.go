package testkit_test

import (
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/paylock/paylock/internal/testkit"
)

const page = `# HELP paylock_db_write_attempts_total Database write transactions attempted, by source.
# TYPE paylock_db_write_attempts_total counter
paylock_db_write_attempts_total{source="payments"} 1234
paylock_db_write_attempts_total{source="loans"} 7
# TYPE paylock_lock_obtain_total counter
paylock_lock_obtain_total{outcome="busy"} 5
paylock_lock_obtain_total{outcome="acquired"} 6
paylock_lock_obtain_total_extra 100
# TYPE paylock_webhook_requests_total counter
paylock_webhook_requests_total{code="503",source="payments"} 3
paylock_webhook_requests_total{code="200",source="payments"} 9
paylock_webhook_requests_total{code="503",source="loans"} 1
paylock_backstop_duplicates_total 2
# TYPE paylock_lock_wait_seconds histogram
paylock_lock_wait_seconds_bucket{le="0.1"} 4
paylock_lock_wait_seconds_bucket{le="1"} 6
paylock_lock_wait_seconds_bucket{le="+Inf"} 7
paylock_lock_wait_seconds_sum 2.5
paylock_lock_wait_seconds_count 7
`

func TestParseMetricsSumsTheSeriesWithTheLabelsAsked(t *testing.T) {
	t.Parallel()
	m, err := testkit.ParseMetrics(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"paylock_db_write_attempts_total", []string{`source="payments"`}, 1234},
		{"paylock_db_write_attempts_total", nil, 1241},
		{"paylock_lock_obtain_total", []string{`outcome="busy"`}, 5},
		{"paylock_lock_obtain_total", nil, 11}, // not the _extra metric sharing its prefix
		{"paylock_webhook_requests_total", []string{`code="503"`}, 4},
		{"paylock_webhook_requests_total", []string{`code="503"`, `source="loans"`}, 1},
		{"paylock_webhook_requests_total", []string{`code="50"`}, 0},
		{"paylock_backstop_duplicates_total", nil, 2},
		{"paylock_lock_wait_seconds_count", nil, 7},
		{"paylock_lock_wait_seconds_bucket", []string{`le="+Inf"`}, 7},
		{"paylock_missing_total", nil, 0},
	} {
		if got := m.Sum(tc.name, tc.labels...); got != tc.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if v, ok := m.Value(`paylock_webhook_requests_total{code="503",source="payments"}`); !ok || v != 3 {
		t.Errorf("Value = %v, %v", v, ok)
	}
	if _, ok := m.Value(`paylock_webhook_requests_total{code="404",source="payments"}`); ok {
		t.Error("Value found a series that is not there")
	}
}

func TestParseMetricsRefusesWhatIsNotTheTextFormat(t *testing.T) {
	t.Parallel()
	if _, err := testkit.ParseMetrics(strings.NewReader("paylock_x{code=503} 1\n")); err == nil {
		t.Fatal("an unquoted label value parsed")
	}
}

func TestSumPanicsOnALabelNotWrittenAsTheTextFormatWritesIt(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	testkit.Metrics{}.Sum("x", "code=503")
}

// A registry read directly and the same registry scraped over HTTP give the
// same series.
func TestGatheredAndScrapedAgree(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paylock_test_total", Help: "h"}, []string{"outcome", "source"})
	c.WithLabelValues("busy", "payments").Add(3)
	c.WithLabelValues("acquired", `we"ird`).Inc()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "paylock_test_gauge", Help: "h"})
	g.Set(-1.5)
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "paylock_test_seconds", Help: "h", Buckets: []float64{0.1, 1}})
	h.Observe(0.05)
	h.Observe(3)
	s := prometheus.NewSummary(prometheus.SummaryOpts{Name: "paylock_test_summary", Help: "h", Objectives: map[float64]float64{0.5: 0.05}})
	s.Observe(2)
	reg.MustRegister(c, g, h, s)

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	gathered, scraped := testkit.Gathered(t, reg).Map(), testkit.Scrape(t, srv.URL).Map()
	if !reflect.DeepEqual(gathered, scraped) {
		t.Fatalf("gathered %v\nscraped %v", gathered, scraped)
	}
	for series, want := range map[string]float64{
		`paylock_test_total{outcome="busy",source="payments"}`:    3,
		`paylock_test_total{outcome="acquired",source="we\"ird"}`: 1,
		`paylock_test_gauge`:                     -1.5,
		`paylock_test_seconds_bucket{le="0.1"}`:  1,
		`paylock_test_seconds_bucket{le="+Inf"}`: 2,
		`paylock_test_seconds_count`:             2,
		`paylock_test_summary{quantile="0.5"}`:   2,
		`paylock_test_summary_count`:             1,
	} {
		if got, ok := gathered[series]; !ok || got != want {
			t.Errorf("%s = %v (%v), want %v", series, got, ok, want)
		}
	}
}
