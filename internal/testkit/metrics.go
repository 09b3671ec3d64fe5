package testkit

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one series of a metric family and its value, as the text
// format prints it: a histogram is its _bucket (with le), _sum and _count
// series, a summary its quantiles, _sum and _count.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// String is the series as "name{k="v",...}", labels sorted by name.
func (s Sample) String() string {
	if len(s.Labels) == 0 {
		return s.Name
	}
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, s.Labels[k])
	}
	return s.Name + "{" + strings.Join(parts, ",") + "}"
}

// Metrics are the samples of a scrape or a registry.
type Metrics []Sample

// ParseMetrics reads the Prometheus text exposition format with
// Prometheus's own parser.
func ParseMetrics(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("prometheus text format: %w", err)
	}
	fs := make([]*dto.MetricFamily, 0, len(families))
	for _, f := range families {
		fs = append(fs, f)
	}
	return fromFamilies(fs), nil
}

// Gatherer is what Gathered reads: a prometheus.Registry, say.
type Gatherer interface {
	Gather() ([]*dto.MetricFamily, error)
}

// Gathered returns the samples of g, failing the test when it cannot
// gather.
func Gathered(t testing.TB, g Gatherer) Metrics {
	t.Helper()
	fs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fromFamilies(fs)
}

// scrapeClient bounds a scrape, so that a stalled server fails the test
// instead of hanging it.
var scrapeClient = &http.Client{Timeout: 10 * time.Second}

// Scrape fetches url, a /metrics page, and parses it, failing the test on
// any error or a status other than 200.
func Scrape(t testing.TB, url string) Metrics {
	t.Helper()
	res, err := scrapeClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	m, err := ParseMetrics(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return m
}

// Sum adds up the samples named name whose labels include every one of
// labels, each written as the text format prints it: `code="503"`. No
// labels: every sample of the name. A label not in that form panics.
func (m Metrics) Sum(name string, labels ...string) float64 {
	want := parseLabels(labels)
	sum := 0.0
	for _, s := range m {
		if s.Name == name && hasLabels(s, want) {
			sum += s.Value
		}
	}
	return sum
}

// Value returns the value of one series written as Sample.String writes
// it, and whether it is there.
func (m Metrics) Value(series string) (float64, bool) {
	for _, s := range m {
		if s.String() == series {
			return s.Value, true
		}
	}
	return 0, false
}

// Map returns every series, as Sample.String writes it, and its value.
func (m Metrics) Map() map[string]float64 {
	out := make(map[string]float64, len(m))
	for _, s := range m {
		out[s.String()] = s.Value
	}
	return out
}

func parseLabels(labels []string) map[string]string {
	want := make(map[string]string, len(labels))
	for _, l := range labels {
		k, quoted, ok := strings.Cut(l, "=")
		v, err := strconv.Unquote(quoted)
		if !ok || err != nil {
			panic(fmt.Sprintf("testkit: label %q is not written name=\"value\"", l))
		}
		want[k] = v
	}
	return want
}

func hasLabels(s Sample, want map[string]string) bool {
	for k, v := range want {
		if got, ok := s.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// fromFamilies flattens families into samples, in the order of the text
// format: families by name, each family's series as given.
func fromFamilies(fs []*dto.MetricFamily) Metrics {
	slices.SortFunc(fs, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	var out Metrics
	for _, f := range fs {
		for _, m := range f.GetMetric() {
			out = append(out, samplesOf(f.GetName(), m)...)
		}
	}
	return out
}

// samplesOf returns the series one metric prints as.
func samplesOf(name string, m *dto.Metric) []Sample {
	labels := map[string]string{}
	for _, lp := range m.GetLabel() {
		labels[lp.GetName()] = lp.GetValue()
	}
	with := func(k, v string) map[string]string {
		out := make(map[string]string, len(labels)+1)
		for lk, lv := range labels {
			out[lk] = lv
		}
		out[k] = v
		return out
	}
	switch {
	case m.Counter != nil:
		return []Sample{{name, labels, m.Counter.GetValue()}}
	case m.Gauge != nil:
		return []Sample{{name, labels, m.Gauge.GetValue()}}
	case m.Untyped != nil:
		return []Sample{{name, labels, m.Untyped.GetValue()}}
	case m.Histogram != nil:
		h := m.Histogram
		var out []Sample
		inf := false
		for _, b := range h.GetBucket() {
			inf = math.IsInf(b.GetUpperBound(), +1)
			out = append(out, Sample{name + "_bucket", with("le", formatFloat(b.GetUpperBound())), float64(b.GetCumulativeCount())})
		}
		if !inf { // a registry leaves the +Inf bucket implicit
			out = append(out, Sample{name + "_bucket", with("le", "+Inf"), float64(h.GetSampleCount())})
		}
		return append(out, Sample{name + "_sum", labels, h.GetSampleSum()}, Sample{name + "_count", labels, float64(h.GetSampleCount())})
	case m.Summary != nil:
		s := m.Summary
		var out []Sample
		for _, q := range s.GetQuantile() {
			out = append(out, Sample{name, with("quantile", formatFloat(q.GetQuantile())), q.GetValue()})
		}
		return append(out, Sample{name + "_sum", labels, s.GetSampleSum()}, Sample{name + "_count", labels, float64(s.GetSampleCount())})
	}
	return nil
}

// formatFloat writes a bucket bound or quantile as the text format does.
func formatFloat(f float64) string {
	if math.IsInf(f, +1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
