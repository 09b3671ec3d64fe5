package handler_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// credit is an embedder's hook: it credits the payment's amount to a
// balance in the recording transaction. failFirst makes its first call write
// the credit and then fail.
type credit struct {
	failFirst bool
	calls     atomic.Int64
}

func (c *credit) hook(ctx context.Context, tx pgx.Tx, p store.Payment) error {
	if _, err := tx.Exec(ctx, `INSERT INTO balances (account, minor) VALUES ('merchant-1', $1)
		ON CONFLICT (account) DO UPDATE SET minor = balances.minor + EXCLUDED.minor`, p.Amount); err != nil {
		return err
	}
	if c.calls.Add(1) == 1 && c.failFirst {
		// Even a store sentinel from a hook means "rolled back, retry".
		return errors.Join(errors.New("ledger unavailable"), store.ErrNotFound)
	}
	return nil
}

func TestHookFailureLeavesNeitherPaymentNorCreditAndTheRetryRecordsBothOnce(t *testing.T) {
	t.Parallel()
	dsn, admin := paylocktest.MigratedSchema(t)
	testkit.Exec(t, admin.Pool(), `CREATE TABLE balances (account text PRIMARY KEY, minor bigint NOT NULL)`)
	c := &credit{failFirst: true}
	r := startReplica(t, paylocktest.Options{DSN: dsn, Config: handler.Config{OnPayment: c.hook}})
	balance := func() int64 {
		var n int64
		err := admin.Pool().QueryRow(context.Background(), `SELECT coalesce(sum(minor), 0) FROM balances`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	a := pay(t, r.URL, "tx-hook", 1000, "JPY")
	wantProblem(t, a, http.StatusServiceUnavailable)
	wantRetryAfter(t, a)
	if n, b := testkit.PaymentRows(t, r.Store.Pool(), "tx-hook"), balance(); n != 0 || b != 0 {
		t.Fatalf("after a failed hook: %d payments, balance %d; want neither", n, b)
	}

	wantResult(t, pay(t, r.URL, "tx-hook", 1000, "JPY"), "processed")
	wantResult(t, pay(t, r.URL, "tx-hook", 1000, "JPY"), "duplicate")
	if n, b := testkit.PaymentRows(t, r.Store.Pool(), "tx-hook"), balance(); n != 1 || b != 1000 {
		t.Fatalf("after the retries: %d payments, balance %d; want 1 and 1000", n, b)
	}
	if got := c.calls.Load(); got != 2 {
		t.Fatalf("the hook ran %d times, want 2 (the failed try and the recording one; never for a duplicate)", got)
	}
}
