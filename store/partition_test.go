package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/paylock/paylock/internal/testkit"
)

// The partitioned layout docs/scaling.md offers, applied by
// docs/sql/payments-hash-partitioned.sql to a table that already holds
// payments: the store works on it unchanged, and the guarantee stays
// global. Partitioning by time alone would not keep it.

func TestHashPartitionedPaymentsKeepExactlyOnce(t *testing.T) {
	t.Parallel()
	sqlText, err := os.ReadFile("../docs/sql/payments-hash-partitioned.sql")
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t)
	ctx := context.Background()
	const before = 300
	for i := range before {
		if _, err := b.store.Payments().RecordPayment(ctx, newPayment(fmt.Sprintf("tx_old_%d", i))); err != nil {
			t.Fatal(err)
		}
	}

	testkit.Exec(t, b.admin, string(sqlText))

	var partitions, rows int
	if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'payments'::regclass`).Scan(&partitions); err != nil {
		t.Fatal(err)
	}
	if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if partitions != 8 || rows != before {
		t.Fatalf("%d partitions, %d rows; want 8 and the %d payments recorded before", partitions, rows, before)
	}

	// Payments recorded before the change are still duplicates.
	if _, err := b.store.Payments().RecordPayment(ctx, newPayment("tx_old_7")); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("an old payment again: %v, want ErrDuplicate", err)
	}
	old := newPayment("tx_old_8")
	old.Amount++
	if _, err := b.store.Payments().RecordPayment(ctx, old); !errors.Is(err, ErrMismatch) {
		t.Fatalf("an old payment with another amount: %v, want ErrMismatch", err)
	}

	// New payments, many deliveries each at once, across the partitions.
	const txs, deliveries = 40, 8
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		processed = map[string]int{}
	)
	for i := range txs * deliveries {
		wg.Go(func() {
			tx := fmt.Sprintf("tx_new_%d", i%txs)
			_, err := b.store.Payments().RecordPayment(ctx, newPayment(tx))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				processed[tx]++
			case !errors.Is(err, ErrDuplicate):
				t.Errorf("%s: %v", tx, err)
			}
		})
	}
	wg.Wait()
	for i := range txs {
		tx := fmt.Sprintf("tx_new_%d", i)
		if processed[tx] != 1 || testkit.PaymentRows(t, b.admin, tx) != 1 {
			t.Errorf("%s: recorded %d times, %d rows; want 1 and 1", tx, processed[tx], testkit.PaymentRows(t, b.admin, tx))
		}
	}
	var used int
	if err := b.admin.QueryRow(ctx, `SELECT count(DISTINCT tableoid) FROM payments`).Scan(&used); err != nil || used < 2 {
		t.Fatalf("rows in %d partitions (%v), want them spread", used, err)
	}

	// The id keeps counting where it was.
	var maxOld, minNew int64
	if err := b.admin.QueryRow(ctx, `SELECT max(id) FILTER (WHERE transaction_id LIKE 'tx_old_%'),
		min(id) FILTER (WHERE transaction_id LIKE 'tx_new_%') FROM payments`).Scan(&maxOld, &minNew); err != nil || minNew <= maxOld {
		t.Fatalf("ids: old up to %d, new from %d (%v); want them to keep increasing", maxOld, minNew, err)
	}

	// A raw unique violation names the partition's index, not
	// payments_transaction_id_key: the store does not take it for a
	// duplicate, and answers an error, never success. (Its insert uses
	// ON CONFLICT on the parent's constraint, so this path is not taken.)
	b.store.payments.insert = plainInsertSQL
	_, err = b.store.Payments().RecordPayment(ctx, newPayment("tx_new_3"))
	var pgErr *pgconn.PgError
	if isSuccessLike(err) || !errors.As(err, &pgErr) || pgErr.Code != codeUniqueViolation || !strings.HasPrefix(pgErr.ConstraintName, "payments_p") {
		t.Fatalf("plain insert of a duplicate on the partitioned table: %v; want an error carrying the partition's unique violation", err)
	}

	var bytesPerRow float64
	if err := b.admin.QueryRow(ctx, `SELECT sum(pg_total_relation_size(inhrelid))::float8 / (SELECT count(*) FROM payments)
		FROM pg_inherits WHERE inhparent = 'payments'::regclass`).Scan(&bytesPerRow); err == nil {
		t.Logf("%.0f bytes per payment on disk (heap, TOAST and both indexes; tiny test payloads, mostly-empty pages)", bytesPerRow)
	}
}

func TestTimePartitioningAloneWouldBreakExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	// Postgres refuses a unique transaction_id on a table partitioned by
	// time...
	_, err := b.admin.Exec(ctx, `CREATE TABLE payments_by_month (
		transaction_id text NOT NULL, received_at timestamptz NOT NULL,
		CONSTRAINT payments_by_month_transaction_id_key UNIQUE (transaction_id)
	) PARTITION BY RANGE (received_at)`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "0A000" {
		t.Fatalf("UNIQUE (transaction_id) on a time-partitioned table: %v, want feature_not_supported", err)
	}
	// ...and what it accepts instead lets one payment in twice.
	testkit.Exec(t, b.admin, `CREATE TABLE payments_by_month (
		transaction_id text NOT NULL, received_at timestamptz NOT NULL,
		CONSTRAINT payments_by_month_transaction_id_key UNIQUE (transaction_id, received_at)
	) PARTITION BY RANGE (received_at);
	CREATE TABLE payments_2026_01 PARTITION OF payments_by_month FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
	CREATE TABLE payments_2026_02 PARTITION OF payments_by_month FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
	INSERT INTO payments_by_month VALUES ('tx_twice', '2026-01-31 23:59:59+00'), ('tx_twice', '2026-02-01 00:00:01+00')`)
	var n int
	if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM payments_by_month WHERE transaction_id = 'tx_twice'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows = %d (%v); the time-partitioned layout was expected to accept the duplicate", n, err)
	}
}
