package admin_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testenv"
	"github.com/paylock/paylock/store"
)

// testLogger sends the admin listener's logs to the test log when -v and
// PAYLOCK_TEST_LOGS is set, else discards them.
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
