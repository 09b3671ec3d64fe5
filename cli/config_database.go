package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/paylock/paylock/store"
)

// DatabaseConfig is Postgres: where it is, the pool, how queries are sent
// (behind a pooler), where and whether to migrate, and how long
// webhook_events are kept.
type DatabaseConfig struct {
	URL              string         // DATABASE_URL
	MaxConns         int32          // PAYLOCK_DB_MAX_CONNS; 0: pgxpool's default
	StatementTimeout time.Duration  // PAYLOCK_DB_STATEMENT_TIMEOUT
	ExecMode         store.ExecMode // PAYLOCK_DB_EXEC_MODE
	MigrateURL       string         // PAYLOCK_MIGRATE_DATABASE_URL; never printed; "": URL
	Migrate          bool           // PAYLOCK_MIGRATE: serve and worker migrate first
	// EventRetention is PAYLOCK_EVENT_RETENTION; 0: serve does not purge
	// webhook_events (purge.go).
	EventRetention time.Duration
	// OrphanAfter is PAYLOCK_ORPHAN_AFTER: how long a payment known only by
	// later events (a refund before its payment) waits for it before it is
	// a review item.
	OrphanAfter time.Duration
	// BatchMax is PAYLOCK_BATCH_MAX, the most payments one recording
	// statement carries (1: no batching); BatchWriters is
	// PAYLOCK_BATCH_WRITERS, how many such statements run at once as a
	// rule; BatchStall is PAYLOCK_BATCH_STALL, how long a queued payment
	// waits before it starts one more (up to PAYLOCK_DB_MAX_CONNS), -1 for
	// off (never).
	BatchMax, BatchWriters int
	BatchStall             time.Duration
}

func (c *DatabaseConfig) title() string { return "database" }

func (c *DatabaseConfig) settings() []setting {
	return []setting{
		{env: "DATABASE_URL", flag: "database-url", def: "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", usage: "Postgres URL",
			parse: func(v string) error { c.URL = v; return store.CheckURL(v) }},
		{env: "PAYLOCK_DB_MAX_CONNS", flag: "db-max-conns", def: "16", usage: "Postgres pool size per process (0: pgxpool's default, max(4, CPUs))",
			parse: func(v string) error {
				n, err := strconv.ParseInt(v, 10, 32)
				if err == nil && n < 0 {
					err = errors.New("must not be negative")
				}
				c.MaxConns = int32(n)
				return err
			}},
		{env: "PAYLOCK_DB_STATEMENT_TIMEOUT", flag: "db-statement-timeout", def: "5s", usage: "server-side statement_timeout for paylock's sessions",
			parse: durationAtLeast(&c.StatementTimeout, time.Millisecond)},
		{env: "PAYLOCK_DB_EXEC_MODE", flag: "db-exec-mode", usage: "pgx query mode: cache_statement (pgx's default), cache_describe, describe_exec, exec or simple_protocol; exec behind PgBouncer in transaction mode",
			parse: func(v string) (err error) { c.ExecMode, err = store.ParseExecMode(v); return err }},
		{env: "PAYLOCK_MIGRATE_DATABASE_URL", flag: "migrate-database-url", secret: true, usage: "direct Postgres URL for migrations when DATABASE_URL goes through a pooler (empty: DATABASE_URL)",
			parse: func(v string) error {
				c.MigrateURL = v
				if v == "" {
					return nil
				}
				return store.CheckURL(v)
			}},
		{env: "PAYLOCK_MIGRATE", flag: "migrate", def: "true", usage: "apply database migrations when serve starts",
			parse: boolean(&c.Migrate)},
		{env: "PAYLOCK_EVENT_RETENTION", flag: "event-retention", usage: "serve purges webhook_events older than this, hourly (e.g. 90d; at least 7d; empty: never)",
			parse: func(v string) (err error) { c.EventRetention, err = parseRetention(v); return err }},
		{env: "PAYLOCK_BATCH_MAX", flag: "batch-max", def: "64", usage: "most payments recorded by one statement (natural batching: deliveries that arrive while a write is in flight go together, none waits for a timer; 1: one statement per payment)",
			parse: func(v string) (err error) { c.BatchMax, err = positiveInt(v); return err }},
		{env: "PAYLOCK_BATCH_WRITERS", flag: "batch-writers", def: "2", usage: "how many recording statements (batches) are in flight at once as a rule",
			parse: func(v string) (err error) { c.BatchWriters, err = positiveInt(v); return err }},
		{env: "PAYLOCK_BATCH_STALL", flag: "batch-stall", def: "50ms", usage: "a payment queued for a batch this long starts one more recording statement, up to PAYLOCK_DB_MAX_CONNS (slow statements then hold up no queue); off: never more than PAYLOCK_BATCH_WRITERS",
			parse: func(v string) error {
				if v == "off" {
					c.BatchStall = -1
					return nil
				}
				return durationAtLeast(&c.BatchStall, time.Millisecond)(v)
			}},
		{env: "PAYLOCK_ORPHAN_AFTER", flag: "orphan-after", def: "24h", usage: "a payment known only by later events (a refund before its payment) is a review item after this (e.g. 24h, 2d)",
			parse: func(v string) (err error) {
				if c.OrphanAfter, err = parseAge(v); err == nil && c.OrphanAfter <= 0 {
					err = errors.New("must be positive")
				}
				return err
			}},
	}
}

func (c *DatabaseConfig) validate() error { return nil }

func (c *DatabaseConfig) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("database_url", redactURL(c.URL)),
		slog.Bool("migrate", c.Migrate),
		slog.String("db_exec_mode", string(c.ExecMode)),
		slog.String("migrate_database_url", redactURL(c.MigrateURL)),
	}
}

// store is the store's configuration; forwardMaxAttempts is
// PAYLOCK_FORWARD_MAX_ATTEMPTS, the attempts of the forward jobs it
// inserts, and express PAYLOCK_FORWARD_EXPRESS.
func (c *DatabaseConfig) store(forwardMaxAttempts int, express bool) store.Config {
	return store.Config{
		URL:              c.URL,
		MaxConns:         c.MaxConns,
		StatementTimeout: c.StatementTimeout,
		ExecMode:         c.ExecMode,
		MigrateURL:       c.MigrateURL,
		OrphanAfter:      c.OrphanAfter,
		BatchMax:         c.BatchMax,
		BatchWriters:     c.BatchWriters,
		BatchStall:       c.BatchStall,

		ForwardMaxAttempts: forwardMaxAttempts,
		ExpressForwards:    express,
	}
}

// parseRetention reads PAYLOCK_EVENT_RETENTION or --older-than: "" is 0
// (no purging); anything else is a duration (parseAge: 2160h, 90d) of at least
// store.MinEventRetention.
func parseRetention(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := parseAge(v)
	if err != nil {
		return 0, errors.New("want a duration such as 90d or 2160h")
	}
	if d < store.MinEventRetention {
		return 0, fmt.Errorf("must be at least 7d (%s): senders retry deliveries for days, up to 30", store.MinEventRetention)
	}
	return d, nil
}
