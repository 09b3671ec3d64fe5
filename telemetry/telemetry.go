package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// The protocols of OTEL_EXPORTER_OTLP_PROTOCOL that paylock exports with.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// DefaultServiceName is service.name when neither OTEL_SERVICE_NAME nor
// OTEL_RESOURCE_ATTRIBUTES names the service.
const DefaultServiceName = "paylock"

// ErrInvalid is wrapped by FromEnv's errors: a variable's value that
// tracing cannot start with.
var ErrInvalid = errors.New("telemetry: invalid setting")

// Config is the tracing the OTEL_* variables ask for. Its zero value is
// tracing off.
type Config struct {
	// Enabled: spans are exported. False leaves the global TracerProvider
	// alone.
	Enabled bool
	// Protocol is ProtocolHTTP or ProtocolGRPC.
	Protocol string
	// Endpoint is the URL the spans are sent to ("" is the exporter's
	// default: http://localhost:4318/v1/traces, or localhost:4317 for
	// gRPC). For HTTP it carries the path: an OTEL_EXPORTER_OTLP_ENDPOINT
	// gets /v1/traces appended, a signal-specific endpoint is used as is.
	Endpoint string
	// Headers are sent with every export (OTEL_EXPORTER_OTLP_HEADERS,
	// then OTEL_EXPORTER_OTLP_TRACES_HEADERS): never printed.
	Headers map[string]string
	// Timeout bounds one export; 0 is the exporter's default (10s).
	Timeout time.Duration
	// Sampler and SamplerArg are OTEL_TRACES_SAMPLER and its argument.
	Sampler    string
	SamplerArg float64
	// ServiceName is service.name; Attributes the other resource
	// attributes (OTEL_RESOURCE_ATTRIBUTES).
	ServiceName string
	Attributes  []attribute.KeyValue
}

// LogValue shows the settings without the headers' values, and the
// endpoint as RedactURL prints it.
func (c Config) LogValue() slog.Value {
	if !c.Enabled {
		return slog.GroupValue(slog.Bool("enabled", false))
	}
	names := make([]string, 0, len(c.Headers))
	for k := range c.Headers {
		names = append(names, k)
	}
	endpoint := c.Endpoint
	if u, err := url.Parse(endpoint); err == nil {
		endpoint = RedactURL(u)
	} else if endpoint != "" {
		endpoint = "(unparsable)"
	}
	return slog.GroupValue(slog.Bool("enabled", true), slog.String("protocol", c.Protocol),
		slog.String("endpoint", endpoint), slog.Any("headers", names),
		slog.String("sampler", c.Sampler), slog.Float64("sampler_arg", c.SamplerArg),
		slog.String("service_name", c.ServiceName))
}

// Variables lists the variables FromEnv reads, for documentation and
// tests.
var Variables = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
	"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
}

// FromEnv reads the tracing configuration from getenv. Its errors wrap
// ErrInvalid and name the variable.
func FromEnv(getenv func(string) string) (Config, error) {
	first := func(names ...string) (string, string) {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return n, v
			}
		}
		return names[0], ""
	}
	var c Config
	if v := getenv("OTEL_SDK_DISABLED"); strings.EqualFold(strings.TrimSpace(v), "true") {
		return c, nil
	}
	exporter := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	switch exporter {
	case "none":
		return c, nil
	case "", "otlp":
	default:
		return c, invalid("OTEL_TRACES_EXPORTER", exporter, "want otlp or none")
	}
	name, endpoint := first("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if exporter == "" && endpoint == "" {
		return c, nil
	}
	c.Enabled = true
	pname, proto := first("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	switch proto {
	case "":
		c.Protocol = ProtocolHTTP
	case ProtocolHTTP, ProtocolGRPC:
		c.Protocol = proto
	default:
		return c, invalid(pname, proto, "want http/protobuf or grpc")
	}
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// Never the value itself: it may carry a password or a token.
			shown := "(unparsable)"
			if err == nil {
				shown = RedactURL(u)
			}
			return c, invalid(name, shown, "want an http:// or https:// URL")
		}
		if name == "OTEL_EXPORTER_OTLP_ENDPOINT" && c.Protocol == ProtocolHTTP {
			u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		}
		c.Endpoint = u.String()
	}
	var err error
	if c.Headers, err = headers(getenv); err != nil {
		return c, err
	}
	if tname, t := first("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			return c, invalid(tname, t, "want a positive number of milliseconds")
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	if err := c.readSampler(getenv); err != nil {
		return c, err
	}
	return c, c.readResource(getenv)
}

