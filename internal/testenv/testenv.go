// Package testenv is what internal/testkit was called before it held more
// than the servers: every function here is testkit's, under its old name,
// for the packages that have not moved to testkit yet (handler, store,
// forward, cmd/paylock). New tests import testkit; this package goes once
// nothing imports it.
package testenv

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
)

// Default URLs, matching scripts/test.sh.
//
// Deprecated: use testkit.DefaultDatabaseURL and testkit.DefaultRedisURL.
const (
	DefaultDatabaseURL = testkit.DefaultDatabaseURL
	DefaultRedisURL    = testkit.DefaultRedisURL
)

// InCI is testkit.InCI.
//
// Deprecated: use testkit.InCI.
func InCI() bool { return testkit.InCI() }

// RedisURL is testkit.RedisURL.
//
// Deprecated: use testkit.RedisURL.
func RedisURL(t testing.TB) string { t.Helper(); return testkit.RedisURL(t) }

// Redis is testkit.Redis.
//
// Deprecated: use testkit.Redis.
func Redis(t testing.TB) *redis.Client { t.Helper(); return testkit.Redis(t) }

// Key is testkit.Key.
//
// Deprecated: use testkit.Key.
func Key(t testing.TB, name string) string { return testkit.Key(t, name) }

// DatabaseURL is testkit.DatabaseURL.
//
// Deprecated: use testkit.DatabaseURL.
func DatabaseURL(t testing.TB) string { t.Helper(); return testkit.DatabaseURL(t) }

// Schema is testkit.Schema.
//
// Deprecated: use testkit.Schema.
func Schema(t testing.TB) string { t.Helper(); return testkit.Schema(t) }

// WithSearchPath is testkit.WithSearchPath.
//
// Deprecated: use testkit.WithSearchPath.
func WithSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	return testkit.WithSearchPath(t, dsn, schema)
}
