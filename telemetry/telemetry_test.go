package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paylock/paylock/internal/otlpsink"
	"github.com/paylock/paylock/telemetry"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestTracingIsOffUnlessAnExporterOrEndpointIsSet(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
		{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
		{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"},
	} {
		c, err := telemetry.FromEnv(envOf(env))
		if err != nil || c.Enabled {
			t.Errorf("%v: enabled=%v err=%v, want off", env, c.Enabled, err)
		}
		tr, err := telemetry.Setup(context.Background(), c, "v1", nil)
		if err != nil || tr.Enabled() {
			t.Errorf("%v: Setup enabled=%v err=%v", env, tr.Enabled(), err)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

func TestFromEnvReadsTheStandardVariables(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want telemetry.Config
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			telemetry.Config{Enabled: true, Protocol: "http/protobuf", Endpoint: "http://collector:4318/v1/traces",
				Sampler: "parentbased_always_on", ServiceName: "paylock"}},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c.example/otlp/", "OTEL_SERVICE_NAME": "paylock-eu"},
			telemetry.Config{Enabled: true, Protocol: "http/protobuf", Endpoint: "https://c.example/otlp/v1/traces",
				Sampler: "parentbased_always_on", ServiceName: "paylock-eu"}},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318"},
			telemetry.Config{Enabled: true, Protocol: "http/protobuf", Endpoint: "http://c:4318/custom",
				Sampler: "parentbased_always_on", ServiceName: "paylock"}},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.01",
			"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_RESOURCE_ATTRIBUTES": "service.name=pl,deployment.environment=prod%20eu"},
			telemetry.Config{Enabled: true, Protocol: "grpc", Endpoint: "http://c:4317", Timeout: 2500 * time.Millisecond,
				Sampler: "parentbased_traceidratio", SamplerArg: 0.01, ServiceName: "pl",
				Attributes: []attribute.KeyValue{attribute.String("deployment.environment", "prod eu")}}},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			telemetry.Config{Enabled: true, Protocol: "http/protobuf", Sampler: "parentbased_always_on", ServiceName: "paylock"}},
	} {
		got, err := telemetry.FromEnv(envOf(tc.env))
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		got.Headers = nil
		if g, w := jsonOf(t, got), jsonOf(t, tc.want); g != w {
			t.Errorf("%v:\n got %s\nwant %s", tc.env, g, w)
		}
	}
}

func jsonOf(t *testing.T, c telemetry.Config) string {
	t.Helper()
	type plain telemetry.Config // without LogValue's redaction
	b, err := json.Marshal(plain(c))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBadValuesAreStartupErrorsNamingTheVariable(t *testing.T) {
	t.Parallel()
	on := "http://collector:4318"
	for _, tc := range []struct {
		env      map[string]string
		variable string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_RESOURCE_ATTRIBUTES": "novalue"}, "OTEL_RESOURCE_ATTRIBUTES"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_EXPORTER_OTLP_HEADERS": "api-key"}, "OTEL_EXPORTER_OTLP_HEADERS"},
	} {
		_, err := telemetry.FromEnv(envOf(tc.env))
		if !errors.Is(err, telemetry.ErrInvalid) || !strings.Contains(err.Error(), tc.variable) {
			t.Errorf("%v: err = %v, want ErrInvalid naming %s", tc.env, err, tc.variable)
		}
	}
}

func TestHeadersNeverPrint(t *testing.T) {
	t.Parallel()
	c, err := telemetry.FromEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:s3cr3t-pass@c:4318",
		"OTEL_EXPORTER_OTLP_HEADERS": "api-key=s3cr3t-value", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-team=pay%20ments"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Headers["api-key"] != "s3cr3t-value" || c.Headers["x-team"] != "pay ments" {
		t.Fatalf("headers = %d read wrong", len(c.Headers))
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", slog.Any("tracing", c))
	if strings.Contains(buf.String(), "s3cr3t") || !strings.Contains(buf.String(), "api-key") {
		t.Fatalf("logged %s", buf.String())
	}
}