// redacted stands for what RedactURL hides.
const redacted = "xxxxx"

// RedactURL is u as it may be printed: its userinfo (a user and password,
// or a token alone as in https://TOKEN@host), its query string and its
// fragment, any of which may carry a credential, each replaced by xxxxx.
// url.URL.Redacted hides only a password.
func RedactURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.User(redacted)
	}
	if c.RawQuery != "" || c.ForceQuery {
		c.RawQuery, c.ForceQuery = redacted, false
	}
	if c.Fragment != "" {
		c.Fragment, c.RawFragment = redacted, ""
	}
	return c.String()
}

// secrets are the strings of c that an exporter's error must not show:
// the endpoint's userinfo, query and fragment, and the headers' values.
func (c Config) secrets() []string {
	var out []string
	if u, err := url.Parse(c.Endpoint); err == nil {
		if u.User != nil {
			out = append(out, u.User.String(), u.User.Username())
			if p, ok := u.User.Password(); ok {
				out = append(out, p)
			}
		}
		out = append(out, u.RawQuery, u.Fragment, u.EscapedFragment())
	}
	for _, v := range c.Headers {
		out = append(out, v)
	}
	// The longest first, so that a part of a longer secret is not left.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.DeleteFunc(out, func(s string) bool { return len(s) < 3 })
}

func invalid(name, v, why string) error {
	return fmt.Errorf("%w: %s=%q: %s", ErrInvalid, name, v, why)
}

// headers reads the generic then the traces headers (the latter win):
// comma-separated key=value pairs, values URL-encoded.
func headers(getenv func(string) string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for _, pair := range strings.Split(getenv(name), ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			val, err := url.PathUnescape(strings.TrimSpace(v))
			if !ok || k == "" || err != nil {
				// The value may be a secret: the error shows none.
				return nil, fmt.Errorf("%w: %s: want comma-separated key=value pairs", ErrInvalid, name)
			}
			out[k] = val
		}
	}
	return out, nil
}

// readSampler checks OTEL_TRACES_SAMPLER and its argument.
func (c *Config) readSampler(getenv func(string) string) error {
	c.Sampler = strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	if c.Sampler == "" {
		c.Sampler = "parentbased_always_on"
	}
	switch c.Sampler {
	case "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
	default:
		return invalid("OTEL_TRACES_SAMPLER", c.Sampler, "want always_on, always_off, traceidratio, "+
			"parentbased_always_on, parentbased_always_off or parentbased_traceidratio")
	}
	c.SamplerArg = 1
	if v := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG")); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			return invalid("OTEL_TRACES_SAMPLER_ARG", v, "want a ratio from 0 to 1")
		}
		c.SamplerArg = f
	}
	return nil
}

// sampler builds the sampler c names.
func (c Config) sampler() sdktrace.Sampler {
	switch c.Sampler {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(c.SamplerArg)
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SamplerArg))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}

// readResource reads OTEL_RESOURCE_ATTRIBUTES (key=value pairs, values
// URL-encoded) and OTEL_SERVICE_NAME, which wins over a service.name
// among the attributes.
func (c *Config) readResource(getenv func(string) string) error {
	for i, pair := range strings.Split(getenv("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if !ok || k == "" || err != nil {
			// Its position, never its text: a value may be a secret.
			return invalid("OTEL_RESOURCE_ATTRIBUTES", fmt.Sprintf("pair %d", i+1), "want comma-separated key=value pairs")
		}
		if k == string(semconv.ServiceNameKey) {
			c.ServiceName = val
			continue
		}
		c.Attributes = append(c.Attributes, attribute.String(k, val))
	}
	if v := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); v != "" {
		c.ServiceName = v
	}
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	return nil
}

