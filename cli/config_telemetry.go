package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paylock/paylock/telemetry"
)

// TelemetryConfig is tracing, read from OpenTelemetry's standard
// variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME,
// OTEL_TRACES_SAMPLER, ...: telemetry.Variables) by telemetry.FromEnv.
// They have no flags: every OpenTelemetry SDK reads them so.
type TelemetryConfig struct {
	telemetry.Config
}

func (c *TelemetryConfig) title() string {
	return "tracing (OpenTelemetry: the standard OTEL_* variables, no flags)"
}

func (c *TelemetryConfig) settings() []setting { return nil }

func (c *TelemetryConfig) validate() error { return nil }

func (c *TelemetryConfig) logAttrs() []slog.Attr { return []slog.Attr{slog.Any("tracing", c.Config)} }

// load reads the OTEL_* variables; an error names the variable.
func (c *TelemetryConfig) load(getenv func(string) string) (err error) {
	c.Config, err = telemetry.FromEnv(getenv)
	return err
}

// tracerProvider is what the packages trace with: the global provider
// (startTracing installed it), or with tracing off OpenTelemetry's no-op
// one, which the handler recognises and skips at no cost.
func (c TelemetryConfig) tracerProvider() trace.TracerProvider {
	if !c.Enabled {
		return noop.NewTracerProvider()
	}
	return otel.GetTracerProvider()
}

// tracingShutdownTimeout bounds the flush of the spans still queued on
// exit.
const tracingShutdownTimeout = 5 * time.Second

// startTracing installs the tracing cfg asks for (nothing when it is
// off) and returns what stops it: a flush of the queued spans, within
// tracingShutdownTimeout, logged when it fails.
func startTracing(ctx context.Context, cfg TelemetryConfig, logger *slog.Logger) (stop func(), err error) {
	tr, err := telemetry.Setup(ctx, cfg.Config, buildVersion(), logger)
	if err != nil {
		return nil, err
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingShutdownTimeout)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			logger.Warn("tracing: flushing the last spans failed", slog.Any("error", err))
		}
	}, nil
}

// traceRedis has rdb's commands traced (redisotel) when tracing is on,
// each as a child of the request's span: a command outside a traced
// request (a readiness ping) starts no trace of its own. Off, rdb is left
// as it is: the hook would cost every command even with a no-op tracer.
// The commands' arguments (keys, lock tokens) are not recorded; the
// lock's own spans name the key.
func traceRedis(cfg TelemetryConfig, rdb redis.UniversalClient, logger *slog.Logger) {
	if !cfg.Enabled {
		return
	}
	err := redisotel.InstrumentTracing(rdb,
		redisotel.WithTracerProvider(telemetry.ChildrenOnly(otel.GetTracerProvider())),
		redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false))
	if err != nil {
		logger.Warn("tracing: Redis commands are not traced", slog.Any("error", err))
	}
}
