package testkit

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Default URLs, matching scripts/test.sh.
const (
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
)

// InCI reports whether tests run under CI=true, where a missing service fails
// the test instead of skipping it.
func InCI() bool { return os.Getenv("CI") == "true" }

// unavailable skips the test, or fails it under CI, saying what is missing.
func unavailable(t testing.TB, what string, err error) {
	t.Helper()
	Missing(t, "%s unreachable (%v); run the tests with scripts/test.sh, which starts one", what, err)
}

// Missing skips t, saying (format and args, as fmt.Sprintf) what it lacks
// to run: a server, a binary, a port. Under CI=true (InCI) it fails t
// instead: CI never passes by skipping. Every test that cannot run for
// want of something the machine should have calls it rather than t.Skip.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatal(msg + " (CI=true: a missing prerequisite fails the test)")
	}
	t.Skip(msg)
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var (
	redisOnce sync.Once
	redisErr  error
	pgOnce    sync.Once
	pgErr     error
)

// RedisURL returns REDIS_URL after checking the server answers PING, skipping
// (or, in CI, failing) the test when it does not.
func RedisURL(t testing.TB) string {
	t.Helper()
	u := env("REDIS_URL", DefaultRedisURL)
	redisOnce.Do(func() {
		opt, err := redis.ParseURL(u)
		if err != nil {
			redisErr = err
			return
		}
		c := redis.NewClient(opt)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		redisErr = c.Ping(ctx).Err()
	})
	if redisErr != nil {
		unavailable(t, "redis at "+u, redisErr)
	}
	return u
}

// Redis returns a client for REDIS_URL, closed when the test ends, after
// applying tweaks to its options. Tests sharing the server must use keys
// of their own (see Key).
func Redis(t testing.TB, tweaks ...func(*redis.Options)) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tweak := range tweaks {
		tweak(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// Key returns a Redis key unique to this test run.
func Key(t testing.TB, name string) string {
	return "paylock-test:" + strings.ReplaceAll(t.Name(), "/", ":") + ":" + uuid.NewString()[:8] + ":" + name
}

// DatabaseURL returns DATABASE_URL after checking the server accepts a
// connection, skipping (or, in CI, failing) the test when it does not.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	u := env("DATABASE_URL", DefaultDatabaseURL)
	pgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			pgErr = err
			return
		}
		defer c.Close(context.Background())
		pgErr = c.Ping(ctx)
	})
	if pgErr != nil {
		unavailable(t, "postgres at "+u, pgErr)
	}
	return u
}

// Schema creates an empty schema of the test's own, drops it when the test
// ends, and returns DATABASE_URL with search_path set to it, so that a pool
// built from the returned URL creates and finds every table there.
func Schema(t testing.TB) string {
	t.Helper()
	base := DatabaseURL(t)
	name := "t_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	if err := execOnce(base, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := execOnce(base, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", name, err)
		}
	})
	return WithSearchPath(t, base, name)
}

// execOnce runs sql on a connection of its own to dsn.
func execOnce(dsn, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, sql)
	return err
}

// WithSearchPath returns dsn with the search_path runtime parameter set.
func WithSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// WithHost returns dsn with its host:port replaced: a proxy's, say, to put
// faults between the code under test and Postgres.
func WithHost(t testing.TB, dsn, hostport string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = hostport
	return u.String()
}

// Connect returns a connection to dsn (a URL from Schema, say), closed when
// the test ends.
func Connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}
