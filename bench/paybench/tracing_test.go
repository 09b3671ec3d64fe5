package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// exportRequest builds an ExportTraceServiceRequest with perScope spans in
// each of scopes scope_spans of one resource_spans, with other fields
// around them as an exporter sends (resource, scope, span names).
func exportRequest(scopes, perScope int) []byte {
	span := protowire.AppendTag(nil, 5, protowire.BytesType) // Span.name
	span = protowire.AppendString(span, "paylock.delivery")
	scope := protowire.AppendTag(nil, 1, protowire.BytesType) // ScopeSpans.scope
	scope = protowire.AppendBytes(scope, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "paylock"))
	for range perScope {
		scope = protowire.AppendTag(scope, 2, protowire.BytesType)
		scope = protowire.AppendBytes(scope, span)
	}
	scope = protowire.AppendTag(scope, 3, protowire.BytesType) // schema_url
	scope = protowire.AppendString(scope, "https://opentelemetry.io/schemas/1.26.0")
	rs := protowire.AppendTag(nil, 1, protowire.BytesType) // ResourceSpans.resource
	rs = protowire.AppendBytes(rs, nil)
	for range scopes {
		rs = protowire.AppendTag(rs, 2, protowire.BytesType)
		rs = protowire.AppendBytes(rs, scope)
	}
	req := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(req, rs)
}

func TestTheOTLPEndpointCountsTheSpansOfEveryExportAndAnswers200(t *testing.T) {
	o, err := startOTLPReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	plain := exportRequest(2, 3)
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write(exportRequest(1, 4))
	zw.Close()
	for _, c := range []struct {
		body     []byte
		encoding string
		want     int
	}{{plain, "", 200}, {zipped.Bytes(), "gzip", 200}, {[]byte{0xff, 0xff}, "", 400}} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+o.Addr+"/v1/traces", bytes.NewReader(c.body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		if c.encoding != "" {
			req.Header.Set("Content-Encoding", c.encoding)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want || c.want == 200 && resp.ContentLength != 0 {
			t.Errorf("answered %d with %d bytes, want %d and an empty ExportTraceServiceResponse", resp.StatusCode, resp.ContentLength, c.want)
		}
	}
	got := o.stats()
	if got.Spans != 10 || got.Requests != 2 || got.Refused != 1 || got.Bytes == 0 {
		t.Errorf("stats %+v, want 10 spans in 2 requests, 1 refused", got)
	}
}

func TestTraceEnvSetsTheStandardVariablesOnlyWhenOn(t *testing.T) {
	if env := traceEnv(traceOff, ""); env != nil {
		t.Errorf("tracing off sets %v", env)
	}
	env := traceEnv(traceOnce, "127.0.0.1:4318")
	for _, want := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", "OTEL_TRACES_SAMPLER=parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG=0.01", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"} {
		if !slices.Contains(env, want) {
			t.Errorf("tracing at 1 %%: %v lacks %s", env, want)
		}
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	if slices.ContainsFunc(environ("OTEL_"), func(kv string) bool { return strings.HasPrefix(kv, "OTEL_") }) {
		t.Error("environ(OTEL_) kept an OTEL_ variable")
	}
}

func TestTheTracingSectionComparesEachRunWithTheOffRunOfItsRepetition(t *testing.T) {
	r := &results{Config: runConfig{Reps: 1, Senders: 64, Measure: 10 * time.Second}}
	for _, c := range []struct {
		name   string
		perSec float64
		spans  int64
	}{{"trace-off", 2000, 0}, {"trace-100", 1500, 150000}, {"trace-1", 1900, 0}} {
		w := webhookRunOf(scenarioNamed(t, c.name), 1, c.perSec, 100, 200)
		w.Trace = &traceStats{Spans: c.spans, Requests: c.spans / 512}
		r.Webhooks = append(r.Webhooks, w)
	}
	md := renderReport(r)
	for _, want := range []string{
		"## 6. Tracing (issue #19)",
		"| 1 | off (no OTEL_* variable) | 2000 | 1.00× |",
		"| 1 | on, 100 % sampled | 1500 | 0.75× |",
		"| 1 | on, 1 % sampled | 1900 | 0.95× |",
		"| 0 (not traced) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(renderReport(&results{}), "## 6.") {
		t.Error("a run without tracing scenarios renders the section")
	}
}

// The endpoint takes what OpenTelemetry's own OTLP/HTTP exporter sends, as
// a replica configured by OTEL_EXPORTER_OTLP_ENDPOINT would.
func TestTheOTLPEndpointTakesWhatTheSDKsExporterSends(t *testing.T) {
	o, err := startOTLPReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+o.Addr+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	for range 5 {
		_, span := tp.Tracer("paybench").Start(ctx, "delivery")
		span.End()
	}
	if err := tp.Shutdown(ctx); err != nil { // flushes, and fails if the endpoint refused the export
		t.Fatalf("export: %v", err)
	}
	if got := o.stats(); got.Spans != 5 || got.Requests < 1 || got.Refused != 0 {
		t.Errorf("stats %+v, want the 5 spans exported", got)
	}
}
