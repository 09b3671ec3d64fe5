package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/signature"
)

// config is paylock's whole configuration, filled from the environment and
// overridden by flags, and validated before anything starts.
type config struct {
	DatabaseURL      string
	RedisURL         string
	Addr             string
	MetricsAddr      string
	LockTTL          time.Duration
	LockWait         time.Duration
	LockPrefix       string
	MaxBody          int64
	DefaultCurrency  string
	Currencies       []string
	RedisUnavailable handler.RedisPolicy
	RedisTimeout     time.Duration
	NoLock           bool
	AllowUnsigned    bool
	SignatureScheme  signature.Scheme
	WebhookSecrets   []signature.Secret // never printed: Secret redacts itself
	SigTolerance     time.Duration
	Migrate          bool
	ShutdownTimeout  time.Duration
	DBMaxConns       int32
	StatementTimeout time.Duration
	LogFormat        string
	LogLevel         slog.Level

	secretsRaw string // parsed once the scheme is known
}

// LogValue keeps credentials in the database and Redis URLs out of logs.
func (c config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("database_url", redactURL(c.DatabaseURL)),
		slog.String("redis_url", redactURL(c.RedisURL)),
		slog.String("addr", c.Addr),
		slog.Duration("lock_ttl", c.LockTTL),
		slog.Duration("lock_wait", c.LockWait),
		slog.String("lock_prefix", c.LockPrefix),
		slog.Int64("max_body", c.MaxBody),
		slog.String("redis_unavailable", string(c.RedisUnavailable)),
		slog.Bool("migrate", c.Migrate),
		slog.String("signature_scheme", string(c.SignatureScheme)),
		slog.Any("webhook_secrets", c.WebhookSecrets),
		slog.Duration("signature_tolerance", c.SigTolerance),
		slog.Bool("allow_unsigned", c.AllowUnsigned),
	)
}

