package main

import (
	"fmt"
	"os"
	"strings"
)

// The tracing scenarios (issue #19): the unique-delivery run of lock mode
// with tracing off, and on at 100 % and 1 % sampling, exporting over
// OTLP/HTTP to paybench's own endpoint (otlp.go). They run in the first
// repetition only, back to back, to keep the added time near 40 s.
const (
	traceOff  = "off"
	traceAll  = "1.0"
	traceOnce = "0.01"
)

// traceStats is what the OTLP endpoint received from one replica.
type traceStats struct {
	Requests, Bytes, Spans int64
	Refused                int64 // requests it could not read
}

// traceEnv returns the replica settings of a tracing scenario: none for
// off (and no OTEL_* variable inherited either: replicaConfig.DropEnv),
// else the standard OTEL_* variables pointing at endpoint with ratio
// sampling at arg; the batch span processor keeps its defaults.
func traceEnv(sampling, endpoint string) []string {
	if sampling == traceOff {
		return nil
	}
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_TRACES_SAMPLER=parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG=" + sampling,
		"OTEL_SERVICE_NAME=paylock-bench",
	}
}

// environ returns the process's environment without the variables whose
// names start with prefix ("" keeps them all).
func environ(prefix string) []string {
	if prefix == "" {
		return os.Environ()
	}
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return out
}

// samplingLabel names a tracing scenario's setting in the report.
func samplingLabel(s string) string {
	switch s {
	case traceOff:
		return "off (no OTEL_* variable)"
	case traceAll:
		return "on, 100 % sampled"
	case traceOnce:
		return "on, 1 % sampled"
	}
	return s
}

// traceSection is section 6 of the report: throughput with tracing off
// and on, each run's ratio to the off run of the same repetition.
func (rp *report) traceSection() {
	var runs []webhookRun
	for _, w := range rp.r.Webhooks {
		if w.Scenario.Trace != "" {
			runs = append(runs, w)
		}
	}
	if len(runs) == 0 {
		return
	}
	off := map[int]float64{}
	for _, w := range runs {
		if w.Scenario.Trace == traceOff {
			off[w.Rep] = w.Meas.DeliveriesPerSec()
		}
	}
	rp.p("## 6. Tracing (issue #19): throughput with tracing off and on")
	rp.p("")
	rp.p("One replica, lock mode, unique deliveries (as section 2's first row), run back to back with tracing")
	rp.p("off (no `OTEL_*` variable), then on at 100 %% and at 1 %% sampling: `OTEL_TRACES_SAMPLER=parentbased_traceidratio`,")
	rp.p("`OTEL_TRACES_SAMPLER_ARG=1.0` / `0.01`, exporting over OTLP/HTTP (`OTEL_EXPORTER_OTLP_ENDPOINT`) to an")
	rp.p("endpoint of paybench's own on this machine that answers every `POST /v1/traces` 200 and counts the spans;")
	rp.p("the batch span processor at its defaults (`OTEL_BSP_*` unset). **vs off**: deliveries/s ÷ the off run's of")
	rp.p("the same repetition. A run \"on\" that received no span means the replica does not trace.")
	rp.p("")
	rp.p("| rep | tracing | deliveries/s | vs off | p50 | p99 | paylock CPU per delivery | spans received | export requests | bytes |")
	rp.p("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, w := range runs {
		ratio := ""
		if o := off[w.Rep]; o > 0 {
			ratio = fmtRatio(w.Meas.DeliveriesPerSec() / o)
		}
		st := traceStats{}
		if w.Trace != nil {
			st = *w.Trace
		}
		spans := fmt.Sprint(st.Spans)
		if w.Scenario.Trace != traceOff && st.Spans == 0 {
			spans = "0 (not traced)"
		}
		rp.p("| %d | %s | %s | %s | %s ms | %s ms | %s µs | %s | %d | %d |", w.Rep, samplingLabel(w.Scenario.Trace),
			fmtRate(w.Meas.DeliveriesPerSec()), ratio, fmtFloat(durMs(w.Meas.Latency.P50)), fmtFloat(durMs(w.Meas.Latency.P99)),
			fmtFloat(cpuPer(w.CPU.Groups["paylock"], w.Meas.Acked)), spans, st.Requests, st.Bytes)
	}
	rp.p("")
}
