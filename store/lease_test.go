package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

// TestALeaseLostBeforeSendingRecordsNothing: with the lease passed by
// WithLease, as the handler does, a lease that ended before the insert is
// sent stops it on both paths, as a ctx that ended does.
func TestALeaseLostBeforeSendingRecordsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range recordPaths {
		t.Run(path.name, func(t *testing.T) {
			lease, lose := context.WithCancelCause(context.Background())
			lose(errLeaseLostForTest)
			p := newPayment("tx_lease_before_" + path.name)
			_, err := path.record(b.store, WithLease(context.Background(), lease), p)
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errLeaseLostForTest) || errors.Is(err, ErrCommitUnknown) {
				t.Fatalf("got %v, want ErrUnavailable wrapping the lease's cause (nothing sent)", err)
			}
			if n := testkit.PaymentRows(t, b.admin, p.TransactionID); n != 0 {
				t.Errorf("%d rows, want 0", n)
			}
		})
	}
}

// TestALeaseLostWhileTheInsertRunsInterruptsNothingButHookWork: the lease
// ends while the insert is on the server (a Redis failover, a keepalive
// that could not confirm). In autocommit, alone or in a batch, the insert
// runs to its answer and the payment is recorded, answered as recorded: the
// constraint, not the lock, decides it, and interrupting the statement
// would only make its outcome unknown (a 503 for a payment that committed).
// In a transaction, the hook's work must not commit: rolled back,
// ErrUnavailable wrapping the lease's cause, nothing recorded.
func TestALeaseLostWhileTheInsertRunsInterruptsNothingButHookWork(t *testing.T) {
	t.Parallel()
	const sleep = 300 * time.Millisecond
	for _, tc := range []struct {
		name    string
		batched int // deliveries recorded at once; 1: the single-row path
		hook    bool
	}{{"Autocommit", 1, false}, {"AutocommitBatch", 4, false}, {"Transaction", 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *Config) { c.BatchWriters, c.BatchStall = 1, -1 })
			testkit.SlowInsert{Sleep: sleep}.Install(t, b.admin)
			lease, lose := context.WithCancelCause(context.Background())
			defer lose(nil)
			lostAt := sleep / 3
			if tc.batched > 1 {
				// The first delivery's insert holds the only writer; the
				// others queue behind it and go as one batch, which the
				// lease's end finds in flight (the trigger sleeps once per
				// row: the batch runs from about sleep to 4*sleep).
				lostAt = 2 * sleep
			}
			time.AfterFunc(lostAt, func() { lose(errLeaseLostForTest) })
			errs := make(chan error, tc.batched)
			ids := make([]string, tc.batched)
			for i := range tc.batched {
				ids[i] = fmt.Sprintf("tx_lease_during_%s_%d", tc.name, i)
				p := newPayment(ids[i])
				ctx := WithLease(context.Background(), lease)
				if tc.batched > 1 && i == 0 {
					ctx = context.Background()
				}
				go func() {
					var err error
					if tc.hook {
						_, err = recordInTx(b.store, ctx, p)
					} else {
						_, err = b.store.Payments().RecordPayment(ctx, p)
					}
					errs <- err
				}()
				if i == 0 && tc.batched > 1 {
					time.Sleep(sleep / 6) // the first takes the writer
				}
			}
			for range tc.batched {
				err := <-errs
				switch {
				case tc.hook && (!errors.Is(err, ErrUnavailable) || !errors.Is(err, errLeaseLostForTest) || errors.Is(err, ErrCommitUnknown)):
					t.Errorf("got %v, want ErrUnavailable wrapping the lease's cause, not committed", err)
				case !tc.hook && err != nil:
					t.Errorf("got %v, want recorded (the insert was in flight when the lease ended)", err)
				}
			}
			if statements, rows := batchRows(t, b.store.Payments()); tc.batched > 1 && rows-float64(statements) < float64(tc.batched-2) {
				t.Errorf("%d statements for %.0f rows: the queued deliveries did not go as one batch", statements, rows)
			}
			want := 1
			if tc.hook {
				want = 0
			}
			for _, id := range ids {
				if n := testkit.PaymentRows(t, b.admin, id); n != want {
					t.Errorf("%s: %d rows, want %d", id, n, want)
				}
			}
		})
	}
}

// TestALeaseLostCommitsNoDisbursement: a loan delivery takes the tranche's
// lock too. Its lease, passed with WithLease, lost before the transaction
// starts sends nothing, and lost while the transaction runs rolls it back:
// no disbursement, no payout job, the event id not kept; the retry then
// accepts the tranche.
func TestALeaseLostCommitsNoDisbursement(t *testing.T) {
	t.Parallel()
	for _, during := range []bool{false, true} {
		name := "BeforeSending"
		if during {
			name = "WhileTheTransactionRuns"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			lease, lose := context.WithCancelCause(context.Background())
			defer lose(nil)
			if during {
				testkit.SlowInsert{Table: "disbursements", Sleep: 300 * time.Millisecond}.Install(t, b.admin)
				time.AfterFunc(100*time.Millisecond, func() { lose(errLeaseLostForTest) })
			} else {
				lose(errLeaseLostForTest)
			}
			d := newDisbursement("L-lease-"+name, 1, "evt_lease_"+name)
			_, err := b.store.Disbursements().AcceptDisbursement(WithLease(context.Background(), lease), d)
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errLeaseLostForTest) || errors.Is(err, ErrCommitUnknown) {
				t.Fatalf("got %v, want ErrUnavailable wrapping the lease's cause, nothing committed", err)
			}
			var n int
			if err := b.admin.QueryRow(context.Background(),
				"SELECT (SELECT count(*) FROM disbursements WHERE loan_id = $1) + (SELECT count(*) FROM webhook_events WHERE event_id = $2)",
				d.LoanID, d.EventID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Fatalf("%d disbursement or event rows committed after the lease was lost, want 0", n)
			}
			if _, err := b.store.Disbursements().AcceptDisbursement(context.Background(), d); err != nil {
				t.Errorf("retry: %v, want accepted", err)
			}
		})
	}
}
