package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/scaletest"
	"github.com/paylock/paylock/internal/testkit"
)

func mustConfig(t *testing.T, env map[string]string) Config {
	t.Helper()
	cfg, _, err := loadConfig("serve", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// openRedis builds the Redis client of cfg as serve does.
func openRedis(cfg Config) (redis.UniversalClient, error) { return cfg.Lock.Redis.open() }

func TestRedisModeBuildsTheClientItNames(t *testing.T) {
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, newTestCA(t).certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	wantTimeouts := func(t *testing.T, ctxTimeout bool, dial, read, write time.Duration) {
		t.Helper()
		if !ctxTimeout || dial != 300*time.Millisecond || read != 300*time.Millisecond || write != 300*time.Millisecond {
			t.Errorf("ContextTimeoutEnabled %v, dial %v, read %v, write %v; want true and PAYLOCK_REDIS_TIMEOUT (300ms) each", ctxTimeout, dial, read, write)
		}
	}
	t.Run("standalone", func(t *testing.T) {
		rdb, err := openRedis(mustConfig(t, map[string]string{
			"REDIS_URL": "rediss://:from-url@cache:6380/2", "PAYLOCK_REDIS_PASSWORD": "from-env",
			"PAYLOCK_REDIS_TIMEOUT": "300ms", "PAYLOCK_REDIS_TLS_CA_FILE": caFile,
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		c, ok := rdb.(*redis.Client)
		if !ok {
			t.Fatalf("standalone built a %T, want *redis.Client", rdb)
		}
		o := c.Options()
		wantTimeouts(t, o.ContextTimeoutEnabled, o.DialTimeout, o.ReadTimeout, o.WriteTimeout)
		if o.Addr != "cache:6380" || o.DB != 2 || o.Password != "from-env" {
			t.Errorf("addr %s db %d password %q; want REDIS_URL's, with PAYLOCK_REDIS_PASSWORD", o.Addr, o.DB, o.Password)
		}
		if o.TLSConfig == nil || o.TLSConfig.ServerName != "cache" || o.TLSConfig.RootCAs == nil {
			t.Errorf("TLS %+v; want server name cache and the CA file's roots", o.TLSConfig)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		rdb, err := openRedis(mustConfig(t, map[string]string{
			"PAYLOCK_REDIS_MODE": "cluster", "PAYLOCK_REDIS_ADDRS": "redis-0:6379, redis-1:6379,redis-2:6379",
			"PAYLOCK_REDIS_USERNAME": "paylock", "PAYLOCK_REDIS_PASSWORD": "pw", "PAYLOCK_REDIS_TIMEOUT": "300ms",
			"PAYLOCK_REDIS_TLS": "true", "PAYLOCK_REDIS_TLS_CA_FILE": caFile,
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		c, ok := rdb.(*redis.ClusterClient)
		if !ok {
			t.Fatalf("cluster built a %T, want *redis.ClusterClient", rdb)
		}
		o := c.Options()
		wantTimeouts(t, o.ContextTimeoutEnabled, o.DialTimeout, o.ReadTimeout, o.WriteTimeout)
		if strings.Join(o.Addrs, ",") != "redis-0:6379,redis-1:6379,redis-2:6379" || o.Username != "paylock" || o.Password != "pw" {
			t.Errorf("addrs %v user %q password %q", o.Addrs, o.Username, o.Password)
		}
		if o.TLSConfig == nil || o.TLSConfig.ServerName != "redis-0" || o.TLSConfig.RootCAs == nil || o.TLSConfig.MinVersion < tls.VersionTLS12 {
			t.Errorf("TLS %+v; want server name redis-0, the CA file's roots, TLS 1.2 at least", o.TLSConfig)
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		rdb, err := openRedis(mustConfig(t, map[string]string{
			"PAYLOCK_REDIS_MODE": "sentinel", "PAYLOCK_REDIS_SENTINEL_MASTER": "mymaster",
			"PAYLOCK_REDIS_SENTINEL_ADDRS": "s-0:26379,s-1:26379,s-2:26379", "PAYLOCK_REDIS_PASSWORD": "pw",
			"PAYLOCK_REDIS_SENTINEL_PASSWORD": "spw", "PAYLOCK_REDIS_TIMEOUT": "300ms",
			"PAYLOCK_REDIS_TLS": "true", "PAYLOCK_REDIS_TLS_SERVER_NAME": "redis.example",
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		c, ok := rdb.(*redis.Client)
		if !ok {
			t.Fatalf("sentinel built a %T, want the failover *redis.Client", rdb)
		}
		o := c.Options()
		wantTimeouts(t, o.ContextTimeoutEnabled, o.DialTimeout, o.ReadTimeout, o.WriteTimeout)
		if o.Addr != "FailoverClient" || o.Password != "pw" {
			t.Errorf("addr %q password %q; want a failover client with PAYLOCK_REDIS_PASSWORD", o.Addr, o.Password)
		}
		if o.TLSConfig == nil || o.TLSConfig.ServerName != "redis.example" {
			t.Errorf("TLS %+v; want server name redis.example", o.TLSConfig)
		}
	})
	t.Run("a missing CA file is a start-up error", func(t *testing.T) {
		_, err := openRedis(mustConfig(t, map[string]string{
			"PAYLOCK_REDIS_MODE": "cluster", "PAYLOCK_REDIS_ADDRS": "redis-0:6379",
			"PAYLOCK_REDIS_TLS": "true", "PAYLOCK_REDIS_TLS_CA_FILE": filepath.Join(t.TempDir(), "absent.pem"),
		}))
		if err == nil || !strings.Contains(err.Error(), "PAYLOCK_REDIS_TLS_CA_FILE") {
			t.Fatalf("got %v, want an error naming PAYLOCK_REDIS_TLS_CA_FILE", err)
		}
	})
}

func TestRedisAndPoolerSettingsOfAnotherModeStopStart(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"PAYLOCK_REDIS_MODE": "universal"}, "PAYLOCK_REDIS_MODE"},
		{map[string]string{"PAYLOCK_REDIS_ADDRS": "a:6379,b:6379"}, "PAYLOCK_REDIS_ADDRS"}, // several addresses, standalone: never a cluster by accident
		{map[string]string{"PAYLOCK_REDIS_MODE": "cluster"}, "PAYLOCK_REDIS_ADDRS"},
		{map[string]string{"PAYLOCK_REDIS_MODE": "cluster", "PAYLOCK_REDIS_ADDRS": "redis-0"}, "PAYLOCK_REDIS_ADDRS"},
		{map[string]string{"PAYLOCK_REDIS_MODE": "cluster", "PAYLOCK_REDIS_ADDRS": "a:1", "PAYLOCK_REDIS_SENTINEL_MASTER": "m"}, "PAYLOCK_REDIS_SENTINEL_MASTER"},
		{map[string]string{"PAYLOCK_REDIS_MODE": "sentinel", "PAYLOCK_REDIS_SENTINEL_ADDRS": "s:26379"}, "PAYLOCK_REDIS_SENTINEL_MASTER"},
		{map[string]string{"PAYLOCK_REDIS_MODE": "sentinel", "PAYLOCK_REDIS_SENTINEL_MASTER": "m"}, "PAYLOCK_REDIS_SENTINEL_ADDRS"},
		{map[string]string{"PAYLOCK_REDIS_MODE": "sentinel", "PAYLOCK_REDIS_SENTINEL_MASTER": "m", "PAYLOCK_REDIS_SENTINEL_ADDRS": "s:1", "PAYLOCK_REDIS_ADDRS": "a:1"}, "PAYLOCK_REDIS_ADDRS"},
		{map[string]string{"PAYLOCK_REDIS_MODE": "cluster", "PAYLOCK_REDIS_ADDRS": "a:1", "PAYLOCK_REDIS_SENTINEL_PASSWORD": "x"}, "PAYLOCK_REDIS_SENTINEL_PASSWORD"},
		{map[string]string{"PAYLOCK_REDIS_TLS": "true"}, "PAYLOCK_REDIS_TLS"}, // standalone TLS is rediss://
		{map[string]string{"PAYLOCK_REDIS_TLS_CA_FILE": "/ca.pem"}, "PAYLOCK_REDIS_TLS_CA_FILE"},
		{map[string]string{"REDIS_URL": "http://cache:6379"}, "REDIS_URL"},
		{map[string]string{"PAYLOCK_DB_EXEC_MODE": "prepared"}, "PAYLOCK_DB_EXEC_MODE"},
		{map[string]string{"PAYLOCK_MIGRATE_DATABASE_URL": "postgres://app:s3cret@db/pay?sslmode=sometimes"}, "PAYLOCK_MIGRATE_DATABASE_URL"},
	} {
		var stderr bytes.Buffer
		code := Main(context.Background(), []string{"serve"}, envMap(c.env), nil, io.Discard, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 2 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) || strings.Contains(msg, "s3cret") {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line naming %s, without the password", c.env, code, msg, c.want)
		}
	}
}

func TestRedisAndMigrationSecretsStayOutOfLogsAndErrors(t *testing.T) {
	cfg := mustConfig(t, map[string]string{
		"PAYLOCK_REDIS_MODE": "sentinel", "PAYLOCK_REDIS_SENTINEL_MASTER": "m", "PAYLOCK_REDIS_SENTINEL_ADDRS": "s:26379",
		"PAYLOCK_REDIS_PASSWORD": "s3cret-redis", "PAYLOCK_REDIS_SENTINEL_PASSWORD": "s3cret-sentinel",
		"PAYLOCK_MIGRATE_DATABASE_URL": "postgres://app:s3cret-migrate@db:5432/pay",
	})
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", slog.Any("config", cfg))
	if strings.Contains(buf.String(), "s3cret") {
		t.Fatalf("a password in the log: %s", buf.String())
	}
	for _, name := range []string{"PAYLOCK_REDIS_PASSWORD", "PAYLOCK_REDIS_SENTINEL_PASSWORD", "PAYLOCK_MIGRATE_DATABASE_URL"} {
		if !isSecret(name) {
			t.Errorf("%s is not a secret setting: a bad value would be echoed", name)
		}
	}
}

// TestNoUniversalClient: go-redis's NewUniversalClient picks a cluster
// client whenever it is given several addresses; paylock must choose the
// client type from PAYLOCK_REDIS_MODE alone.
func TestNoUniversalClient(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("NewUniversalClient(")) {
			t.Errorf("%s calls redis.NewUniversalClient", f)
		}
	}
}

// servePayments runs serve with env and sends one payment twice.
func servePayments(t *testing.T, env map[string]string) []*stormReplica {
	t.Helper()
	reps := startServeReplicas(t, 1, env)
	for i, want := range []string{"processed", "duplicate"} {
		a := deliver(reps, 0, "tx-mode")
		if a.status != 200 || a.result != want {
			t.Fatalf("delivery %d: %d %s, want 200 %s", i, a.status, a.raw, want)
		}
	}
	return reps
}

// serveError runs serve with env and returns its error, expecting it to
// stop before listening.
func serveError(t *testing.T, env map[string]string) error {
	t.Helper()
	cfg := mustConfig(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return serve(ctx, cfg, slog.New(slog.DiscardHandler), nil, nil)
}

func TestServeOnARedisCluster(t *testing.T) {
	cluster := scaletest.RedisCluster(t)
	env := stormEnv(t, testkit.Schema(t))
	env["PAYLOCK_REDIS_MODE"] = "cluster"
	env["PAYLOCK_REDIS_ADDRS"] = strings.Join(cluster.Seeds(), ",")
	env["PAYLOCK_REDIS_PASSWORD"] = cluster.Password
	reps := servePayments(t, env)
	m := testkit.Scrape(t, reps[0].metricsURL)
	if m.Sum("paylock_redis_pool_connections", `state="total"`) < 1 ||
		m.Sum("paylock_lock_release_total", `outcome="released"`) < 1 {
		t.Errorf("metrics lack the cluster client's pool or the released lock:\n%v", m.Map())
	}

	// One node's address as REDIS_URL, standalone: refused at start.
	env = stormEnv(t, testkit.Schema(t))
	env["REDIS_URL"] = "redis://:" + cluster.Password + "@" + cluster.Nodes[0].Addr + "/0"
	err := serveError(t, env)
	if err == nil || !strings.Contains(err.Error(), "redis_mode:cluster") || !strings.Contains(err.Error(), "PAYLOCK_REDIS_MODE=cluster") {
		t.Fatalf("serve with a cluster node as a standalone REDIS_URL: %v; want a refusal saying to set PAYLOCK_REDIS_MODE=cluster", err)
	}
}

func TestServeOnRedisSentinel(t *testing.T) {
	group := scaletest.RedisSentinel(t)
	env := stormEnv(t, testkit.Schema(t))
	env["PAYLOCK_REDIS_MODE"] = "sentinel"
	env["PAYLOCK_REDIS_SENTINEL_MASTER"] = group.MasterName
	env["PAYLOCK_REDIS_SENTINEL_ADDRS"] = strings.Join(group.Addrs, ",")
	env["PAYLOCK_REDIS_PASSWORD"] = group.Password
	env["PAYLOCK_REDIS_SENTINEL_PASSWORD"] = group.SentinelPassword
	servePayments(t, env)

	// A sentinel's address as REDIS_URL, standalone: refused at start.
	env = stormEnv(t, testkit.Schema(t))
	env["REDIS_URL"] = "redis://:" + group.SentinelPassword + "@" + group.Addrs[0] + "/0"
	err := serveError(t, env)
	if err == nil || !strings.Contains(err.Error(), "redis_mode:sentinel") {
		t.Fatalf("serve with a sentinel as a standalone REDIS_URL: %v; want a refusal", err)
	}
}

func TestServeBehindPgBouncer(t *testing.T) {
	pgb := scaletest.PgBouncerEnv(t)
	db := pgb.Database(t, serverTimeouts)
	env := stormEnv(t, db.Pooled)
	env["REDIS_URL"] = testkit.RedisURL(t)
	env["PAYLOCK_DB_EXEC_MODE"] = "exec"
	env["PAYLOCK_MIGRATE_DATABASE_URL"] = db.Direct

	// paylock migrate over the direct URL, then serve with PAYLOCK_MIGRATE=false.
	var stderr bytes.Buffer
	if code := Main(context.Background(), []string{"migrate"}, envMap(env), nil, io.Discard, &stderr); code != 0 {
		t.Fatalf("paylock migrate: exit %d: %s", code, stderr.String())
	}
	env["PAYLOCK_MIGRATE"] = "false"
	servePayments(t, env)

	// Without the exec mode PgBouncer refuses paylock's session settings.
	env["PAYLOCK_DB_EXEC_MODE"] = ""
	if err := serveError(t, env); err == nil || !strings.Contains(err.Error(), "unsupported startup parameter") {
		t.Fatalf("serve through PgBouncer in the default exec mode: %v; want PgBouncer's refusal", err)
	}
}
