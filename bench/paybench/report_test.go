package main

import (
	"strings"
	"testing"
	"time"
)

// webhookRunOf is a measured run of sc: deliveries/s, and the CPU of
// paylock and of the Postgres backends per delivery, in µs.
func webhookRunOf(sc scenario, rep int, perSec float64, paylockUs, postgresUs int) webhookRun {
	const sent = 10000
	return webhookRun{
		Scenario: sc, Rep: rep,
		Meas: phase{Sent: sent, Acked: int(perSec * 10), Distinct: sent, Elapsed: 10 * time.Second},
		CPU: cpuUse{MachineAll: 20 * time.Second, MachineBusy: 19 * time.Second, Groups: map[string]time.Duration{
			"paylock":  time.Duration(paylockUs*sent) * time.Microsecond,
			"postgres": time.Duration(postgresUs*sent) * time.Microsecond,
		}},
	}
}

func scenarioNamed(t *testing.T, name string) scenario {
	t.Helper()
	for _, sc := range scenarios {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %s", name)
	return scenario{}
}

// hotRow returns the line of the hot-path table that starts with prefix.
func hotRow(t *testing.T, md, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "| "+prefix) {
			return l
		}
	}
	t.Fatalf("no row %q in:\n%s", prefix, md)
	return ""
}

func TestReportPrintsTheHotPathFiguresWithTheirVerdicts(t *testing.T) {
	lock0, off0 := scenarioNamed(t, "lock-0"), scenarioNamed(t, "off-0")
	r := &results{
		Config:  runConfig{Senders: 64, Reps: 2, HandlerCount: 2, HandlerBenchtime: "1s"},
		Env:     envInfo{CPUs: 2},
		Pgbench: []pgbenchRun{{Rep: 1, pgbenchResult: pgbenchResult{TPS: 2000}}, {Rep: 2, pgbenchResult: pgbenchResult{TPS: 2000}}},
		Webhooks: []webhookRun{
			// lock ÷ pgbench: 0.50 and 0.40 (median 0.45, met); lock ÷ off:
			// 0.92 and 0.90 (median 0.91, met); paylock CPU 80 and 100
			// (median 90, met); Postgres CPU 120 (missed).
			webhookRunOf(lock0, 1, 1000, 80, 120), webhookRunOf(off0, 1, 1000/0.92, 60, 110),
			webhookRunOf(lock0, 2, 800, 100, 120), webhookRunOf(off0, 2, 800/0.90, 60, 110),
		},
		Handler: benchSamples{},
	}
	r.Handler.add(parseBench([]byte("BenchmarkPaymentDelivery/unique-2 2000 1500000 ns/op 19000 B/op 235 allocs/op\n" +
		"BenchmarkPaymentDelivery/unique-2 2000 2500000 ns/op 19100 B/op 236 allocs/op\n")))
	md := renderReport(r)
	for _, c := range []struct{ prefix, want string }{
		{"webhook throughput ÷ pgbench INSERT floor (unique deliveries, 64 senders) | 0.25× | ≥ 0.45× | 0.45× | 0.40×–0.50× | **met** |", ""},
		{"lock mode ÷ database-only mode (PAYLOCK_LOCK=off), unique deliveries | 0.74× | ≥ 0.90× | 0.91× | 0.90×–0.92× | **met** |", ""},
		{"paylock's own CPU per unique delivery (from /proc) | 181 µs | ≤ 90 µs | 90 µs | 80 µs–100 µs | **met** |", ""},
		{"Postgres backend CPU per delivery | 156 µs (pgbench floor ≈ 100 µs all-in) | ≤ 110 µs | 120 µs |", "**missed**"},
		{"unique transactions, lock on | 2000 | 1500–2500 | 500 | 19050 | 236 | 2 |", ""},
	} {
		if row := hotRow(t, md, c.prefix); c.want != "" && !strings.HasSuffix(row, c.want+" |") {
			t.Errorf("row %q: want %s", row, c.want)
		}
	}
	if strings.Contains(md, "≥ 0.6 × pgbench") {
		t.Error("the report still carries the old 0.6 × pgbench target")
	}
}

func TestReportWithoutWebhookRunsSaysNotMeasured(t *testing.T) {
	md := renderReport(&results{Config: runConfig{Senders: 64}, LockPkg: benchSamples{}, Locks: benchSamples{}})
	if got := strings.Count(md, "| not measured |"); got < hotFigures {
		t.Fatalf("%d figures not measured, want at least %d:\n%s", got, hotFigures, md)
	}
}

func TestALabelledScenarioGetsARowBesideTheFloor(t *testing.T) {
	extra := scenario{Name: "fwd-0", Copies: 1, Env: []string{"PAYLOCK_FORWARD_URL=http://127.0.0.1:1/"}, Label: "paylock, lock on, forwarding"}
	saved := scenarios
	scenarios = append(append([]scenario(nil), saved...), extra)
	defer func() { scenarios = saved }()
	r := &results{
		Config:   runConfig{Senders: 64, Reps: 1},
		Env:      envInfo{CPUs: 2},
		Pgbench:  []pgbenchRun{{Rep: 1, pgbenchResult: pgbenchResult{TPS: 2000}}},
		Webhooks: []webhookRun{webhookRunOf(scenarioNamed(t, "lock-0"), 1, 1000, 80, 100), webhookRunOf(extra, 1, 500, 80, 100)},
	}
	md := renderReport(r)
	if row := hotRow(t, md, "paylock, lock on, forwarding, acknowledged deliveries"); !strings.Contains(row, "| 0.25× |") {
		t.Fatalf("forwarding row %q: want 0.25× the floor", row)
	}
}

func TestReportSaysHowThePaymentsWentToPostgres(t *testing.T) {
	run := webhookRunOf(scenarioNamed(t, "lock-0"), 1, 1000, 80, 100) // 10000 acknowledged over 10s
	run.BatchRows, run.BatchStatements, run.Stalls = 6000, 500, 20
	r := &results{
		Config:   runConfig{Senders: 64, Reps: 1},
		Env:      envInfo{CPUs: 2},
		Pgbench:  []pgbenchRun{{Rep: 1, pgbenchResult: pgbenchResult{TPS: 2000}}},
		Webhooks: []webhookRun{run},
	}
	md := renderReport(r)
	// 50 statements/s of 12 rows each; 20 stall-rule writers, 2 per 1000
	// deliveries.
	if want := "| paylock, lock on | 50 | 12.0 | 20.0 | 2.00 |"; !strings.Contains(md, want) {
		t.Fatalf("no row %q in:\n%s", want, md)
	}
}
