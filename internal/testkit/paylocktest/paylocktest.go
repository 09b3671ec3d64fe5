// Package paylocktest starts paylock itself for tests: a migrated schema of
// the test's own, stores on it, and in-process replicas of the webhook
// handler, each a handler.Handler over a real store and a real lock on an
// httptest server, as separate processes would be. Importing it registers
// every provider (provider/all), as paylock serve does, so that a replica's
// sources may name any of them.
//
// It builds on internal/testkit (the servers, isolation, waiting); what
// needs no paylock package is there, so that the internal tests of store,
// lock and handler can use it.
package paylocktest

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/storetest"
	"github.com/paylock/paylock/lock"
	_ "github.com/paylock/paylock/provider/all" // the providers replicas' sources name
	"github.com/paylock/paylock/store"
)

// OpenStore opens a store configured by cfg, closed when the test ends
// (storetest.Open).
func OpenStore(t testing.TB, cfg store.Config) *store.Store {
	t.Helper()
	return storetest.Open(t, cfg)
}

// MigratedSchema returns the URL of a fresh migrated schema of the test's
// own and the store that migrated it (storetest.MigratedSchema).
func MigratedSchema(t testing.TB) (string, *store.Store) {
	t.Helper()
	return storetest.MigratedSchema(t)
}

// Migrated migrates the database (or schema) of dsn and returns the store
// that did (storetest.Migrated).
func Migrated(t testing.TB, dsn string) *store.Store {
	t.Helper()
	return storetest.Migrated(t, dsn)
}

// Options configure a test's replicas; the zero value serves the built-in
// payments source, unsigned, on a fresh schema and the test Redis.
type Options struct {
	// Config is every replica's handler config. An empty LockPrefix becomes
	// a prefix of the test's own (testkit.Key), so that tests can share
	// the Redis server; a nil Logger becomes testkit.Logger().
	Config   handler.Config
	DSN      string                                  // "" = a fresh migrated schema
	RedisURL string                                  // "" = testkit.RedisURL
	Store    func(*store.Config)                     // tweaks each replica's store config
	Redis    func(*redis.Options)                    // tweaks each replica's Redis client
	Lock     []lock.Option                           // options of each replica's Locker
	Wrap     func(handler.Recorder) handler.Recorder // wraps each replica's recorder (fault injection)
	// Configure, when set, adjusts each replica's handler config with what
	// comes from that replica's own store (Disbursements, say), as serve
	// does in each process.
	Configure func(cfg *handler.Config, st *store.Store)
}

// Replica is one paylock instance under test: its own HTTP server, Redis
// client and Postgres pool, like a separate process.
type Replica struct {
	URL     string // the server's base URL
	DSN     string // the database the replicas share
	Store   *store.Store
	Redis   *redis.Client
	Config  handler.Config   // with the defaults StartReplicas filled in, after Configure
	Handler *handler.Handler // what the server serves, for tests that call it directly
}

// LockKey is the Redis key the replica locks for a payments-source
// transaction id: the first releases' key for an id without ':', the key
// naming the source for one with (handler's paymentLockKey).
func (r *Replica) LockKey(tx string) string {
	if strings.Contains(tx, ":") {
		return r.Config.LockPrefix + "payment:payments:" + tx
	}
	return r.Config.LockPrefix + "payment:" + tx
}

// StartReplicas starts n replicas sharing one database and one Redis, served
// until the test ends.
func StartReplicas(t testing.TB, n int, o Options) []*Replica {
	t.Helper()
	if o.DSN == "" {
		o.DSN, _ = MigratedSchema(t)
	}
	if o.RedisURL == "" {
		o.RedisURL = testkit.RedisURL(t)
	}
	if o.Config.LockPrefix == "" {
		o.Config.LockPrefix = testkit.Key(t, "") + ":"
	}
	if o.Config.Logger == nil {
		o.Config.Logger = testkit.Logger()
	}
	out := make([]*Replica, n)
	for i := range out {
		out[i] = start(t, o)
	}
	return out
}

// StartReplica starts one replica.
func StartReplica(t testing.TB, o Options) *Replica { return StartReplicas(t, 1, o)[0] }

func start(t testing.TB, o Options) *Replica {
	t.Helper()
	sc := store.Config{URL: o.DSN}
	if o.Store != nil {
		o.Store(&sc)
	}
	st := OpenStore(t, sc)
	rdb := redisClient(t, o.RedisURL, o.Redis)
	var rec handler.Recorder = st.Payments()
	if o.Wrap != nil {
		rec = o.Wrap(rec)
	}
	cfg := o.Config
	// As serve does: notices' fetch ledger and budget on the lock's Redis.
	if cfg.Notices == nil {
		cfg.Notices = lock.NewNotices(rdb, cfg.LockPrefix)
	}
	if cfg.FetchPacer == nil {
		cfg.FetchPacer = lock.NewPacer(rdb, cfg.LockPrefix)
	}
	if o.Configure != nil {
		o.Configure(&cfg, st)
	}
	h, err := handler.New(cfg, lock.New(rdb, o.Lock...), rec)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Replica{URL: srv.URL, DSN: o.DSN, Store: st, Redis: rdb, Config: cfg, Handler: h}
}

// redisClient returns a client of rawURL with ContextTimeoutEnabled, as
// paylock's own, after tweak.
func redisClient(t testing.TB, rawURL string, tweak func(*redis.Options)) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true
	if tweak != nil {
		tweak(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}
