package main

import (
	"strings"
	"testing"
	"time"
)

func TestTheSinkSectionShowsTheMedianOfEachSinkBesideTheQueuesCeiling(t *testing.T) {
	r := &results{Config: runConfig{Reps: 3, Senders: 64, SinkBacklog: 2000, SinkRate: 200, SinkConcurrency: 10, Measure: 10 * time.Second}}
	for rep, per := range []float64{500, 620, 610} {
		for _, sink := range []string{"http", "nats", "kafka"} {
			r.Sinks = append(r.Sinks, sinkRun{Sink: sink, Rep: rep + 1, PerSec: per, LagP50: 60 * time.Millisecond,
				LagP99: time.Duration(100+rep) * time.Millisecond})
		}
	}
	md := renderReport(r)
	if !strings.Contains(md, "## 5. Forward throughput by sink") || !strings.Contains(md, "jobs per fetch cooldown, 1000") {
		t.Fatalf("no sink section with its floor in:\n%s", md)
	}
	for _, sink := range []string{"http", "nats", "kafka"} {
		if !strings.Contains(md, "| "+sink+" | 610 | 60.0 ms | 101 ms | 0 |") {
			t.Errorf("no median row for %s (610 payments/s, lag p50 60 ms, p99 101 ms) in the section", sink)
		}
	}
	if strings.Contains(renderReport(&results{}), "## 5.") {
		t.Error("a run without sinks renders the section")
	}
}