// redactURL hides the password of a URL (user:pass@host).
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	at := strings.LastIndex(rest, "@")
	slash := strings.Index(rest, "/")
	if at < 0 || (slash >= 0 && at > slash) {
		return s
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return s
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// setting is one configuration variable: its environment name, its flag,
// its default and how to parse it into the config.
type setting struct {
	env, flag, def, usage string
	parse                 func(c *config, v string) error
}

// secretSettings are never echoed in an error or a log.
var secretSettings = map[string]bool{"PAYLOCK_WEBHOOK_SECRETS": true}

func settings() []setting {
	return []setting{
		{"DATABASE_URL", "database-url", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "Postgres URL",
			func(c *config, v string) error { c.DatabaseURL = v; return nonEmpty(v) }},
		{"REDIS_URL", "redis-url", "redis://127.0.0.1:6379/0", "Redis URL (redis:// or rediss://)",
			func(c *config, v string) error { c.RedisURL = v; return nonEmpty(v) }},
		{"PAYLOCK_ADDR", "addr", ":8080", "webhook listener address",
			func(c *config, v string) error {
				c.Addr = v
				_, _, err := net.SplitHostPort(v)
				return err
			}},
		{"PAYLOCK_METRICS_ADDR", "metrics-addr", ":9090", "metrics and pprof listener address (off: none)",
			func(c *config, v string) error {
				c.MetricsAddr = v
				if v == "off" {
					c.MetricsAddr = ""
					return nil
				}
				_, _, err := net.SplitHostPort(v)
				return err
			}},
		{"PAYLOCK_LOCK_TTL", "lock-ttl", "5s", "lock time-to-live (kept alive by a watchdog)",
			durationAtLeast(func(c *config) *time.Duration { return &c.LockTTL }, 100*time.Millisecond)},
		{"PAYLOCK_LOCK_WAIT", "lock-wait", "2s", "how long a delivery waits for a busy lock before answering 409",
			durationAtLeast(func(c *config) *time.Duration { return &c.LockWait }, 0)},
		{"PAYLOCK_LOCK_PREFIX", "lock-prefix", "paylock:", "prefix of the Redis lock keys",
			func(c *config, v string) error { c.LockPrefix = v; return nonEmpty(v) }},
		{"PAYLOCK_MAX_BODY", "max-body", "1MiB", "largest accepted body (bytes, or with KiB/MiB)",
			func(c *config, v string) (err error) { c.MaxBody, err = parseBytes(v); return err }},
		{"PAYLOCK_DEFAULT_CURRENCY", "default-currency", "", "currency for bodies without one (empty: refuse them)",
			func(c *config, v string) error {
				c.DefaultCurrency = v
				if v != "" && (len(v) != 3 || strings.ToUpper(v) != v) {
					return errors.New("want a three-letter upper-case ISO 4217 code")
				}
				return nil
			}},
		{"PAYLOCK_CURRENCIES", "currencies", "", "comma-separated non-tender ISO 4217 codes to accept as well (e.g. XTS)",
			func(c *config, v string) error { c.Currencies = splitList(v); return nil }},
		{"PAYLOCK_REDIS_UNAVAILABLE", "redis-unavailable", "backstop", "when Redis is down: backstop (record on the database constraint alone) or reject (503)",
			func(c *config, v string) error {
				c.RedisUnavailable = handler.RedisPolicy(v)
				if v != string(handler.Backstop) && v != string(handler.Reject) {
					return errors.New("want backstop or reject")
				}
				return nil
			}},
		{"PAYLOCK_LOCK", "lock", "on", "on: the Redis lock guards each transaction; off: the database constraint alone (for benchmarks)",
			func(c *config, v string) error {
				switch v {
				case "on", "off":
					c.NoLock = v == "off"
					return nil
				}
				return errors.New("want on or off")
			}},
		{"PAYLOCK_REDIS_TIMEOUT", "redis-timeout", "500ms", "Redis dial/read/write timeout (well below the lock TTL)",
			durationAtLeast(func(c *config) *time.Duration { return &c.RedisTimeout }, time.Millisecond)},
		{"PAYLOCK_ALLOW_UNSIGNED", "allow-unsigned", "false", "accept unsigned webhooks (local development only)",
			func(c *config, v string) (err error) { c.AllowUnsigned, err = strconv.ParseBool(v); return err }},
		{"PAYLOCK_SIGNATURE_SCHEME", "signature-scheme", "standard", "webhook signature scheme: standard (Standard Webhooks) or stripe",
			func(c *config, v string) (err error) { c.SignatureScheme, err = signature.ParseScheme(v); return err }},
		{"PAYLOCK_WEBHOOK_SECRETS", "webhook-secrets", "", "comma-separated signing secrets (several during a rotation)",
			func(c *config, v string) error { c.secretsRaw = v; return nil }},
		{"PAYLOCK_SIGNATURE_TOLERANCE", "signature-tolerance", "5m", "replay window: how far a signature timestamp may be from now",
			durationAtLeast(func(c *config) *time.Duration { return &c.SigTolerance }, time.Second)},
		{"PAYLOCK_MIGRATE", "migrate", "true", "apply database migrations when serve starts",
			func(c *config, v string) (err error) { c.Migrate, err = strconv.ParseBool(v); return err }},
		{"PAYLOCK_SHUTDOWN_TIMEOUT", "shutdown-timeout", "20s", "how long in-flight requests may run after SIGTERM",
			durationAtLeast(func(c *config) *time.Duration { return &c.ShutdownTimeout }, 0)},
		{"PAYLOCK_DB_MAX_CONNS", "db-max-conns", "0", "Postgres pool size (0: pgxpool's default)",
			func(c *config, v string) error {
				n, err := strconv.ParseInt(v, 10, 32)
				if err == nil && n < 0 {
					err = errors.New("must not be negative")
				}
				c.DBMaxConns = int32(n)
				return err
			}},
		{"PAYLOCK_DB_STATEMENT_TIMEOUT", "db-statement-timeout", "5s", "server-side statement_timeout for paylock's sessions",
			durationAtLeast(func(c *config) *time.Duration { return &c.StatementTimeout }, time.Millisecond)},
		{"PAYLOCK_LOG_FORMAT", "log-format", "json", "log format: json or text",
			func(c *config, v string) error {
				c.LogFormat = v
				if v != "json" && v != "text" {
					return errors.New("want json or text")
				}
				return nil
			}},
		{"PAYLOCK_LOG_LEVEL", "log-level", "info", "log level: debug, info, warn or error",
			func(c *config, v string) error { return c.LogLevel.UnmarshalText([]byte(v)) }},
	}
}

func nonEmpty(v string) error {
	if v == "" {
		return errors.New("must not be empty")
	}
	return nil
}

func durationAtLeast(field func(*config) *time.Duration, least time.Duration) func(*config, string) error {
	return func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		if d < least {
			return fmt.Errorf("must be at least %s", least)
		}
		*field(c) = d
		return nil
	}
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

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
	return n * mult, nil
}

// loadConfig fills a config from getenv, then from flags in args. A bad
// value is an error naming the variable or flag. It returns the arguments
// left after the flags.
func loadConfig(name string, args []string, getenv func(string) string) (config, []string, error) {
	var c config
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(discard{})
	for _, s := range settings() {
		v := getenv(s.env)
		if v == "" {
			v = s.def
		}
		if err := s.parse(&c, v); err != nil {
			if secretSettings[s.env] {
				return c, nil, fmt.Errorf("invalid %s: %v", s.env, err)
			}
			return c, nil, fmt.Errorf("invalid %s=%q: %v", s.env, v, err)
		}
		fs.Func(s.flag, s.usage+" (env "+s.env+")", func(v string) error { return s.parse(&c, v) })
	}
	if err := fs.Parse(args); err != nil {
		return c, nil, err
	}
	if c.secretsRaw != "" {
		secrets, err := signature.ParseSecrets(c.SignatureScheme, c.secretsRaw)
		if err != nil {
			return c, nil, fmt.Errorf("invalid PAYLOCK_WEBHOOK_SECRETS: %v", err)
		}
		c.WebhookSecrets, c.secretsRaw = secrets, ""
	}
	if c.RedisTimeout*2 > c.LockTTL {
		return c, nil, fmt.Errorf("invalid PAYLOCK_REDIS_TIMEOUT=%s: must be at most half of PAYLOCK_LOCK_TTL (%s)", c.RedisTimeout, c.LockTTL)
	}
	return c, fs.Args(), nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
