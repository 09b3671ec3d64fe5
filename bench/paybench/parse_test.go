package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

func TestMedianOfOddAndEvenCounts(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	var l latencies
	for i := 1; i <= 100; i++ {
		l = append(l, time.Duration(101-i)*time.Millisecond) // unsorted on purpose
	}
	s := l.summary()
	if s.N != 100 || s.P50 != 50*time.Millisecond || s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond {
		t.Fatalf("summary = %+v, want N=100 p50=50ms p99=99ms max=100ms", s)
	}
	if got := percentile(latencies{7}, 99); got != 7 {
		t.Fatalf("percentile of one sample = %v, want it", got)
	}
}

func TestParseBenchReadsResultLines(t *testing.T) {
	out := []byte(`goos: linux
BenchmarkObtainRelease-2   	   25918	     45368 ns/op	     877 B/op	      24 allocs/op
BenchmarkCycle/redsync-2     	   22794	     50110.5 ns/op	    1890 B/op	      43 allocs/op
BenchmarkNoMem   	   100	     12 ns/op
PASS
`)
	got := parseBench(out)
	if len(got) != 3 {
		t.Fatalf("parsed %d lines, want 3: %+v", len(got), got)
	}
	if got[0] != (benchLine{"BenchmarkObtainRelease", 45368, 877, 24}) {
		t.Errorf("line 0 = %+v", got[0])
	}
	if got[1].Name != "BenchmarkCycle/redsync" || got[1].NsPerOp != 50110.5 {
		t.Errorf("line 1 = %+v", got[1])
	}
	if got[2].Name != "BenchmarkNoMem" || got[2].BPerOp != 0 {
		t.Errorf("line 2 = %+v", got[2])
	}
}

func TestBenchRatioIsMedianOfPerRoundRatios(t *testing.T) {
	s := benchSamples{}
	s.add([]benchLine{{Name: "A", NsPerOp: 100}, {Name: "F", NsPerOp: 90}})
	s.add([]benchLine{{Name: "A", NsPerOp: 200}, {Name: "F", NsPerOp: 100}}) // a noisy round
	s.add([]benchLine{{Name: "A", NsPerOp: 100}, {Name: "F", NsPerOp: 95}})
	if got := s.ratio("A", "F"); got != 0.9 {
		t.Fatalf("ratio = %v, want 0.9 (the median of 0.9, 0.5, 0.95)", got)
	}
}

func TestParsePgbenchSummary(t *testing.T) {
	out := []byte(`transaction type: pgbench-insert.sql
number of clients: 64
number of transactions actually processed: 42703
number of failed transactions: 2 (0.005%)
latency average = 4.482 ms
initial connection time = 60.123 ms
tps = 14366.123456 (without initial connection time)
`)
	r, err := parsePgbench(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.TPS != 14366.123456 || r.Done != 42703 || r.Failed != 2 {
		t.Fatalf("parsed %+v", r)
	}
	if _, err := parsePgbench([]byte("connection to server failed")); err == nil {
		t.Fatal("no tps line: want an error")
	}
}

func TestReadPgbenchLogSkipsFailedTransactions(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log.1")
	os.WriteFile(p, []byte("0 0 1520 0 1700000000 123\n0 1 failed 0 1700000000 456\n1 0 980 0 1700000000 789\n"), 0o644)
	l, err := readPgbenchLog(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[0] != 1520*time.Microsecond || l[1] != 980*time.Microsecond {
		t.Fatalf("latencies = %v", l)
	}
}

func TestParseMetricsAndSum(t *testing.T) {
	s, err := testkit.ParseMetrics(strings.NewReader(`# HELP paylock_db_write_attempts_total Database write transactions attempted, by source.
# TYPE paylock_db_write_attempts_total counter
paylock_db_write_attempts_total{source="payments"} 1234
paylock_db_write_attempts_total{source="loans"} 7
paylock_lock_obtain_total{outcome="busy"} 5
paylock_lock_obtain_total{outcome="acquired"} 6
paylock_backstop_duplicates_total 2
`))
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
		{"paylock_backstop_duplicates_total", nil, 2},
		{"paylock_missing_total", nil, 0},
	} {
		if got := s.Sum(tc.name, tc.labels...); got != tc.want {
			t.Errorf("sum(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}

func TestScenarioDuplicateShare(t *testing.T) {
	for _, sc := range scenarios {
		want := map[int]int{1: 0, 2: 50, 20: 95}[sc.Copies]
		if got := sc.DupPercent(); got != want {
			t.Errorf("%s: %d %% duplicates, want %d", sc.Name, got, want)
		}
	}
}

func TestReadArrivalsFromTheReplicaLog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "paylock.log")
	lines := []string{
		`{"time":"2026-01-01T00:00:00.010Z","level":"INFO","msg":"paylock listening"}`,
		// tx a: recorded by the copy that started at 0.000 and answered at 0.004;
		// the duplicate started 1 ms later.
		`{"time":"2026-01-01T00:00:00.004Z","msg":"payment webhook","transaction_id":"p-m-a","outcome":"processed","duration":4000000}`,
		`{"time":"2026-01-01T00:00:00.020Z","msg":"payment webhook","transaction_id":"p-m-a","outcome":"duplicate","duration":19000000}`,
		// tx b: the spread is 3 ms.
		`{"time":"2026-01-01T00:00:00.012Z","msg":"payment webhook","transaction_id":"p-m-b","outcome":"processed","duration":2000000}`,
		`{"time":"2026-01-01T00:00:00.030Z","msg":"payment webhook","transaction_id":"p-m-b","outcome":"duplicate","duration":17000000}`,
		// another phase, left out
		`{"time":"2026-01-01T00:00:00.030Z","msg":"payment webhook","transaction_id":"p-w-c","outcome":"processed","duration":1000000}`,
	}
	os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	a, ok := readArrivals(p, "p-m-")
	if !ok {
		t.Fatal("no arrivals read")
	}
	if a.Transactions != 2 || a.Spread.Max != 3*time.Millisecond || a.Spread.P50 != time.Millisecond || a.WinnerHold.Max != 4*time.Millisecond {
		t.Fatalf("arrivals = %+v", a)
	}
	if _, ok := readArrivals(p, "nothing-"); ok {
		t.Fatal("arrivals of no transaction: want not ok")
	}
}
