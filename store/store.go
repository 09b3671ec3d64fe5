package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
)

// Defaults for the zero values of Config's durations.
const (
	DefaultStatementTimeout = 5 * time.Second
	DefaultLockTimeout      = 2 * time.Second
	DefaultIdleInTxTimeout  = 10 * time.Second
	DefaultCommitTimeout    = 5 * time.Second

	// DefaultConnectTimeout and DefaultPingTimeout apply when the URL sets
	// no connect_timeout or pool_ping_timeout.
	DefaultConnectTimeout = 5 * time.Second
	DefaultPingTimeout    = time.Second
)

// Config says how to reach Postgres and how long the store may wait on it.
// Zero durations take the defaults above.
type Config struct {
	// URL is the DATABASE_URL. Parameters that are not connection settings,
	// such as search_path or application_name, become session parameters.
	URL string
	// MaxConns caps the pool; 0 keeps the pgxpool default.
	MaxConns int32
	// StatementTimeout is the server-side statement_timeout of every session.
	StatementTimeout time.Duration
	// LockTimeout is the server-side lock_timeout of every session.
	LockTimeout time.Duration
	// IdleInTxTimeout is the server-side idle_in_transaction_session_timeout.
	IdleInTxTimeout time.Duration
	// CommitTimeout bounds COMMIT (and ROLLBACK), which run even after the
	// caller's context is done so that a cancelled request does not leave the
	// outcome of a sent COMMIT to chance.
	CommitTimeout time.Duration
	// ExecMode is how pgx sends queries; "" keeps the URL's
	// default_query_exec_mode, else pgx's default (cache_statement). Behind a
	// pooler in transaction mode use ExecExec or ExecSimpleProtocol: see
	// ExecMode for what changes then.
	ExecMode ExecMode
	// MigrateURL, when set, is where Migrate connects instead of the pool's
	// server: a direct connection to Postgres when URL goes through a
	// pooler. Required by Migrate when the exec mode is a pooled one.
	MigrateURL string
	// ForwardMaxAttempts is how often River runs a forward job (ForwardArgs)
	// before it discards it; 0 is DefaultForwardMaxAttempts.
	ForwardMaxAttempts int
	// ExpressForwards makes the forward messages of recorded payments,
	// their changes and disbursements' status changes start in the
	// outbox's express lane (outbox_express.go) instead of as River jobs:
	// package forward's drainer sends each once and hands what it could
	// not send over to River. Its processes must then run the drainer
	// (forward.Worker.RunExpress) beside River's forward queue.
	ExpressForwards bool
	// BatchMax is the most payments one recording statement carries
	// (natural batching: while a writer's insert is in flight, the next
	// deliveries queue and go together; a lone delivery goes at once). 0
	// is DefaultBatchMax; 1 records every payment alone.
	BatchMax int
	// BatchWriters is how many recording statements (batches) are in
	// flight at once as a rule; 0 is DefaultBatchWriters.
	BatchWriters int
	// BatchStall is how long a queued payment waits for a writer before
	// it starts one more, up to the pool's MaxConns: slow statements (a
	// row lock, a loaded database) then do not hold up the rows queued
	// behind them. 0 is DefaultBatchStall; negative never adds writers.
	BatchStall time.Duration
	// OrphanAfter is how long a payment known only by later events (a
	// refund before its payment) waits for its payment before it is a
	// review item (ReviewLifecycle); 0 is DefaultOrphanAfter.
	OrphanAfter time.Duration
	// DeliveryLogCap is how many distinct deliveries one source may add
	// to the delivery log in an hour (Deliveries.Keep); 0 is
	// DefaultDeliveryLogCap.
	DeliveryLogCap int
	// DeliveryLogCapBytes is how many body bytes one source may add to
	// the delivery log in an hour (Deliveries.Keep); 0 is
	// DefaultDeliveryLogCapBytes.
	DeliveryLogCapBytes int64
	// TracerProvider traces the store's work: the spans of its River
	// clients (a job's insert and work; see StartJobs), a span per recorded
	// payment (and per multi-row statement), and the pool's queries through
	// pgx's tracer hook (otelpgx), these only under a recording span of the
	// caller's (an untraced call costs a context lookup). Nil is the global
	// provider (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
}

