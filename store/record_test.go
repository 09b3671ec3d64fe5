package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/paylock/paylock/internal/testkit"
)

func TestRecordPaymentFuncRunsFnInTheRecordingTransactionOnlyForANewPayment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testkit.Exec(t, b.admin, "CREATE TABLE outbox (source text, transaction_id text)")
	ctx := context.Background()
	var calls atomic.Int32
	enqueue := func(ctx context.Context, tx pgx.Tx, p Payment) error {
		calls.Add(1)
		if p.Source != DefaultSource || p.ReceivedAt.IsZero() {
			return fmt.Errorf("fn got %+v, want the payment as recorded", p)
		}
		_, err := tx.Exec(ctx, "INSERT INTO outbox VALUES ($1, $2)", p.Source, p.TransactionID)
		return err
	}
	outbox := func(tx string) int {
		var n int
		if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE transaction_id = $1", tx).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	p := newPayment("tx_fn")
	if _, err := b.store.Payments().RecordPaymentFunc(ctx, p, enqueue); err != nil {
		t.Fatalf("new payment: %v", err)
	}
	if _, err := b.store.Payments().RecordPaymentFunc(ctx, p, enqueue); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("same again: %v, want ErrDuplicate", err)
	}
	if calls.Load() != 1 || outbox(p.TransactionID) != 1 {
		t.Errorf("fn ran %d times, %d outbox rows; want once, 1 row (not for the duplicate)", calls.Load(), outbox(p.TransactionID))
	}

	for _, tc := range []struct {
		name      string
		err       error
		transient bool
	}{
		{"PlainError", errors.New("outbox full"), false},
		{"TransientError", fmt.Errorf("enqueue: %w", context.DeadlineExceeded), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newPayment("tx_fn_" + tc.name)
			_, err := b.store.Payments().RecordPaymentFunc(ctx, q, func(ctx context.Context, tx pgx.Tx, p Payment) error {
				if err := enqueue(ctx, tx, p); err != nil {
					return err
				}
				return tc.err
			})
			if !errors.Is(err, tc.err) || isSuccessLike(err) || errors.Is(err, ErrUnavailable) != tc.transient {
				t.Fatalf("got %v; want %v wrapped, ErrUnavailable %v", err, tc.err, tc.transient)
			}
			if testkit.PaymentRows(t, b.admin, q.TransactionID) != 0 || outbox(q.TransactionID) != 0 {
				t.Errorf("fn failed but the payment or its outbox row was committed")
			}
		})
	}
}

// TestACauseSetBeforeSendingRecordsNothing: a lease lost before the insert
// is sent stops it, on both paths.
func TestACauseSetBeforeSendingRecordsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lost := errors.New("lease lost")
	for _, path := range recordPaths {
		t.Run(path.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(lost)
			p := newPayment("tx_lost_" + path.name)
			_, err := path.record(b.store, ctx, p)
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, lost) || errors.Is(err, ErrCommitUnknown) {
				t.Fatalf("got %v, want ErrUnavailable wrapping the cause (nothing sent)", err)
			}
			if n := testkit.PaymentRows(t, b.admin, p.TransactionID); n != 0 {
				t.Errorf("%d rows, want 0", n)
			}
		})
	}
}

// TestPaymentsCommitSynchronouslyWhateverTheDefault: a session whose default
// is synchronous_commit=off (here from the URL's options; on a shared
// server ALTER DATABASE or ROLE would reach other tests) still commits a
// payment only once its WAL is flushed. In the direct modes the session says
// so; in the pooled modes, which set no session parameter, the recording
// insert sets it for its own transaction.
func TestPaymentsCommitSynchronouslyWhateverTheDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// What the inserting transaction sees, recorded beside the row.
	testkit.Exec(t, b.admin, `CREATE TABLE seen (transaction_id text, synchronous_commit text);
		CREATE FUNCTION note_sync() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			INSERT INTO seen VALUES (NEW.transaction_id, current_setting('synchronous_commit'));
			RETURN NEW; END $$;
		CREATE TRIGGER note_sync AFTER INSERT ON payments FOR EACH ROW EXECUTE FUNCTION note_sync()`)
	u := b.url + "&options=-c%20synchronous_commit%3Doff"
	ctx := context.Background()
	show := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		t.Helper()
		var v string
		if err := q.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	plain, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)
	if got := show(plain); got != "off" {
		t.Fatalf("a plain session of the URL has synchronous_commit=%s; the test needs off", got)
	}

	for _, tc := range []struct {
		mode    ExecMode
		session string // what the store's sessions show
	}{
		{"", "on"},
		{ExecCacheDescribe, "on"},
		{ExecExec, "off"},
		{ExecSimpleProtocol, "off"},
	} {
		t.Run("Mode="+string(tc.mode), func(t *testing.T) {
			s, err := Open(ctx, Config{URL: u, ExecMode: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := show(s.pool); got != tc.session {
				t.Errorf("the store's session shows synchronous_commit=%s, want %s", got, tc.session)
			}
			for _, path := range []string{"Autocommit", "Transaction"} {
				p := newPayment("tx_sync_" + string(tc.mode) + "_" + path)
				var inTx string
				fn := func(ctx context.Context, tx pgx.Tx, _ Payment) error {
					inTx = show(tx)
					return nil
				}
				if path == "Autocommit" {
					fn = nil
				}
				if _, err := s.Payments().RecordPaymentFunc(ctx, p, fn); err != nil {
					t.Fatal(err)
				}
				var atInsert string
				if err := b.admin.QueryRow(ctx, "SELECT synchronous_commit FROM seen WHERE transaction_id = $1",
					p.TransactionID).Scan(&atInsert); err != nil {
					t.Fatal(err)
				}
				if atInsert != "on" || (fn != nil && inTx != "on") {
					t.Errorf("%s: synchronous_commit %q at the insert, %q in fn; want on", path, atInsert, inTx)
				}
			}
		})
	}
}

// benchSeq numbers the benchmark's payments: every one is new, across runs
// (-count) sharing a schema.
var benchSeq atomic.Int64

// BenchmarkRecordPayment records new payments (unique ids) one at a time,
// on each path, beside its floor: the same pool's one-round-trip SELECT 1.
func BenchmarkRecordPayment(b *testing.B) {
	st := setup(b).store
	ctx := context.Background()
	b.Run("Floor/SELECT1", func(b *testing.B) {
		for b.Loop() {
			if _, err := st.pool.Exec(ctx, "SELECT 1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, path := range recordPaths {
		b.Run(path.name, func(b *testing.B) {
			for b.Loop() {
				id := fmt.Sprintf("bench_%s_%d", path.name, benchSeq.Add(1))
				if _, err := path.record(st, ctx, newPayment(id)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
