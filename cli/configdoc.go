package cli

import (
	"fmt"
	"io"
	"strings"
)

// otelVariable is one of OpenTelemetry's standard variables that paylock
// reads (telemetry.Variables): they have no flags, so they are documented
// here rather than in a concern's settings.
type otelVariable struct {
	name, def, usage string
}

// otelVariables are the OTEL_* variables telemetry.FromEnv reads, as
// "paylock serve -h" and docs/configuration.md list them.
var otelVariables = []otelVariable{
	{"OTEL_EXPORTER_OTLP_ENDPOINT", "", "the collector's base URL (/v1/traces is appended for HTTP); setting it turns tracing on"},
	{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "", "the traces URL, used as is (wins over OTEL_EXPORTER_OTLP_ENDPOINT); setting it turns tracing on"},
	{"OTEL_TRACES_EXPORTER", "", "otlp turns tracing on (to http://localhost:4318 without an endpoint); none keeps it off whatever else is set"},
	{"OTEL_SDK_DISABLED", "false", "true: no tracing whatever else is set"},
	{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", "http/protobuf or grpc"},
	{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "", "the same for traces only (wins over OTEL_EXPORTER_OTLP_PROTOCOL)"},
	{"OTEL_EXPORTER_OTLP_HEADERS", "", "key=value,... sent with every export (an API key: never logged)"},
	{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "", "further key=value,... for traces, added to OTEL_EXPORTER_OTLP_HEADERS (a key in both: this one's value; never logged)"},
	{"OTEL_EXPORTER_OTLP_TIMEOUT", "10000", "one export's timeout, in milliseconds"},
	{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "", "the same for traces only (wins over OTEL_EXPORTER_OTLP_TIMEOUT)"},
	{"OTEL_TRACES_SAMPLER", "parentbased_always_on", "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio"},
	{"OTEL_TRACES_SAMPLER_ARG", "1", "the sampler's ratio (0.01: 1 %)"},
	{"OTEL_SERVICE_NAME", "paylock", "the traces' service.name"},
	{"OTEL_RESOURCE_ATTRIBUTES", "", "further resource attributes, key=value,... (deployment.environment=prod); service.version is paylock's version"},
}

// concernDocs names each concern's section of docs/configuration.md and
// the page that explains its settings, by the concern's title.
var concernDocs = map[string]struct{ heading, more string }{
	"database":       {"Database", "[how-it-works.md](how-it-works.md#batching), [scaling.md](scaling.md#postgres-connections)"},
	"lock and Redis": {"Lock and Redis", "[how-it-works.md](how-it-works.md#the-lock), [lock-ttl.md](lock-ttl.md), [scaling.md](scaling.md#redis-deployments)"},
	"server":         {"Server", "[operations.md](operations.md#limits), [security.md](security.md)"},
	"webhook sources": {"Webhook sources",
		"[sources.md](sources.md), [disbursements.md](disbursements.md) (the `loans` and `payouts` sources)"},
	"admin":                      {"Admin listener", "[operations.md](operations.md#the-admin-listener), [admin-api.md](admin-api.md)"},
	"forwarding":                 {"Forwarding", "[brokers.md](brokers.md), [receiving.md](receiving.md)"},
	"reconciliation":             {"Reconciliation", "[operations.md](operations.md#retention-and-reconciliation)"},
	"orders":                     {"Orders", "[checkout.md](checkout.md)"},
	"payouts":                    {"Payouts", "[disbursements.md](disbursements.md#configuration)"},
	"logs":                       {"Logs", "[operations.md](operations.md#metrics-alerts-health-logs)"},
	"delivery log":               {"Delivery log", "[delivery-log.md](delivery-log.md)"},
	(&TelemetryConfig{}).title(): {"Tracing", "[tracing.md](tracing.md)"},
}

// configurationDoc writes docs/configuration.md: every setting of every
// concern, in the order "paylock serve -h" lists them, then the OTEL_*
// variables. TestConfigurationDoc keeps the file equal to it.
func configurationDoc(w io.Writer) error {
	fmt.Fprint(w, `# Configuration

<!-- Generated from the settings tables in cli/config*.go by
     go test ./cli -run TestConfigurationDoc -update
     Edit the tables, not this file. -->

Every setting is an environment variable with a flag override of the same
meaning (`+"`paylock serve -h`"+` lists them all), except OpenTelemetry's standard
`+"`OTEL_*`"+` variables, which have no flags. A bad value stops start-up with one
line naming the variable. Secret settings are never logged nor shown in an
error. Each section links the page that explains its settings.
`)
	for _, k := range (&Config{}).concerns() {
		d, ok := concernDocs[k.title()]
		if !ok {
			return fmt.Errorf("concern %q has no entry in concernDocs", k.title())
		}
		fmt.Fprintf(w, "\n## %s\n\nSee %s.\n\n", d.heading, d.more)
		if k.settings() == nil {
			writeOTELTable(w)
			continue
		}
		fmt.Fprint(w, "| variable | flag | default | meaning |\n| --- | --- | --- | --- |\n")
		for _, s := range k.settings() {
			usage := mdCell(s.usage)
			if s.secret {
				usage += " (secret: never logged)"
			}
			fmt.Fprintf(w, "| `%s` | `--%s` | %s | %s |\n", s.env, s.flag, mdDefault(s.def), usage)
		}
	}
	return nil
}

func writeOTELTable(w io.Writer) {
	fmt.Fprint(w, "| variable | default | meaning |\n| --- | --- | --- |\n")
	for _, v := range otelVariables {
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", v.name, mdDefault(v.def), mdCell(v.usage))
	}
}

func mdDefault(def string) string {
	if def == "" {
		return "(none)"
	}
	return "`" + def + "`"
}

// mdCell escapes what would end a table cell or read as HTML.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}
