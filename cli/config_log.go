package cli

import (
	"errors"
	"io"
	"log/slog"

	"github.com/paylock/paylock/telemetry"
)

// LogConfig is the process's log: its format and level.
type LogConfig struct {
	Format string     // PAYLOCK_LOG_FORMAT: json or text
	Level  slog.Level // PAYLOCK_LOG_LEVEL
}

func (c *LogConfig) title() string { return "logs" }

func (c *LogConfig) settings() []setting {
	return []setting{
		{env: "PAYLOCK_LOG_FORMAT", flag: "log-format", def: "json", usage: "log format: json or text",
			parse: func(v string) error {
				c.Format = v
				if v != "json" && v != "text" {
					return errors.New("want json or text")
				}
				return nil
			}},
		{env: "PAYLOCK_LOG_LEVEL", flag: "log-level", def: "info", usage: "log level: debug, info, warn or error",
			parse: func(v string) error { return c.Level.UnmarshalText([]byte(v)) }},
	}
}

func (c *LogConfig) validate() error { return nil }

func (c *LogConfig) logAttrs() []slog.Attr { return nil }

// logger writes to w in the configured format, from the configured level;
// a line logged with the context of a traced request carries its trace_id
// and span_id (telemetry.LogHandler).
func (c *LogConfig) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.Level}
	if c.Format == "text" {
		return slog.New(telemetry.LogHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, opts)))
}