// Tracing is what Setup installed. A nil or off Tracing's methods are
// no-ops.
type Tracing struct {
	provider *sdktrace.TracerProvider
}

// Setup installs the tracing cfg asks for, version being service.version
// ("" leaves it out). Off, it installs nothing and returns an off Tracing.
// On, it builds the OTLP exporter, a batch span processor and the
// resource, and installs the provider and the W3C trace context and
// baggage propagator globally. Exporting is asynchronous: an unreachable
// collector is no start-up error. Setup installs OpenTelemetry's global
// error handler (ErrorHandler), so that an export that fails is a
// structured line of logger, not raw text on stderr.
func Setup(ctx context.Context, cfg Config, version string, logger *slog.Logger) (*Tracing, error) {
	if !cfg.Enabled {
		return &Tracing{}, nil
	}
	otel.SetErrorHandler(ErrorHandler(logger, cfg))
	exp, err := exporter(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	attrs := append([]attribute.KeyValue{semconv.ServiceName(cfg.ServiceName)}, cfg.Attributes...)
	if version != "" {
		attrs = append(attrs, semconv.ServiceVersion(version))
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(cfg.sampler()),
	)
	t := &Tracing{provider: tp}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return t, nil
}

// ErrorHandler is the OpenTelemetry error handler Setup installs: each
// error (an export that failed or timed out, spans dropped) is one
// warning of logger, "tracing: OpenTelemetry error", its text with cfg's
// secrets (the endpoint's userinfo and query, the headers' values)
// replaced by xxxxx. A nil logger is slog.Default().
func ErrorHandler(logger *slog.Logger, cfg Config) otel.ErrorHandler {
	if logger == nil {
		logger = slog.Default()
	}
	secrets := cfg.secrets()
	return otel.ErrorHandlerFunc(func(err error) {
		msg := err.Error()
		for _, s := range secrets {
			msg = strings.ReplaceAll(msg, s, redacted)
		}
		logger.Warn("tracing: OpenTelemetry error", slog.String("error", msg))
	})
}

// exporter builds the OTLP exporter of cfg's protocol with what cfg read.
func exporter(ctx context.Context, cfg Config) (*otlptrace.Exporter, error) {
	if cfg.Protocol == ProtocolGRPC {
		var opts []otlptracegrpc.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		if cfg.Timeout > 0 {
			opts = append(opts, otlptracegrpc.WithTimeout(cfg.Timeout))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	var opts []otlptracehttp.Option
	if cfg.Endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(cfg.Endpoint))
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	if cfg.Timeout > 0 {
		opts = append(opts, otlptracehttp.WithTimeout(cfg.Timeout))
	}
	return otlptracehttp.New(ctx, opts...)
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil && t.provider != nil }

// TracerProvider is the provider Setup installed, or OpenTelemetry's
// no-op one when tracing is off (packages that recognise it skip their
// spans entirely).
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if !t.Enabled() {
		return noop.NewTracerProvider()
	}
	return t.provider
}

// Shutdown flushes the spans still queued and stops exporting, within
// ctx, and (unless another Setup replaced them since) leaves a no-op
// global TracerProvider and propagator: OpenTelemetry's own defaults cannot
// be put back, since they hand over, once and for good, to the first
// provider installed, which is now shut down. It is safe to call on an off
// Tracing and more than once.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	if otel.GetTracerProvider() == trace.TracerProvider(t.provider) {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	}
	return t.provider.Shutdown(ctx)
}

// ChildrenOnly wraps tp so that its tracers start a span only under a
// recording one: a client hook (Redis commands) then adds spans to the
// traces of requests, and starts none of its own for background work
// (health pings, refreshes outside a request).
func ChildrenOnly(tp trace.TracerProvider) trace.TracerProvider { return childrenOnly{tp: tp} }

type childrenOnly struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (c childrenOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childTracer{t: c.tp.Tracer(name, opts...)}
}

type childTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (c childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if parent := trace.SpanFromContext(ctx); !parent.IsRecording() {
		return ctx, noop.Span{}
	}
	return c.t.Start(ctx, name, opts...)
}