// withDefaults returns c with zero durations replaced by the defaults, or an
// error naming the first bad field.
func (c Config) withDefaults() (Config, error) {
	if c.URL == "" {
		return c, errors.New("store: Config.URL (DATABASE_URL) is empty")
	}
	if c.MaxConns < 0 {
		return c, fmt.Errorf("store: Config.MaxConns is negative (%d)", c.MaxConns)
	}
	switch {
	case c.ForwardMaxAttempts < 0:
		return c, fmt.Errorf("store: Config.ForwardMaxAttempts is negative (%d)", c.ForwardMaxAttempts)
	case c.ForwardMaxAttempts == 0:
		c.ForwardMaxAttempts = DefaultForwardMaxAttempts
	}
	switch {
	case c.DeliveryLogCap < 0:
		return c, fmt.Errorf("store: Config.DeliveryLogCap is negative (%d)", c.DeliveryLogCap)
	case c.DeliveryLogCap == 0:
		c.DeliveryLogCap = DefaultDeliveryLogCap
	}
	switch {
	case c.DeliveryLogCapBytes < 0:
		return c, fmt.Errorf("store: Config.DeliveryLogCapBytes is negative (%d)", c.DeliveryLogCapBytes)
	case c.DeliveryLogCapBytes == 0:
		c.DeliveryLogCapBytes = DefaultDeliveryLogCapBytes
	}
	if err := c.batchDefaults(); err != nil {
		return c, err
	}
	if _, err := ParseExecMode(string(c.ExecMode)); err != nil {
		return c, fmt.Errorf("store: Config.ExecMode: %w", err)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"StatementTimeout", &c.StatementTimeout, DefaultStatementTimeout},
		{"LockTimeout", &c.LockTimeout, DefaultLockTimeout},
		{"IdleInTxTimeout", &c.IdleInTxTimeout, DefaultIdleInTxTimeout},
		{"CommitTimeout", &c.CommitTimeout, DefaultCommitTimeout},
		{"OrphanAfter", &c.OrphanAfter, DefaultOrphanAfter},
	} {
		switch {
		case *d.v < 0:
			return c, fmt.Errorf("store: Config.%s is negative (%v)", d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	return c, nil
}

// Store is the store's root: it opens and closes the one pool, migrates
// the schema and runs River over it, and hands out the types that work on
// it by concern (Payments, Disbursements, Review, Outbox). It is safe for
// concurrent use.
type Store struct {
	*base
	// pooled: the exec mode keeps no session state (see ExecMode).
	pooled bool

	payments      *Payments
	disbursements *Disbursements
	review        *Review
	outbox        *Outbox
	deliveries    *Deliveries
	orders        *Orders
}

// Open builds a connection pool from cfg and pings the server. Its errors wrap
// ErrUnavailable when the server cannot be reached.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("store: parse Config.URL: %w", err)
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	// Without these, a connection attempt or a health ping whose replies
	// are lost never ends and keeps its pool slot: a few of them stall the
	// replica for a minute or for good. The URL may set its own
	// (connect_timeout, pool_ping_timeout).
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if pcfg.PingTimeout == 0 {
		pcfg.PingTimeout = DefaultPingTimeout
	}
	pcfg.ConnConfig.Tracer = pgxTracer(cfg.tracerProvider())
	if cfg.ExecMode != "" {
		pcfg.ConnConfig.DefaultQueryExecMode = execModes[cfg.ExecMode]
	}
	pooled := pooledMode(pcfg.ConnConfig.DefaultQueryExecMode)
	if !pooled {
		// ParseConfig already put the URL's other parameters (search_path...)
		// here; add ours beside them.
		setSessionParams(pcfg.ConnConfig, cfg)
	}

	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, translate("open: ping", err)
	}
	jobs, err := newInsertOnlyClient(pool, cfg.TracerProvider)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return newStore(&base{pool: pool, cfg: cfg, jobs: jobs}, pooled), nil
}

