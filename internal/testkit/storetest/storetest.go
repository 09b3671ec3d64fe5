// Package storetest opens paylock's store over a schema of the test's own,
// migrated, for tests that must not import every provider (as
// internal/testkit/paylocktest does): a provider package's own pipeline
// tests.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/store"
)

// Open opens a store configured by cfg, closed when the test ends.
func Open(t testing.TB, cfg store.Config) *store.Store {
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

// MigratedSchema returns the URL of a fresh schema of the test's own (see
// testkit.Schema) holding paylock's tables, and the store that migrated it,
// open until the test ends.
func MigratedSchema(t testing.TB) (string, *store.Store) {
	t.Helper()
	dsn := testkit.Schema(t)
	return dsn, Migrated(t, dsn)
}

// Migrated migrates the database (or schema) of dsn, a URL the test
// already has, and returns the store that did, open until the test ends.
func Migrated(t testing.TB, dsn string) *store.Store {
	t.Helper()
	st := Open(t, store.Config{URL: dsn})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}
