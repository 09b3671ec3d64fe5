package cli

import (
	"log/slog"
	"time"
)

// PayoutConfig is the payout worker's: "paylock worker", or "paylock
// serve" with PAYLOCK_WORKER=true.
type PayoutConfig struct {
	InServe      bool          // PAYLOCK_WORKER
	URL          string        // PAYLOCK_PAYOUT_URL
	Timeout      time.Duration // PAYLOCK_PAYOUT_TIMEOUT
	BackoffCap   time.Duration // PAYLOCK_PAYOUT_BACKOFF_CAP
	KeyRetention time.Duration // PAYLOCK_PROVIDER_KEY_RETENTION
	Concurrency  int           // PAYLOCK_WORKER_CONCURRENCY
	Poll         time.Duration // PAYLOCK_WORKER_POLL
}

func (c *PayoutConfig) title() string { return "payouts" }

func (c *PayoutConfig) settings() []setting {
	return []setting{
		{env: "PAYLOCK_WORKER", flag: "worker", def: "false", usage: "run the payout worker inside serve too",
			parse: boolean(&c.InServe)},
		{env: "PAYLOCK_PAYOUT_URL", flag: "payout-url", usage: "payout provider base URL (required by the worker)",
			parse: func(v string) error { c.URL = v; return checkHTTPURL(v) }},
		{env: "PAYLOCK_PAYOUT_TIMEOUT", flag: "payout-timeout", def: "10s", usage: "timeout of one call to the payout provider",
			parse: durationAtLeast(&c.Timeout, 100*time.Millisecond)},
		{env: "PAYLOCK_PAYOUT_BACKOFF_CAP", flag: "payout-backoff-cap", def: "10m", usage: "longest wait between payout retries",
			parse: durationAtLeast(&c.BackoffCap, time.Second)},
		{env: "PAYLOCK_PROVIDER_KEY_RETENTION", flag: "provider-key-retention", def: "24h", usage: "how long the provider keeps idempotency keys; after that the worker only looks payouts up",
			parse: durationAtLeast(&c.KeyRetention, time.Minute)},
		{env: "PAYLOCK_WORKER_CONCURRENCY", flag: "worker-concurrency", def: "4", usage: "disbursements a worker processes at once",
			parse: positive(&c.Concurrency)},
		{env: "PAYLOCK_WORKER_POLL", flag: "worker-poll", def: "5s", usage: "how often the worker looks for due disbursements without a notification",
			parse: durationAtLeast(&c.Poll, 10*time.Millisecond)},
	}
}

func (c *PayoutConfig) validate() error { return nil }

func (c *PayoutConfig) logAttrs() []slog.Attr { return nil }
