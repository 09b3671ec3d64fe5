package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// ServerConfig is the webhook listener and its limits: where serve listens
// (and serves its metrics), how large and how long a delivery may be, how
// many run at once, and how long in-flight ones may finish on SIGTERM.
type ServerConfig struct {
	Addr            string        // PAYLOCK_ADDR
	MetricsAddr     string        // PAYLOCK_METRICS_ADDR; "": none (off)
	RequestTimeout  time.Duration // PAYLOCK_REQUEST_TIMEOUT: one delivery
	MaxBody         int64         // PAYLOCK_MAX_BODY
	MaxInflight     int           // PAYLOCK_MAX_INFLIGHT: webhook requests handled at once (at least 1)
	ShutdownTimeout time.Duration // PAYLOCK_SHUTDOWN_TIMEOUT
}

func (c *ServerConfig) title() string { return "server" }

func (c *ServerConfig) settings() []setting {
	return []setting{
		{env: "PAYLOCK_ADDR", flag: "addr", def: ":8080", usage: "webhook listener address",
			parse: listenAddr(&c.Addr, false)},
		{env: "PAYLOCK_METRICS_ADDR", flag: "metrics-addr", def: ":9090", usage: "metrics and pprof listener address (off: none)",
			parse: listenAddr(&c.MetricsAddr, true)},
		{env: "PAYLOCK_REQUEST_TIMEOUT", flag: "request-timeout", def: "8s", usage: "how long one webhook delivery may take before it answers 503 (below the PSP's own timeout, often 10s)",
			parse: durationAtLeast(&c.RequestTimeout, 100*time.Millisecond)},
		{env: "PAYLOCK_MAX_BODY", flag: "max-body", def: "1MiB", usage: "largest accepted body (bytes, or with KiB/MiB)",
			parse: func(v string) (err error) { c.MaxBody, err = parseBytes(v); return err }},
		{env: "PAYLOCK_MAX_INFLIGHT", flag: "max-inflight", def: "256", usage: "webhook requests handled at once per process; more wait or are refused",
			parse: positive(&c.MaxInflight)},
		{env: "PAYLOCK_SHUTDOWN_TIMEOUT", flag: "shutdown-timeout", def: "20s", usage: "how long in-flight requests may run after SIGTERM",
			parse: durationAtLeast(&c.ShutdownTimeout, 0)},
	}
}

func (c *ServerConfig) validate() error { return nil }

func (c *ServerConfig) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("addr", c.Addr),
		slog.Int64("max_body", c.MaxBody),
		slog.Int("max_inflight", c.MaxInflight),
	}
}

// maxBodyLimit caps PAYLOCK_MAX_BODY: an unauthenticated caller can make a
// replica buffer this much.
const maxBodyLimit = 64 << 20

// parseBytes reads "1048576", "512KiB" or "1MiB".
func parseBytes(v string) (int64, error) {
	mult := int64(1)
	num := v
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if s, ok := strings.CutSuffix(v, suffix); ok {
			num, mult = s, m
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 {
		return 0, errors.New("want a positive size such as 1048576, 512KiB or 1MiB")
	}
	if n > maxBodyLimit/mult {
		return 0, fmt.Errorf("at most %dMiB: bodies are read whole before the signature is checked", maxBodyLimit>>20)
	}
	return n * mult, nil
}