// TestSetupExportsOverHTTPAndGRPC sends a span through each protocol to a
// local receiver, with the resource the variables name. Setup installs
// the global provider: this test is not parallel.
func TestSetupExportsOverHTTPAndGRPC(t *testing.T) {
	sink := otlpsink.New()
	defer sink.Close()
	grpcURL, err := sink.StartGRPC()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(quietGlobals)
	for _, tc := range []struct{ protocol, endpoint string }{{"http/protobuf", sink.URL()}, {"grpc", grpcURL}} {
		cfg, err := telemetry.FromEnv(envOf(map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": tc.endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": tc.protocol,
			"OTEL_SERVICE_NAME": "paylock-test", "OTEL_TRACES_SAMPLER": "always_on",
		}))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := telemetry.Setup(context.Background(), cfg, "v9.9.9", nil)
		if err != nil {
			t.Fatal(err)
		}
		if otel.GetTracerProvider() != tr.TracerProvider() {
			t.Fatal("Setup did not install the global TracerProvider")
		}
		if f := otel.GetTextMapPropagator().Fields(); !strings.Contains(strings.Join(f, ","), "traceparent") || !strings.Contains(strings.Join(f, ","), "baggage") {
			t.Fatalf("global propagator fields = %v, want traceparent and baggage", f)
		}
		_, span := otel.Tracer("test").Start(context.Background(), "span over "+tc.protocol)
		span.End()
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, sp := range sink.Spans() {
			if sp.Name == "span over "+tc.protocol {
				found = sp.Service == "paylock-test"
			}
		}
		if !found {
			t.Errorf("%s: span not received with service.name paylock-test: %+v", tc.protocol, sink.Spans())
		}
	}
}

func TestSamplerRatioZeroExportsNothing(t *testing.T) {
	sink := otlpsink.New()
	defer sink.Close()
	t.Cleanup(quietGlobals)
	cfg, err := telemetry.FromEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL(),
		"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := telemetry.Setup(context.Background(), cfg, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.TracerProvider().Tracer("test").Start(context.Background(), "never sampled")
	if span.IsRecording() {
		t.Error("a span sampled at ratio 0 records")
	}
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.Spans()); n != 0 {
		t.Fatalf("%d spans exported at ratio 0", n)
	}
}

func TestLogHandlerAddsTraceAndSpanIDs(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("app", "paylock")
	log.InfoContext(ctx, "in a span")
	log.InfoContext(context.Background(), "outside")
	log.Info("no context")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines: %q", lines)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	if first["trace_id"] != sc.TraceID().String() || first["span_id"] != sc.SpanID().String() || first["app"] != "paylock" {
		t.Fatalf("line in a span: %s", lines[0])
	}
	for _, l := range lines[1:] {
		if strings.Contains(l, "trace_id") || strings.Contains(l, "span_id") {
			t.Errorf("line without a span carries ids: %s", l)
		}
	}
}

func TestChildrenOnlyStartsNoTraceOfItsOwn(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	hook := telemetry.ChildrenOnly(tp).Tracer("hook")
	_, orphan := hook.Start(context.Background(), "PING")
	orphan.End()
	ctx, parent := tp.Tracer("app").Start(context.Background(), "request")
	_, child := hook.Start(ctx, "EVALSHA")
	child.End()
	parent.End()
	var names []string
	for _, sp := range rec.Ended() {
		names = append(names, sp.Name())
		if sp.Name() == "EVALSHA" && sp.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Error("the hook's span is not the request's child")
		}
	}
	if strings.Join(names, ",") != "EVALSHA,request" {
		t.Fatalf("spans = %v, want the child and its parent only", names)
	}
}

// TestBadValuesNeverPrintTheirSecrets: a refused endpoint is named with
// its password redacted, a refused resource attribute by its position.
func TestBadValuesNeverPrintTheirSecrets(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "grpcs://user:s3cr3t-token@collector:4317"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://user:s3cr3t-token@collector"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_RESOURCE_ATTRIBUTES": "team=pay,s3cr3t-token"},
	} {
		_, err := telemetry.FromEnv(envOf(env))
		if !errors.Is(err, telemetry.ErrInvalid) {
			t.Fatalf("%v: got %v, want ErrInvalid", env, err)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("the error prints the secret: %v", err)
		}
	}
}

// quietGlobals leaves no-op globals behind a test that installed a
// provider (OpenTelemetry's defaults cannot be put back: see Shutdown).
func quietGlobals() {
	otel.SetTracerProvider(noop.NewTracerProvider())
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
}

// TestEndpointSecretsNeverPrint: a token alone in the userinfo, a query
// string and a fragment are credentials as much as a password: neither
// the start-up config line nor the error of a refused endpoint shows them.
func TestEndpointSecretsNeverPrint(t *testing.T) {
	t.Parallel()
	for _, endpoint := range []string{
		"https://s3cr3t-token@collector.example:4318",
		"https://collector.example:4318/otlp?api_key=s3cr3t-token",
		"https://user:s3cr3t-pass@collector.example:4318/otlp?token=s3cr3t-token#s3cr3t-frag",
		"https://collector.example:4318/otlp#s3cr3t-frag",
	} {
		c, err := telemetry.FromEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}))
		if err != nil {
			t.Fatalf("%s: %v", endpoint, err)
		}
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", slog.Any("tracing", c))
		if strings.Contains(buf.String(), "s3cr3t") || !strings.Contains(buf.String(), "collector.example:4318") {
			t.Errorf("%s: the config line is %s", endpoint, buf.String())
		}
		bad := strings.Replace(endpoint, "https://", "grpcs://", 1)
		if _, err := telemetry.FromEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": bad})); !errors.Is(err, telemetry.ErrInvalid) ||
			strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "collector.example") {
			t.Errorf("%s: the refusal is %v", bad, err)
		}
	}
}

