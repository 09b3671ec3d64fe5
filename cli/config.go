package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
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
	LockFinishedTTL  time.Duration
	RequestTimeout   time.Duration
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
	Payout           payoutSettings // the payout worker's (worker.go)
	EventRetention   time.Duration  // PAYLOCK_EVENT_RETENTION; 0: serve does not purge (purge.go)

	// Redis deployments and the database behind a pooler (redis.go).
	RedisMode             string
	RedisAddrs            []string
	RedisSentinelMaster   string
	RedisSentinelAddrs    []string
	RedisUsername         string
	RedisPassword         string // never printed
	RedisSentinelUsername string
	RedisSentinelPassword string // never printed
	RedisTLS              bool
	RedisTLSCAFile        string
	RedisTLSServerName    string
	DBExecMode            store.ExecMode
	MigrateDatabaseURL    string

	// Webhook sources (sources.go): the built-in loans and payouts sources'
	// schemes, and the file adding or overriding sources. loadSources turns
	// them, with the payments settings above, into []sourceSpec.
	LoanSignatureScheme   signature.Scheme // PAYLOCK_LOAN_SIGNATURE_SCHEME
	PayoutSignatureScheme signature.Scheme // PAYLOCK_PAYOUT_SIGNATURE_SCHEME
	SourcesFile           string           // PAYLOCK_SOURCES_FILE; "": the built-in sources only

	// Hardening: admission, the admin listener, profiling.
	MaxInflight int    // PAYLOCK_MAX_INFLIGHT: webhook requests handled at once (at least 1)
	AdminAddr   string // PAYLOCK_ADMIN_ADDR; "": no admin listener (PAYLOCK_ADMIN_ADDR=off)
	AdminToken  string // PAYLOCK_ADMIN_TOKEN; never printed; required off loopback
	// AdminTokens are PAYLOCK_ADMIN_TOKENS: further named admin tokens
	// (name:token,...; tokens never printed). A token's name is who
	// resolves a review item with it.
	AdminTokens []admin.Token
	Pprof       bool // PAYLOCK_PPROF: serve net/http/pprof

	Forward forwardSettings // forwarding recorded payments to the team's own service

	Reconcile reconcileSettings // reconciling payments against the provider's API (reconcile_payments.go)

	// Raw secret lists, read by loadSources (never printed). secretsRaw is
	// PAYLOCK_WEBHOOK_SECRETS, also parsed into WebhookSecrets.
	secretsRaw       string
	loanSecretsRaw   string // PAYLOCK_LOAN_SECRETS
	payoutSecretsRaw string // PAYLOCK_PAYOUT_SECRETS

	// adminListener, when set (tests), is used instead of listening on
	// AdminAddr.
	adminListener net.Listener
	// getenv is the environment loadConfig read, for loadSources (serve
	// reads each source's secrets_env variable from it).
	getenv func(string) string
}

// forwardSettings are the PAYLOCK_FORWARD_* settings: where and how recorded
// payments are forwarded (a River job inserted with the payment).
type forwardSettings struct {
	URL         string             // PAYLOCK_FORWARD_URL; "": no global forward (a source may set its own forward_url)
	Secrets     []signature.Secret // PAYLOCK_FORWARD_SECRETS: Standard Webhooks (whsec_) secrets signing forwards; never printed
	Concurrency int                // PAYLOCK_FORWARD_CONCURRENCY: forwards in flight per process
	Timeout     time.Duration      // PAYLOCK_FORWARD_TIMEOUT: one forward attempt
	MaxAttempts int                // PAYLOCK_FORWARD_MAX_ATTEMPTS: attempts before River discards the job

	secretsRaw string // parsed in loadConfig
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
		slog.String("redis_mode", c.RedisMode),
		slog.Any("redis_addrs", c.RedisAddrs),
		slog.String("redis_sentinel_master", c.RedisSentinelMaster),
		slog.Any("redis_sentinel_addrs", c.RedisSentinelAddrs),
		slog.Bool("redis_tls", c.RedisTLS),
		slog.String("db_exec_mode", string(c.DBExecMode)),
		slog.String("migrate_database_url", redactURL(c.MigrateDatabaseURL)),
		slog.String("loan_signature_scheme", string(c.LoanSignatureScheme)),
		slog.String("payout_signature_scheme", string(c.PayoutSignatureScheme)),
		slog.String("sources_file", c.SourcesFile),
		slog.Int("max_inflight", c.MaxInflight),
		slog.String("admin_addr", c.AdminAddr),
		slog.Bool("admin_token_set", c.AdminToken != ""),
		slog.Any("admin_token_names", adminTokenNames(c.AdminTokens)),
		slog.Bool("pprof", c.Pprof),
		slog.String("forward_url", forward.Redact(c.Forward.URL)),
		slog.Any("forward_secrets", c.Forward.Secrets),
		slog.Int("forward_concurrency", c.Forward.Concurrency),
		slog.Duration("forward_timeout", c.Forward.Timeout),
		slog.Int("forward_max_attempts", c.Forward.MaxAttempts),
		slog.Duration("reconcile_interval", c.Reconcile.Interval),
		slog.Duration("reconcile_window", c.Reconcile.Window),
		slog.String("stripe_api_url", redactURL(c.Reconcile.StripeURL)),
		slog.Bool("stripe_api_key_set", c.Reconcile.stripeKey != ""),
	)
}

