package cli

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/source"
)

// ForwardConfig is forwarding recorded payments (and disbursement status
// changes) to the team's own service: the default destination, the
// secrets that sign every forward, and the forward worker's bounds.
type ForwardConfig struct {
	URL         string             // PAYLOCK_FORWARD_URL: the default destination; "": none (a source may have its own forward_url)
	Secrets     []signature.Secret // PAYLOCK_FORWARD_SECRETS: Standard Webhooks (whsec_) secrets signing forwards; never printed
	Concurrency int                // PAYLOCK_FORWARD_CONCURRENCY: forwards in flight per process
	Timeout     time.Duration      // PAYLOCK_FORWARD_TIMEOUT: one forward attempt
	MaxAttempts int                // PAYLOCK_FORWARD_MAX_ATTEMPTS: attempts before River discards the job
	BackoffCap  time.Duration      // PAYLOCK_FORWARD_BACKOFF_CAP: the longest wait between two attempts; 0: River's backoff, uncapped
	Express     bool               // PAYLOCK_FORWARD_EXPRESS: a message's first attempt goes through the outbox's express lane, not River

	secretsRaw string // parsed by validate
}

func (c *ForwardConfig) title() string { return "forwarding" }

func (c *ForwardConfig) settings() []setting {
	return []setting{
		{env: "PAYLOCK_FORWARD_URL", flag: "forward-url", usage: "where every recorded payment is forwarded: an http(s) URL (signed with PAYLOCK_FORWARD_SECRETS), nats://host:port/subject (JetStream) or kafka://host:port/topic (empty: none)",
			parse: func(v string) error { c.URL = v; return checkForwardURL(v) }},
		{env: "PAYLOCK_FORWARD_SECRETS", flag: "forward-secrets", secret: true, usage: "comma-separated Standard Webhooks secrets (whsec_...) signing forwarded payments",
			parse: text(&c.secretsRaw)},
		{env: "PAYLOCK_FORWARD_CONCURRENCY", flag: "forward-concurrency", def: "64", usage: "forwards in flight at once per process",
			parse: positive(&c.Concurrency)},
		{env: "PAYLOCK_FORWARD_TIMEOUT", flag: "forward-timeout", def: "10s", usage: "timeout of one forward attempt",
			parse: durationAtLeast(&c.Timeout, 100*time.Millisecond)},
		{env: "PAYLOCK_FORWARD_MAX_ATTEMPTS", flag: "forward-max-attempts", def: "25", usage: "attempts of one forward before it is discarded",
			parse: positive(&c.MaxAttempts)},
		{env: "PAYLOCK_FORWARD_EXPRESS", flag: "forward-express", def: "true", usage: "send each message's first attempt from the outbox's express lane (a table of its own, claimed and completed in batches) and hand only what it cannot deliver at once to River; false: every message is a River job from the start. Every replica and worker of a database must agree",
			parse: boolean(&c.Express)},
		{env: "PAYLOCK_FORWARD_BACKOFF_CAP", flag: "forward-backoff-cap", usage: "longest wait between two attempts of a forward whose destination has no retry schedule of its own (empty: River's backoff, attempt⁴ seconds, uncapped)",
			parse: func(v string) error {
				if v == "" {
					c.BackoffCap = 0
					return nil
				}
				return durationAtLeast(&c.BackoffCap, time.Second)(v)
			}},
	}
}

// backoff is the forward worker's wait after failed attempt n: River's
// attempt⁴ seconds, capped at BackoffCap, with up to 10% of jitter; nil
// without a cap (River's own policy).
func (c *ForwardConfig) backoff() func(attempt int) time.Duration {
	if c.BackoffCap <= 0 {
		return nil
	}
	limit := c.BackoffCap
	return func(attempt int) time.Duration {
		n := float64(max(attempt, 1))
		d := time.Duration(min(n*n*n*n, limit.Seconds()) * float64(time.Second))
		return min(d, limit) - time.Duration(rand.Int64N(int64(d/10)+1))
	}
}

// validate parses PAYLOCK_FORWARD_SECRETS and refuses an http(s) forward
// URL without them: the receiving service must be able to tell paylock's
// forwards from anyone's. A broker URL (nats://, kafka://) needs none: the
// broker authenticates paylock (forward.NeedsSignature).
func (c *ForwardConfig) validate() error {
	if c.secretsRaw != "" {
		secrets, err := source.ParseSecrets(signature.SchemeStandard, c.secretsRaw)
		if err != nil {
			return fmt.Errorf("invalid PAYLOCK_FORWARD_SECRETS: %w", err)
		}
		c.Secrets, c.secretsRaw = secrets, ""
	}
	if c.URL != "" && len(c.Secrets) == 0 && forward.NeedsSignature(c.URL) {
		return fmt.Errorf("invalid PAYLOCK_FORWARD_URL=%q: PAYLOCK_FORWARD_SECRETS must be set to sign the forwarded payments", forward.Redact(c.URL))
	}
	return nil
}

func (c *ForwardConfig) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("forward_url", forward.Redact(c.URL)),
		slog.Any("forward_secrets", c.Secrets),
		slog.Int("forward_concurrency", c.Concurrency),
		slog.Duration("forward_timeout", c.Timeout),
		slog.Int("forward_max_attempts", c.MaxAttempts),
		slog.Duration("forward_backoff_cap", c.BackoffCap),
	}
}

// checkForwardURL accepts "" (no forward) or a URL a registered sink
// takes (forward.CheckURL: an absolute http(s) URL with a host and no
// fragment, a nats:// subject or a kafka:// topic).
func checkForwardURL(v string) error {
	if v == "" {
		return nil
	}
	return forward.CheckURL(v)
}
