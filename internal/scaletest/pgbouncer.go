package scaletest

import (
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/internal/testkit"
)

// PgBouncer is the pooler of scripts/pgbouncer.sh: transaction pooling in
// front of the test Postgres, every database reachable under its own name.
type PgBouncer struct {
	URL string // DATABASE_URL with PgBouncer's host and port
	Dir string // the script's directory, for Crash
}

// PgBouncerEnv returns the pooler named by PAYLOCK_TEST_PGBOUNCER, or skips
// the test.
func PgBouncerEnv(t testing.TB) PgBouncer {
	t.Helper()
	u := need(t, "PAYLOCK_TEST_PGBOUNCER", "PgBouncer in transaction pooling mode (scripts/pgbouncer.sh; apt-get install pgbouncer)")
	return PgBouncer{URL: u, Dir: need(t, "PAYLOCK_TEST_PGBOUNCER_DIR", "PgBouncer")}
}

// Database is a database of a test's own, reachable directly and through
// PgBouncer. Through a transaction pooler a session parameter such as
// search_path cannot isolate a test (PgBouncer refuses it), so tests that
// go through the pooler get a database each instead of a schema.
type Database struct {
	Name   string
	Direct string // to Postgres
	Pooled string // through PgBouncer
}

// Database creates an empty database, dropped when the test ends. settings
// become the database's defaults (ALTER DATABASE ... SET), which every
// session PgBouncer opens picks up: that is how session settings reach a
// pooled connection.
func (p PgBouncer) Database(t testing.TB, settings map[string]string) Database {
	t.Helper()
	base := testkit.DatabaseURL(t)
	name := "paylock_scale_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	admin := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		_, err = c.Exec(ctx, sql)
		return err
	}
	if err := admin("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := admin("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	for k, v := range settings {
		if err := admin("ALTER DATABASE " + name + " SET " + k + " = '" + strings.ReplaceAll(v, "'", "''") + "'"); err != nil {
			t.Fatal(err)
		}
	}
	return Database{Name: name, Direct: withDatabase(t, base, name), Pooled: withDatabase(t, p.URL, name)}
}

func withDatabase(t testing.TB, dsn, name string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// Exec runs sql on the database directly, failing the test on error.
func (d Database) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, d.Direct)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TerminateBackends ends every other session of the database on the
// server, as a Postgres restart or failover behind the pooler would, and
// returns how many it ended.
func (d Database) TerminateBackends(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, d.Direct)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var n int
	err = c.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, d.Name).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Crash kills PgBouncer (SIGKILL) and starts it again on the same port
// (scripts/pgbouncer.sh crash), returning how long it was gone.
func (p PgBouncer) Crash(t testing.TB) time.Duration {
	t.Helper()
	start := time.Now()
	out, err := exec.Command("bash", filepath.Join(repoRoot(), "scripts", "pgbouncer.sh"), "crash", p.Dir).CombinedOutput()
	if err != nil {
		t.Fatalf("pgbouncer crash: %v: %s", err, out)
	}
	return time.Since(start)
}

// repoRoot is the repository's root, two levels above this file.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