// newStore wires the types of each concern over b.
func newStore(b *base, pooled bool) *Store {
	outbox := &Outbox{base: b}
	disbursements := &Disbursements{base: b}
	payments := &Payments{base: b, insert: insertPaymentSQL, outbox: outbox,
		tracer: b.cfg.tracerProvider().Tracer(tracerName)}
	if b.cfg.BatchMax > 1 {
		limit := b.cfg.BatchWriters
		if b.pool != nil {
			limit = int(b.pool.Config().MaxConns)
		}
		payments.batch = newBatcher(b.cfg.BatchMax, max(b.cfg.BatchWriters, 1), limit, b.cfg.BatchStall)
	}
	return &Store{
		base:          b,
		pooled:        pooled,
		payments:      payments,
		disbursements: disbursements,
		review:        &Review{base: b, disbursements: disbursements},
		outbox:        outbox,
		deliveries:    &Deliveries{base: b},
		orders:        &Orders{base: b, outbox: outbox},
	}
}

// Payments records and reads payments.
func (s *Store) Payments() *Payments { return s.payments }

// Disbursements keeps loan disbursements, their payouts and their events.
func (s *Store) Disbursements() *Disbursements { return s.disbursements }

// Review is the review queue and its resolutions.
func (s *Store) Review() *Review { return s.review }

// Outbox is the forward jobs.
func (s *Store) Outbox() *Outbox { return s.outbox }

// Deliveries is the delivery log: the verified deliveries that recorded
// nothing.
func (s *Store) Deliveries() *Deliveries { return s.deliveries }

// setSessionParams makes every session of cc carry cfg's server-side
// timeouts and synchronous_commit=on.
//
// synchronous_commit=on: a server (or database, or role) configured with
// synchronous_commit=off acknowledges a COMMIT before its WAL is flushed, and
// a crash then loses transactions the client saw committed; paylock would
// have answered 2xx for a payment that is gone. The startup parameter
// overrides the server's, database's and role's defaults and the URL's
// options=-c synchronous_commit=... (startup parameters are applied after
// options); a synchronous_commit parameter in the URL itself is replaced.
// The pooled exec modes send no startup parameters: there the payment's
// INSERT sets it for its own transaction (see insertPaymentSQL), and the
// other statements rely on the role's or database's setting (see ExecMode).
func setSessionParams(cc *pgx.ConnConfig, cfg Config) {
	params := cc.RuntimeParams
	params["statement_timeout"] = milliseconds(cfg.StatementTimeout)
	params["lock_timeout"] = milliseconds(cfg.LockTimeout)
	params["idle_in_transaction_session_timeout"] = milliseconds(cfg.IdleInTxTimeout)
	params["synchronous_commit"] = "on"
}

// milliseconds formats d as a Postgres duration setting, rounding up so that
// a positive duration never becomes 0 (which means "no timeout").
func milliseconds(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return fmt.Sprintf("%dms", ms)
}

// Close closes the pool, waiting for connections in use to be returned.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that the server answers. Its errors wrap ErrUnavailable when it
// does not.
func (s *Store) Ping(ctx context.Context) error {
	return translate("ping", s.pool.Ping(ctx))
}

// Pool returns the connection pool, for its statistics. Query through the
// store's types, not through the pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Pooled reports whether the store's exec mode is a pooled one (see
// ExecMode): behind a pooler in transaction mode, with no session state.
func (s *Store) Pooled() bool { return s.pooled }

// batchDefaults checks BatchMax and BatchWriters and sets their defaults.
func (c *Config) batchDefaults() error {
	switch {
	case c.BatchMax < 0:
		return fmt.Errorf("store: Config.BatchMax is negative (%d)", c.BatchMax)
	case c.BatchMax == 0:
		c.BatchMax = DefaultBatchMax
	}
	switch {
	case c.BatchWriters < 0:
		return fmt.Errorf("store: Config.BatchWriters is negative (%d)", c.BatchWriters)
	case c.BatchWriters == 0:
		c.BatchWriters = DefaultBatchWriters
	}
	if c.BatchStall == 0 {
		c.BatchStall = DefaultBatchStall
	}
	return nil
}
