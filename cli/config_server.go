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
	MaxHeaderBytes  int           // PAYLOCK_MAX_HEADER_BYTES: every listener; 431 beyond
	MaxConns        int           // PAYLOCK_MAX_CONNS: open connections of the webhook listener
	MaxReading      int           // PAYLOCK_MAX_READING: webhook bodies being read at once
	MinBodyRate     int64         // PAYLOCK_MIN_BODY_RATE: bytes/s; -1: off
	BodyGrace       time.Duration // PAYLOCK_BODY_GRACE: before MinBodyRate applies
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
		{env: "PAYLOCK_MAX_READING", flag: "max-reading", def: "512", usage: "webhook bodies read at once per process (before the in-flight slot is taken); more are refused unread",
			parse: positive(&c.MaxReading)},
		{env: "PAYLOCK_MIN_BODY_RATE", flag: "min-body-rate", def: "1KiB", usage: "slowest accepted body, bytes per second after PAYLOCK_BODY_GRACE (408 below; off: no floor)",
			parse: c.parseRate},
		{env: "PAYLOCK_BODY_GRACE", flag: "body-grace", def: "2s", usage: "how long a body may take before PAYLOCK_MIN_BODY_RATE applies",
			parse: durationAtLeast(&c.BodyGrace, 100*time.Millisecond)},
		{env: "PAYLOCK_MAX_HEADER_BYTES", flag: "max-header-bytes", def: "64KiB", usage: "largest request headers on every listener (431 above)",
			parse: func(v string) error { n, err := parseBytes(v); c.MaxHeaderBytes = int(n); return err }},
		{env: "PAYLOCK_MAX_CONNS", flag: "max-conns", def: "1024", usage: "open connections of the webhook listener (more wait to be accepted; metrics and admin take 64 each)",
			parse: positive(&c.MaxConns)},
		{env: "PAYLOCK_SHUTDOWN_TIMEOUT", flag: "shutdown-timeout", def: "20s", usage: "how long in-flight requests may run after SIGTERM",
			parse: durationAtLeast(&c.ShutdownTimeout, 0)},
	}
}

func (c *ServerConfig) validate() error { return nil }

// parseRate reads PAYLOCK_MIN_BODY_RATE: a size per second, or off.
func (c *ServerConfig) parseRate(v string) (err error) {
	if v == "off" {
		c.MinBodyRate = -1
		return nil
	}
	c.MinBodyRate, err = parseBytes(v)
	return err
}

func (c *ServerConfig) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("addr", c.Addr),
		slog.Int64("max_body", c.MaxBody),
		slog.Int("max_inflight", c.MaxInflight),
		slog.Int("max_reading", c.MaxReading),
		slog.Int("max_conns", c.MaxConns),
		slog.Int("max_header_bytes", c.MaxHeaderBytes),
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
