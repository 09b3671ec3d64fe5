package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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
		tr, err := telemetry.Setup(context.Background(), c, "v1")
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
		tr, err := telemetry.Setup(context.Background(), cfg, "v9.9.9")
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
	tr, err := telemetry.Setup(context.Background(), cfg, "")
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
