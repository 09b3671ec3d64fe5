package store

import (
	"context"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// holdRowLock inserts p on the admin connection in a transaction left open,
// so that any other insert of p waits on its row lock, and returns the
// rollback that lets them go on.
func holdRowLock(t *testing.T, b *bundle, p Payment) (release func()) {
	t.Helper()
	ctx := context.Background()
	p = p.withSource()
	if _, err := b.admin.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, `INSERT INTO payments (source, transaction_id, amount, currency, payload, event_id)
		VALUES ($1, $2, $3, $4, $5, $6)`, p.Source, p.TransactionID, p.Amount, p.Currency, string(p.Payload), p.EventID); err != nil {
		t.Fatal(err)
	}
	var done bool
	release = func() {
		if !done {
			done = true
			if _, err := b.admin.Exec(ctx, "ROLLBACK"); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(release)
	return release
}

// waitBlocked waits until some session waits on the admin connection's
// locks.
func waitBlocked(t *testing.T, b *bundle) {
	t.Helper()
	ctx := context.Background()
	var pid int
	if err := b.admin.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	// The admin connection is inside its transaction: ask through the pool.
	for range 500 {
		var n int
		if err := b.store.Pool().QueryRow(ctx,
			"SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no session ever waited on the held row lock")
}

// stallWriter records tx_held through b's store while another session
// holds its row lock: the insert takes a writer and waits on the lock until
// release. held gets the insert's outcome.
func stallWriter(t *testing.T, b *bundle) (release func(), held <-chan error) {
	t.Helper()
	release = holdRowLock(t, b, newPayment("tx_held"))
	out := make(chan error, 1)
	go func() {
		_, err := b.store.Payments().RecordPayment(context.Background(), newPayment("tx_held"))
		out <- err
	}()
	waitBlocked(t, b)
	return release, out
}

// TestPaymentsQueuedBehindAStalledStatementAreRecordedWithoutIt: the only
// writer's insert waits on another session's row lock. The payments that
// queue behind it are recorded by a writer their stall started (Config.
// BatchStall), or, under Alone, by a statement of their own, while the
// stalled insert still waits; it is recorded once the lock is gone.
func TestPaymentsQueuedBehindAStalledStatementAreRecordedWithoutIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		stall time.Duration
		alone bool
	}{
		{name: "stall starts a writer", stall: 20 * time.Millisecond},
		{name: "alone never queues", stall: -1, alone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *Config) {
				c.BatchMax, c.BatchWriters, c.BatchStall = 64, 1, tc.stall
				c.MaxConns, c.LockTimeout = 6, time.Minute
			})
			ps := b.store.Payments()
			release, held := stallWriter(t, b)

			ctx := context.Background()
			if tc.alone {
				ctx = Alone(ctx)
			}
			const n = 3
			errs := make(chan error, n)
			for i := range n {
				go func() {
					_, err := ps.RecordPayment(ctx, newPayment("tx_queued_"+string(rune('a'+i))))
					errs <- err
				}()
			}
			for range n {
				select {
				case err := <-errs:
					if err != nil {
						t.Errorf("a payment queued behind the stalled insert: %v", err)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("a payment queued behind the stalled insert is still waiting after 20s")
				}
			}
			select {
			case err := <-held:
				t.Fatalf("the insert waiting on the row lock returned before the lock was released: %v", err)
			default:
			}
			release()
			if err := <-held; err != nil {
				t.Errorf("the stalled insert, once the lock is gone: %v", err)
			}
			var m dto.Metric
			if err := ps.batch.stalls.Write(&m); err != nil {
				t.Fatal(err)
			}
			switch stalls := m.GetCounter().GetValue(); {
			case tc.alone && stalls != 0:
				t.Errorf("paylock_db_batch_stalls_total = %v; want 0: Alone payments never queue", stalls)
			case !tc.alone && stalls < 1:
				t.Errorf("paylock_db_batch_stalls_total = %v; want at least 1", stalls)
			}
			var count int
			if err := b.admin.QueryRow(context.Background(), "SELECT count(*) FROM payments").Scan(&count); err != nil {
				t.Fatal(err)
			}
			if count != n+1 {
				t.Errorf("%d payments recorded; want %d", count, n+1)
			}
		})
	}
}

// TestAQueuedPaymentWhoseContextEndsLeavesTheQueueUnsent: a payment queued
// behind a stalled writer (no stall rule) whose client goes away is
// answered ErrUnavailable at once, wrapping the cause, and is never sent:
// once the writer is free, nothing of it is recorded.
func TestAQueuedPaymentWhoseContextEndsLeavesTheQueueUnsent(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {
		c.BatchMax, c.BatchWriters, c.BatchStall = 64, 1, -1
		c.LockTimeout = time.Minute
	})
	ps := b.store.Payments()
	release, held := stallWriter(t, b)

	errGone := errors.New("client gone")
	ctx, cancel := context.WithCancelCause(context.Background())
	queued := make(chan error, 1)
	go func() {
		_, err := ps.RecordPayment(ctx, newPayment("tx_gone"))
		queued <- err
	}()
	for queuedLen(ps) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel(errGone)
	select {
	case err := <-queued:
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errGone) || errors.Is(err, ErrCommitUnknown) {
			t.Errorf("got %v; want ErrUnavailable wrapping the cause, not sent", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the queued payment is still waiting 20s after its context ended")
	}
	if n := queuedLen(ps); n != 0 {
		t.Errorf("%d payments still queued; want 0", n)
	}
	release()
	if err := <-held; err != nil {
		t.Errorf("the stalled insert, once the lock is gone: %v", err)
	}
	var count int
	if err := b.admin.QueryRow(context.Background(), "SELECT count(*) FROM payments WHERE transaction_id = 'tx_gone'").Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 0 {
		t.Errorf("the payment whose context ended was recorded %d times; want never sent", count)
	}
}

// queuedLen is how many payments wait in ps's batch queue.
func queuedLen(ps *Payments) int {
	ps.batch.mu.Lock()
	defer ps.batch.mu.Unlock()
	return len(ps.batch.pending)
}