func TestRedactURLHidesUserinfoQueryAndFragment(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://tok@c:4318/v1/traces":         "https://xxxxx@c:4318/v1/traces",
		"https://u:p@c:4318/v1/traces?k=v#f":   "https://xxxxx@c:4318/v1/traces?xxxxx#xxxxx",
		"http://c:4318/v1/traces?":             "http://c:4318/v1/traces?xxxxx",
		"http://c:4318/v1/traces":              "http://c:4318/v1/traces",
		"http://collector.example/otlp?a=1&b=": "http://collector.example/otlp?xxxxx",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := telemetry.RedactURL(u); got != want {
			t.Errorf("RedactURL(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestExporterErrorsAreStructuredLogLines: an export that fails (the
// collector refuses connections) is a warning of the logger Setup was
// given, with the endpoint's and the headers' secrets hidden, not raw text
// on stderr. Setup installs globals: not parallel.
func TestExporterErrorsAreStructuredLogLines(t *testing.T) {
	t.Cleanup(quietGlobals)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused from now on
	cfg, err := telemetry.FromEnv(envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://s3cr3t-user@" + addr + "/v1/traces?token=s3cr3t-query",
		"OTEL_EXPORTER_OTLP_HEADERS":         "api-key=s3cr3t-header", "OTEL_EXPORTER_OTLP_TIMEOUT": "300",
		"OTEL_TRACES_SAMPLER": "always_on",
	}))
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	tr, err := telemetry.Setup(context.Background(), cfg, "", slog.New(slog.NewJSONHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.TracerProvider().Tracer("test").Start(context.Background(), "lost")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = tr.Shutdown(ctx) // the final export fails: the error handler sees it
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "tracing: OpenTelemetry error" {
			line = m
		}
	}
	if line == nil || line["level"] != "WARN" || line["error"] == "" {
		t.Fatalf("no structured line for the failed export among %q", buf.String())
	}
	if strings.Contains(buf.String(), "s3cr3t") {
		t.Fatalf("a secret is logged: %s", buf.String())
	}

	// Whatever an exporter's error says, the secrets of cfg are hidden.
	buf.Reset()
	telemetry.ErrorHandler(slog.New(slog.NewJSONHandler(&buf, nil)), cfg).Handle(
		errors.New("post http://s3cr3t-user@" + addr + "/v1/traces?token=s3cr3t-query: header api-key: s3cr3t-header refused"))
	if out := buf.String(); strings.Contains(out, "s3cr3t") || !strings.Contains(out, addr) {
		t.Fatalf("the handler logs %s", out)
	}
}

// syncBuffer is a bytes.Buffer the exporter's goroutine and the test may
// share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

// TestSamplersHonourTheirSetting starts a root span, and a span under a
// sampled remote parent, with each sampler: always_off samples neither,
// parentbased_traceidratio follows the parent and samples roots at its
// ratio (none at 0, all at 1). Setup installs globals: not parallel.
func TestSamplersHonourTheirSetting(t *testing.T) {
	sink := otlpsink.New()
	defer sink.Close()
	t.Cleanup(quietGlobals)
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled, Remote: true,
	}))
	for _, tc := range []struct {
		sampler, arg      string
		root, underParent bool
	}{
		{"always_off", "", false, false},
		{"always_on", "", true, true},
		{"parentbased_always_off", "", false, true},
		{"parentbased_traceidratio", "0", false, true},
		{"parentbased_traceidratio", "1", true, true},
		{"traceidratio", "0", false, false},
	} {
		cfg, err := telemetry.FromEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL(),
			"OTEL_TRACES_SAMPLER": tc.sampler, "OTEL_TRACES_SAMPLER_ARG": tc.arg}))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := telemetry.Setup(context.Background(), cfg, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		tracer := tr.TracerProvider().Tracer("test")
		// Many roots: a ratio ignored would sample some of them.
		sampled := 0
		for range 200 {
			_, root := tracer.Start(context.Background(), "root")
			if root.IsRecording() {
				sampled++
			}
			root.End()
		}
		if want := map[bool]int{true: 200, false: 0}[tc.root]; sampled != want {
			t.Errorf("%s %s: %d of 200 roots sampled, want %d", tc.sampler, tc.arg, sampled, want)
		}
		_, child := tracer.Start(parent, "child")
		if child.IsRecording() != tc.underParent {
			t.Errorf("%s %s: the child of a sampled parent records = %v, want %v", tc.sampler, tc.arg, child.IsRecording(), tc.underParent)
		}
		child.End()
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
