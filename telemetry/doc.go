// Package telemetry builds paylock's OpenTelemetry tracing from the
// standard OTEL_* environment variables, and the log handler that puts the
// trace and span ids on every log line of a traced request.
//
// Tracing is on when OTEL_TRACES_EXPORTER=otlp, or when an OTLP endpoint is
// set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
// It is off when none of them is set, when OTEL_SDK_DISABLED=true and when
// OTEL_TRACES_EXPORTER=none: Setup then installs nothing, the global
// TracerProvider stays OpenTelemetry's no-op one and instrumented code pays
// for a no-op span at most.
//
// FromEnv reads the variables from the getenv it is given (paylock's
// commands read a testable environment, not os.Getenv), so it passes the
// exporter what it read rather than let the exporter read the process's
// environment: the endpoint, the headers, the timeout, the protocol
// (http/protobuf, the default, or grpc), the sampler (OTEL_TRACES_SAMPLER,
// OTEL_TRACES_SAMPLER_ARG, default parentbased_always_on) and the resource
// (OTEL_SERVICE_NAME, default "paylock"; OTEL_RESOURCE_ATTRIBUTES). What it
// does not read (certificates, compression) the exporters read from the
// process's environment themselves. An unknown exporter, protocol or
// sampler, or an endpoint that is no URL, is an error naming the variable.
//
// When on, Setup installs a batch span processor over the OTLP exporter as
// the global TracerProvider, and the W3C trace context and baggage as the
// global propagator: packages that take a trace.TracerProvider option
// default to the global one. Tracing.Shutdown flushes the spans still
// queued; call it on exit.
//
// Headers may carry an API key: a Config never prints them. Nor does it
// print the endpoint's userinfo (a password, or a token alone as in
// https://TOKEN@host), query string or fragment (RedactURL), in its log
// value or in the error of a refused endpoint. An export that fails is a
// structured warning of the logger given to Setup (ErrorHandler, installed
// as OpenTelemetry's global error handler), with those secrets hidden,
// never raw text on stderr.
package telemetry