// String and Format print the config as LogValue does, so that no verb of
// fmt (%v, %+v, %#v, %s) can print a password, a token or a secret.
func (c config) String() string { return c.LogValue().String() }

// Format implements fmt.Formatter with String for every verb.
func (c config) Format(f fmt.State, _ rune) { io.WriteString(f, c.String()) }

// MarshalJSON writes what LogValue shows.
func (c config) MarshalJSON() ([]byte, error) { return groupJSON(c.LogValue()) }

var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('[^']*'|\S+)`)

// redactURL hides the password of a database or Redis URL, whether it is in
// the userinfo (user:pass@host), in a password query parameter, or in a
// key=value DSN (password=...).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" && u.User == nil {
		// Not a URL Go can parse: a key=value DSN, or a broken URL whose
		// userinfo must still be hidden.
		if scheme, rest, ok := strings.Cut(s, "://"); ok {
			if at := strings.LastIndex(rest, "@"); at >= 0 {
				user, _, _ := strings.Cut(rest[:at], ":")
				s = scheme + "://" + user + ":xxxxx" + rest[at:]
			}
		}
		return dsnPassword.ReplaceAllString(s, "${1}xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// shown is how a setting's value may appear in an error: never for secrets,
// redacted for URLs.
func shown(env, v string) string {
	switch {
	case secretSettings[env]:
		return ""
	case env == "PAYLOCK_FORWARD_URL":
		return "=" + strconv.Quote(forward.Redact(v)) // its query may hold a token too
	case strings.HasSuffix(env, "_URL"):
		return "=" + strconv.Quote(redactURL(v))
	default:
		return "=" + strconv.Quote(v)
	}
}

// setting is one configuration variable: its environment name, its flag,
// its default and how to parse it into the config.
type setting struct {
	env, flag, def, usage string
	parse                 func(c *config, v string) error
}

// secretSettings are never echoed in an error or a log.
var secretSettings = map[string]bool{"PAYLOCK_WEBHOOK_SECRETS": true,
	"PAYLOCK_REDIS_PASSWORD": true, "PAYLOCK_REDIS_SENTINEL_PASSWORD": true, "PAYLOCK_MIGRATE_DATABASE_URL": true,
	"PAYLOCK_LOAN_SECRETS": true, "PAYLOCK_PAYOUT_SECRETS": true, "PAYLOCK_ADMIN_TOKEN": true, "PAYLOCK_FORWARD_SECRETS": true,
	"PAYLOCK_ADMIN_TOKENS": true, "STRIPE_API_KEY": true}

func settings() []setting {
	return []setting{
		{"DATABASE_URL", "database-url", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "Postgres URL",
			func(c *config, v string) error { c.DatabaseURL = v; return store.CheckURL(v) }},
		{"REDIS_URL", "redis-url", "redis://127.0.0.1:6379/0", "Redis URL (redis:// or rediss://)",
			func(c *config, v string) error {
				c.RedisURL = v
				if _, err := redis.ParseURL(v); err != nil {
					var ue *url.Error
					if errors.As(err, &ue) {
						err = ue.Err // the url.Error would repeat the URL, password and all
					}
					return err
				}
				return nil
			}},
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
		{"PAYLOCK_LOCK_FINISHED_TTL", "lock-finished-ttl", "10s", "how long a settled transaction's lock key keeps a finished marker, so late duplicates settle with a read (0: release plainly)",
			durationAtLeast(func(c *config) *time.Duration { return &c.LockFinishedTTL }, 0)},
		{"PAYLOCK_REQUEST_TIMEOUT", "request-timeout", "8s", "how long one webhook delivery may take before it answers 503 (below the PSP's own timeout, often 10s)",
			durationAtLeast(func(c *config) *time.Duration { return &c.RequestTimeout }, 100*time.Millisecond)},
		{"PAYLOCK_LOCK_PREFIX", "lock-prefix", "paylock:", "prefix of the Redis lock keys",
			func(c *config, v string) error { c.LockPrefix = v; return nonEmpty(v) }},
		{"PAYLOCK_MAX_BODY", "max-body", "1MiB", "largest accepted body (bytes, or with KiB/MiB)",
			func(c *config, v string) (err error) { c.MaxBody, err = parseBytes(v); return err }},
		{"PAYLOCK_DEFAULT_CURRENCY", "default-currency", "", "currency for bodies without one (empty: refuse them)",
			func(c *config, v string) error { c.DefaultCurrency = v; return nil }},
		{"PAYLOCK_CURRENCIES", "currencies", "", "comma-separated non-tender ISO 4217 codes to accept as well (e.g. XTS)",
			func(c *config, v string) error {
				c.Currencies = splitList(v)
				return payload.CheckCurrencies("", c.Currencies)
			}},
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
		{"PAYLOCK_REDIS_MODE", "redis-mode", "standalone", "Redis deployment: standalone (REDIS_URL), cluster (PAYLOCK_REDIS_ADDRS) or sentinel (PAYLOCK_REDIS_SENTINEL_*)",
			func(c *config, v string) error { c.RedisMode = v; return parseRedisMode(v) }},
		{"PAYLOCK_REDIS_ADDRS", "redis-addrs", "", "cluster mode: comma-separated host:port of seed nodes",
			func(c *config, v string) (err error) { c.RedisAddrs, err = parseAddrs(v); return err }},
		{"PAYLOCK_REDIS_SENTINEL_MASTER", "redis-sentinel-master", "", "sentinel mode: the master's name as the sentinels know it",
			func(c *config, v string) error { c.RedisSentinelMaster = v; return nil }},
		{"PAYLOCK_REDIS_SENTINEL_ADDRS", "redis-sentinel-addrs", "", "sentinel mode: comma-separated host:port of the sentinels",
			func(c *config, v string) (err error) { c.RedisSentinelAddrs, err = parseAddrs(v); return err }},
		{"PAYLOCK_REDIS_USERNAME", "redis-username", "", "Redis ACL user (cluster and sentinel modes; overrides REDIS_URL's in standalone)",
			func(c *config, v string) error { c.RedisUsername = v; return nil }},
		{"PAYLOCK_REDIS_PASSWORD", "redis-password", "", "Redis password (cluster nodes, the sentinels' master and replicas; overrides REDIS_URL's in standalone)",
			func(c *config, v string) error { c.RedisPassword = v; return nil }},
		{"PAYLOCK_REDIS_SENTINEL_USERNAME", "redis-sentinel-username", "", "sentinel mode: ACL user of the sentinels themselves",
			func(c *config, v string) error { c.RedisSentinelUsername = v; return nil }},
		{"PAYLOCK_REDIS_SENTINEL_PASSWORD", "redis-sentinel-password", "", "sentinel mode: password of the sentinels themselves",
			func(c *config, v string) error { c.RedisSentinelPassword = v; return nil }},
		{"PAYLOCK_REDIS_TLS", "redis-tls", "false", "TLS to Redis in cluster and sentinel modes (standalone: use rediss://)",
			func(c *config, v string) (err error) { c.RedisTLS, err = strconv.ParseBool(v); return err }},
		{"PAYLOCK_REDIS_TLS_CA_FILE", "redis-tls-ca-file", "", "PEM file of the CAs to trust for Redis TLS (empty: the system's)",
			func(c *config, v string) error { c.RedisTLSCAFile = v; return nil }},
		{"PAYLOCK_REDIS_TLS_SERVER_NAME", "redis-tls-server-name", "", "name the Redis certificates must carry (empty: the first address's host)",
			func(c *config, v string) error { c.RedisTLSServerName = v; return nil }},
		{"PAYLOCK_ALLOW_UNSIGNED", "allow-unsigned", "false", "accept unsigned webhooks (local development only)",
			func(c *config, v string) (err error) { c.AllowUnsigned, err = strconv.ParseBool(v); return err }},
		{"PAYLOCK_SIGNATURE_SCHEME", "signature-scheme", "standard", "webhook signature scheme: standard (Standard Webhooks) or stripe",
			func(c *config, v string) (err error) { c.SignatureScheme, err = headerScheme(v); return err }},
		{"PAYLOCK_WEBHOOK_SECRETS", "webhook-secrets", "", "comma-separated signing secrets (several during a rotation)",
			func(c *config, v string) error { c.secretsRaw = v; return nil }},
		{"PAYLOCK_LOAN_SIGNATURE_SCHEME", "loan-signature-scheme", "standard", "signature scheme of the loans source (POST /webhooks/loans): standard or stripe",
			func(c *config, v string) (err error) {
				c.LoanSignatureScheme, err = headerScheme(v)
				return err
			}},
		{"PAYLOCK_LOAN_SECRETS", "loan-secrets", "", "comma-separated signing secrets of the loans source (empty: /webhooks/loans is not served, unless PAYLOCK_ALLOW_UNSIGNED=true)",
			func(c *config, v string) error { c.loanSecretsRaw = v; return nil }},
		{"PAYLOCK_PAYOUT_SIGNATURE_SCHEME", "payout-signature-scheme", "standard", "signature scheme of the payouts source (POST /webhooks/payouts): standard or stripe",
			func(c *config, v string) (err error) {
				c.PayoutSignatureScheme, err = headerScheme(v)
				return err
			}},
		{"PAYLOCK_PAYOUT_SECRETS", "payout-secrets", "", "comma-separated signing secrets of the payouts source (empty: /webhooks/payouts is not served, unless PAYLOCK_ALLOW_UNSIGNED=true)",
			func(c *config, v string) error { c.payoutSecretsRaw = v; return nil }},
		{"PAYLOCK_SOURCES_FILE", "sources-file", "", "YAML file adding webhook sources (POST /webhooks/<name>) or overriding the built-in ones; secrets stay in the environment",
			func(c *config, v string) error { c.SourcesFile = v; return nil }},
		{"PAYLOCK_SIGNATURE_TOLERANCE", "signature-tolerance", "5m", "replay window: how far a signature timestamp may be from now",
			durationAtLeast(func(c *config) *time.Duration { return &c.SigTolerance }, time.Second)},
		{"PAYLOCK_MIGRATE", "migrate", "true", "apply database migrations when serve starts",
			func(c *config, v string) (err error) { c.Migrate, err = strconv.ParseBool(v); return err }},
		{"PAYLOCK_SHUTDOWN_TIMEOUT", "shutdown-timeout", "20s", "how long in-flight requests may run after SIGTERM",
			durationAtLeast(func(c *config) *time.Duration { return &c.ShutdownTimeout }, 0)},
		{"PAYLOCK_DB_MAX_CONNS", "db-max-conns", "16", "Postgres pool size per process (0: pgxpool's default, max(4, CPUs))",
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
		{"PAYLOCK_DB_EXEC_MODE", "db-exec-mode", "", "pgx query mode: cache_statement (pgx's default), cache_describe, describe_exec, exec or simple_protocol; exec behind PgBouncer in transaction mode",
			func(c *config, v string) (err error) { c.DBExecMode, err = store.ParseExecMode(v); return err }},
		{"PAYLOCK_MIGRATE_DATABASE_URL", "migrate-database-url", "", "direct Postgres URL for migrations when DATABASE_URL goes through a pooler (empty: DATABASE_URL)",
			func(c *config, v string) error {
				c.MigrateDatabaseURL = v
				if v == "" {
					return nil
				}
				return store.CheckURL(v)
			}},
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
		{"PAYLOCK_WORKER", "worker", "false", "run the payout worker inside serve too",
			func(c *config, v string) (err error) { c.Payout.InServe, err = strconv.ParseBool(v); return err }},
		{"PAYLOCK_PAYOUT_URL", "payout-url", "", "payout provider base URL (required by the worker)",
			func(c *config, v string) error { c.Payout.URL = v; return checkPayoutURL(v) }},
		{"PAYLOCK_PAYOUT_TIMEOUT", "payout-timeout", "10s", "timeout of one call to the payout provider",
			durationAtLeast(func(c *config) *time.Duration { return &c.Payout.Timeout }, 100*time.Millisecond)},
		{"PAYLOCK_PAYOUT_BACKOFF_CAP", "payout-backoff-cap", "10m", "longest wait between payout retries",
			durationAtLeast(func(c *config) *time.Duration { return &c.Payout.BackoffCap }, time.Second)},
		{"PAYLOCK_PROVIDER_KEY_RETENTION", "provider-key-retention", "24h", "how long the provider keeps idempotency keys; after that the worker only looks payouts up",
			durationAtLeast(func(c *config) *time.Duration { return &c.Payout.KeyRetention }, time.Minute)},
		{"PAYLOCK_WORKER_CONCURRENCY", "worker-concurrency", "4", "disbursements a worker processes at once",
			func(c *config, v string) (err error) { c.Payout.Concurrency, err = positiveInt(v); return err }},
		{"PAYLOCK_WORKER_POLL", "worker-poll", "5s", "how often the worker looks for due disbursements without a notification",
			durationAtLeast(func(c *config) *time.Duration { return &c.Payout.Poll }, 10*time.Millisecond)},
		{"PAYLOCK_EVENT_RETENTION", "event-retention", "", "serve purges webhook_events older than this, hourly (e.g. 90d; at least 7d; empty: never)",
			func(c *config, v string) (err error) { c.EventRetention, err = parseRetention(v); return err }},
		{"PAYLOCK_MAX_INFLIGHT", "max-inflight", "256", "webhook requests handled at once per process; more wait or are refused",
			func(c *config, v string) (err error) { c.MaxInflight, err = positiveInt(v); return err }},
		{"PAYLOCK_ADMIN_ADDR", "admin-addr", "127.0.0.1:9091", "admin listener address (River UI, review queue; off: none); off loopback it needs PAYLOCK_ADMIN_TOKEN",
			func(c *config, v string) error {
				c.AdminAddr = v
				if v == "off" {
					c.AdminAddr = ""
					return nil
				}
				_, _, err := net.SplitHostPort(v)
				return err
			}},
		{"PAYLOCK_ADMIN_TOKEN", "admin-token", "", fmt.Sprintf("bearer token of the admin listener (at least %d characters; required unless the admin address is loopback)", minAdminToken),
			func(c *config, v string) error {
				c.AdminToken = v
				if v != "" && len(v) < minAdminToken {
					return fmt.Errorf("must be at least %d characters", minAdminToken)
				}
				return nil
			}},
		{"PAYLOCK_ADMIN_TOKENS", "admin-tokens", "", fmt.Sprintf("further admin tokens, comma-separated name:token pairs (each token at least %d characters); the name is who resolves review items with it", minAdminToken),
			func(c *config, v string) (err error) { c.AdminTokens, err = parseAdminTokens(v); return err }},
		{"PAYLOCK_PPROF", "pprof", "false", "serve the net/http/pprof profiling endpoints",
			func(c *config, v string) (err error) { c.Pprof, err = strconv.ParseBool(v); return err }},
		{"PAYLOCK_FORWARD_URL", "forward-url", "", "http(s) URL every recorded payment is forwarded to, signed with PAYLOCK_FORWARD_SECRETS (empty: none)",
			func(c *config, v string) error { c.Forward.URL = v; return checkForwardURL(v) }},
		{"PAYLOCK_FORWARD_SECRETS", "forward-secrets", "", "comma-separated Standard Webhooks secrets (whsec_...) signing forwarded payments",
			func(c *config, v string) error { c.Forward.secretsRaw = v; return nil }},
		{"PAYLOCK_FORWARD_CONCURRENCY", "forward-concurrency", "10", "forwards in flight at once per process",
			func(c *config, v string) (err error) { c.Forward.Concurrency, err = positiveInt(v); return err }},
		{"PAYLOCK_FORWARD_TIMEOUT", "forward-timeout", "10s", "timeout of one forward attempt",
			durationAtLeast(func(c *config) *time.Duration { return &c.Forward.Timeout }, 100*time.Millisecond)},
		{"PAYLOCK_FORWARD_MAX_ATTEMPTS", "forward-max-attempts", "25", "attempts of one forward before it is discarded",
			func(c *config, v string) (err error) { c.Forward.MaxAttempts, err = positiveInt(v); return err }},
		{"STRIPE_API_KEY", "stripe-api-key", "", "Stripe secret key (sk_...) that reconciliation lists events with; never printed",
			func(c *config, v string) error { c.Reconcile.stripeKey = v; return nil }},
		{"PAYLOCK_STRIPE_API_URL", "stripe-api-url", defaultStripeURL, "base URL of Stripe's API (a fake, in tests and demos)",
			func(c *config, v string) error { c.Reconcile.StripeURL = v; return checkPayoutURL(v) }},
		{"PAYLOCK_RECONCILE_INTERVAL", "reconcile-interval", "0", "run 'reconcile payments' in serve this often, on the River leader, for each stripe source (needs STRIPE_API_KEY); 0: off",
			func(c *config, v string) error { return reconcileInterval(c, v) }},
		{"PAYLOCK_RECONCILE_WINDOW", "reconcile-window", "72h", "how far back the periodic reconciliation lists the provider's events",
			durationAtLeast(func(c *config) *time.Duration { return &c.Reconcile.Window }, time.Minute)},
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
	if n > maxBodyLimit/mult {
		return 0, fmt.Errorf("at most %dMiB: bodies are read whole before the signature is checked", maxBodyLimit>>20)
	}
	return n * mult, nil
}

// maxBodyLimit caps PAYLOCK_MAX_BODY: an unauthenticated caller can make a
// replica buffer this much.
const maxBodyLimit = 64 << 20

// loadConfig fills a config from getenv, then from flags in args. A bad
// value is an error naming the variable or flag. It returns the arguments
// left after the flags.
func loadConfig(name string, args []string, getenv func(string) string) (config, []string, error) {
	c := config{getenv: getenv}
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
			return c, nil, fmt.Errorf("invalid %s%s: %v", s.env, shown(s.env, v), err)
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
		c.WebhookSecrets = secrets
	}
	for _, s := range []struct {
		env    string
		scheme signature.Scheme
		raw    string
	}{{"PAYLOCK_LOAN_SECRETS", c.LoanSignatureScheme, c.loanSecretsRaw}, {"PAYLOCK_PAYOUT_SECRETS", c.PayoutSignatureScheme, c.payoutSecretsRaw}} {
		entries := splitList(s.raw) // as loadSources reads them: trimmed, empty entries dropped
		if len(entries) == 0 {
			continue
		}
		if _, err := signature.ParseSecrets(s.scheme, strings.Join(entries, ",")); err != nil {
			return c, nil, fmt.Errorf("invalid %s: %v", s.env, err)
		}
	}
	if err := checkForward(&c); err != nil {
		return c, nil, err
	}
	if err := checkAdmin(c); err != nil {
		return c, nil, err
	}
	if c.DefaultCurrency != "" {
		if err := payload.CheckCurrencies(c.DefaultCurrency, c.Currencies); err != nil {
			return c, nil, fmt.Errorf("invalid PAYLOCK_DEFAULT_CURRENCY=%q: %v", c.DefaultCurrency, err)
		}
	}
	if c.LockWait >= c.RequestTimeout {
		return c, nil, fmt.Errorf("invalid PAYLOCK_LOCK_WAIT=%s: must be below PAYLOCK_REQUEST_TIMEOUT (%s)", c.LockWait, c.RequestTimeout)
	}
	if c.RedisTimeout*2 > c.LockTTL {
		return c, nil, fmt.Errorf("invalid PAYLOCK_REDIS_TIMEOUT=%s: must be at most half of PAYLOCK_LOCK_TTL (%s)", c.RedisTimeout, c.LockTTL)
	}
	if err := checkRedisConfig(c); err != nil {
		return c, nil, err
	}
	return c, fs.Args(), nil
}

// adminTokenName is what an admin token's name may look like.
var adminTokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$`)

// parseAdminTokens reads PAYLOCK_ADMIN_TOKENS: name:token pairs separated
// by commas. Its errors name the pair by position and name, never a token.
func parseAdminTokens(v string) ([]admin.Token, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []admin.Token
	names, tokens := map[string]bool{}, map[string]bool{}
	for i, pair := range strings.Split(v, ",") {
		name, token, ok := strings.Cut(strings.TrimSpace(pair), ":")
		switch {
		case !ok || !adminTokenName.MatchString(name):
			return nil, fmt.Errorf("pair %d is not name:token with a name of letters, digits, _ . @ - (at most 64)", i+1)
		case len(token) < minAdminToken:
			return nil, fmt.Errorf("the token of %q must be at least %d characters", name, minAdminToken)
		case names[name]:
			return nil, fmt.Errorf("the name %q is given twice", name)
		case tokens[token]:
			return nil, fmt.Errorf("the token of %q is another name's too", name)
		}
		names[name], tokens[token] = true, true
		out = append(out, admin.Token{Name: name, Token: token})
	}
	return out, nil
}

// adminTokenNames lists the names of tokens, never the tokens.
func adminTokenNames(tokens []admin.Token) []string {
	names := make([]string, len(tokens))
	for i, t := range tokens {
		names[i] = t.Name
	}
	return names
}

// minAdminToken is the shortest PAYLOCK_ADMIN_TOKEN accepted.
const minAdminToken = 16

// checkAdmin refuses an admin listener reachable from other hosts without a
// token: it lists and acts on payments and jobs.
func checkAdmin(c config) error {
	for _, t := range c.AdminTokens {
		if c.AdminToken != "" && t.Name == admin.TokenName {
			return fmt.Errorf("invalid PAYLOCK_ADMIN_TOKENS: the name %q is PAYLOCK_ADMIN_TOKEN's", admin.TokenName)
		}
		if c.AdminToken != "" && t.Token == c.AdminToken {
			return fmt.Errorf("invalid PAYLOCK_ADMIN_TOKENS: the token named %q is PAYLOCK_ADMIN_TOKEN too", t.Name)
		}
	}
	if c.AdminAddr == "" || c.AdminToken != "" || len(c.AdminTokens) > 0 || isLoopback(c.AdminAddr) {
		return nil
	}
	return fmt.Errorf("invalid PAYLOCK_ADMIN_ADDR=%q: not a loopback address, so PAYLOCK_ADMIN_TOKEN must be set (or PAYLOCK_ADMIN_ADDR=off)", c.AdminAddr)
}

// isLoopback reports whether a host:port listens on loopback only: localhost
// or a loopback IP. An empty host (":9091") is every interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkForwardURL accepts "" (no forward) or a URL a registered sink
// takes (forward.CheckURL: today an absolute http(s) URL with a host and no
// fragment).
func checkForwardURL(v string) error {
	if v == "" {
		return nil
	}
	return forward.CheckURL(v)
}

// checkForward parses PAYLOCK_FORWARD_SECRETS and refuses a forward URL
// without them: the receiving service must be able to tell paylock's
// forwards from anyone's.
func checkForward(c *config) error {
	if c.Forward.secretsRaw != "" {
		secrets, err := signature.ParseSecrets(signature.SchemeStandard, c.Forward.secretsRaw)
		if err != nil {
			return fmt.Errorf("invalid PAYLOCK_FORWARD_SECRETS: %v", err)
		}
		c.Forward.Secrets, c.Forward.secretsRaw = secrets, ""
	}
	if c.Forward.URL != "" && len(c.Forward.Secrets) == 0 {
		return fmt.Errorf("invalid PAYLOCK_FORWARD_URL=%q: PAYLOCK_FORWARD_SECRETS must be set to sign the forwarded payments", forward.Redact(c.Forward.URL))
	}
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// headerScheme parses the scheme of a built-in source, whose signature
// travels in headers: standard or stripe. Adyen's signatures sit inside an
// Adyen notification's items, which only the adyen adapter reads (a source
// of PAYLOCK_SOURCES_FILE).
func headerScheme(v string) (signature.Scheme, error) {
	s, err := signature.ParseScheme(v)
	if err == nil && s == signature.SchemeAdyen {
		return "", errors.New(`want "standard" or "stripe" ("adyen" is for a source with the adyen adapter, in PAYLOCK_SOURCES_FILE)`)
	}
	return s, err
}

// subcommandConfig loads the configuration of a one-shot subcommand that
// takes no positional arguments. When ok is false the subcommand exits with
// code: 0 after printing usage for -h, 2 after a one-line error.
func subcommandConfig(name, usage, hint string, args []string, getenv func(string) string, stdout, stderr io.Writer) (cfg config, code int, ok bool) {
	cfg, extra, err := loadConfig(name, args, getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return cfg, 0, false
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return cfg, 2, false
	case len(extra) > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q%s\n", name, extra[0], hint)
		return cfg, 2, false
	}
	return cfg, 0, true
}
