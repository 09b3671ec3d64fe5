package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testenv"
	"github.com/paylock/paylock/lock"
	_ "github.com/paylock/paylock/provider/all" // the providers the sources name
	"github.com/paylock/paylock/store"
)

// replica is one paylock instance under test: its own HTTP server, Redis
// client and Postgres pool, like a separate process.
type replica struct {
	url   string
	store *store.Store
	rdb   *redis.Client
	cfg   handler.Config
}

// options of a test's replicas.
type options struct {
	cfg      handler.Config
	dsn      string                                  // "" = a fresh schema
	redisURL string                                  // "" = testenv's Redis
	wrap     func(handler.Recorder) handler.Recorder // wraps the real store (fault injection)
	storeCfg func(*store.Config)                     // tweaks the store's config
	redisOpt func(*redis.Options)                    // tweaks the Redis client
	lockOpts []lock.Option                           // options of each replica's Locker
}

// testLogger sends the handler's logs to the test log when -v, else discards.
func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() && os.Getenv("PAYLOCK_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// migratedSchema returns the DSN of a fresh schema with paylock's tables.
func migratedSchema(t *testing.T) string {
	t.Helper()
	dsn := testenv.Schema(t)
	st := openStore(t, store.Config{URL: dsn})
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return dsn
}

func openStore(t *testing.T, cfg store.Config) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

func newRedisClient(t *testing.T, rawURL string, tweak func(*redis.Options)) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true
	opt.ReadTimeout = 500 * time.Millisecond
	opt.WriteTimeout = 500 * time.Millisecond
	opt.DialTimeout = 500 * time.Millisecond
	if tweak != nil {
		tweak(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// startReplicas starts n replicas sharing one database schema and one Redis.
func startReplicas(t *testing.T, n int, o options) []*replica {
	t.Helper()
	if o.dsn == "" {
		o.dsn = migratedSchema(t)
	}
	if o.redisURL == "" {
		o.redisURL = testenv.RedisURL(t)
	}
	if o.cfg.LockPrefix == "" {
		// Keys of this test's own, so tests can share the Redis server.
		o.cfg.LockPrefix = testenv.Key(t, "") + ":"
	}
	if o.cfg.Logger == nil {
		o.cfg.Logger = testLogger(t)
	}
	out := make([]*replica, n)
	for i := range out {
		sc := store.Config{URL: o.dsn}
		if o.storeCfg != nil {
			o.storeCfg(&sc)
		}
		st := openStore(t, sc)
		rdb := newRedisClient(t, o.redisURL, o.redisOpt)
		var hs handler.Recorder = st.Payments()
		if o.wrap != nil {
			hs = o.wrap(st.Payments())
		}
		srv := httptest.NewServer(mustNew(t, o.cfg, lock.New(rdb, o.lockOpts...), hs))
		t.Cleanup(srv.Close)
		out[i] = &replica{url: srv.URL, store: st, rdb: rdb, cfg: o.cfg}
	}
	return out
}

// mustNew builds a handler or fails the test.
func mustNew(t *testing.T, cfg handler.Config, l handler.Locker, st handler.Recorder) *handler.Handler {
	t.Helper()
	h, err := handler.New(cfg, l, st)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func startReplica(t *testing.T, o options) *replica { return startReplicas(t, 1, o)[0] }

// answer is a decoded HTTP answer.
type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (a answer) str(k string) string { s, _ := a.body[k].(string); return s }

func post(t *testing.T, base, path, contentType string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return answer{}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func payJSON(tx string, amount int64, currency string) []byte {
	b, _ := json.Marshal(map[string]any{"transaction_id": tx, "amount": amount, "currency": currency})
	return b
}

func pay(t *testing.T, base, tx string, amount int64, currency string) answer {
	t.Helper()
	return post(t, base, "/webhooks/payments", "application/json", payJSON(tx, amount, currency))
}

// rows counts the payments recorded under tx ("" counts all).
func rows(t *testing.T, st *store.Store, tx string) int {
	t.Helper()
	var n int
	q, args := "SELECT count(*) FROM payments", []any{}
	if tx != "" {
		q, args = q+" WHERE transaction_id = $1", []any{tx}
	}
	if err := st.Pool().QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// withHost returns dsn with its host:port replaced.
func withHost(t *testing.T, dsn, hostport string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = hostport
	return u.String()
}

// lockKey is the Redis key a replica locks for tx.
func lockKey(r *replica, tx string) string { return r.cfg.LockPrefix + "payment:" + tx }

func wantProblem(t *testing.T, a answer, status int) {
	t.Helper()
	if a.status != status {
		t.Fatalf("status = %d, want %d; body %s", a.status, status, a.raw)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	for _, k := range []string{"type", "title", "detail"} {
		if a.str(k) == "" {
			t.Fatalf("problem without %q: %s", k, a.raw)
		}
	}
	if got, _ := a.body["status"].(float64); int(got) != status {
		t.Fatalf("problem status = %v, want %d", a.body["status"], status)
	}
}

func wantRetryAfter(t *testing.T, a answer) {
	t.Helper()
	if a.header.Get("Retry-After") == "" {
		t.Fatalf("%d answer without Retry-After: %s", a.status, a.raw)
	}
}

// noRetries makes a client to a dead Redis fail fast.
func noRetries(o *redis.Options) { o.MaxRetries = -1 }

func redisTestURL(t *testing.T) string { return testenv.RedisURL(t) }

// httptestRecorder serves one GET on h.
func httptestRecorder(h http.Handler, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}
