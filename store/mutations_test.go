package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lifecycle"
)

// The tests of this file kill mutations that survived every other test
// (issue #36; internal/mutate lists them): each fails when the guarantee it
// names is taken out of the code.

// answer names the outcome a delivery is given, for messages and for
// comparing an outcome with the one a model expects.
func answer(err error) string {
	switch {
	case err == nil:
		return "recorded"
	case errors.Is(err, ErrMismatch) && errors.Is(err, ErrDuplicate):
		return "both duplicate and mismatch"
	case errors.Is(err, ErrMismatch):
		return "mismatch"
	case errors.Is(err, ErrDuplicate):
		return "duplicate"
	case errors.Is(err, ErrInvalidPayload):
		return "invalid"
	}
	return "error: " + err.Error()
}

// singleRowPaths reach RecordPaymentFunc's own single-row path (never the
// batcher's): a store without batching, and a delivery recorded Alone, as
// the handler records one when Redis is down.
var singleRowPaths = []struct {
	name string
	cfg  func(*Config)
	ctx  func(context.Context) context.Context
}{
	{"BatchMax1", func(c *Config) { c.BatchMax = 1 }, func(ctx context.Context) context.Context { return ctx }},
	{"Alone", func(*Config) {}, Alone},
}

// TestTheSingleRowPathConfirmsEachRedeliveryByAFreshRead: on the
// single-row path, a redelivery is answered from the stored row, read after
// the conflict: the same amount and currency are a duplicate carrying the
// stored row (its received_at and event id, not the redelivery's), another
// amount or currency is a mismatch, never a duplicate.
func TestTheSingleRowPathConfirmsEachRedeliveryByAFreshRead(t *testing.T) {
	t.Parallel()
	for _, sp := range singleRowPaths {
		for _, path := range recordPaths {
			t.Run(sp.name+"/"+path.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t, sp.cfg)
				if sp.name == "BatchMax1" && b.store.payments.batch != nil {
					t.Fatal("BatchMax 1 still batches")
				}
				ctx := sp.ctx(context.Background())
				p := newPayment("tx_single")
				first, err := path.record(b.store, ctx, p)
				if err != nil {
					t.Fatalf("first delivery: %v", err)
				}
				redelivered := p
				redelivered.EventID = "evt_redelivered"
				otherAmount := p
				otherAmount.Amount++
				otherCurrency := p
				otherCurrency.Currency = "USD"
				for _, tc := range []struct {
					name string
					q    Payment
					want string
				}{
					{"SameAgain", p, "duplicate"},
					{"SameUnderAnotherEventID", redelivered, "duplicate"},
					{"OtherAmount", otherAmount, "mismatch"},
					{"OtherCurrency", otherCurrency, "mismatch"},
				} {
					got, err := path.record(b.store, ctx, tc.q)
					if a := answer(err); a != tc.want {
						t.Errorf("%s: %s (%v), want %s", tc.name, a, err, tc.want)
						continue
					}
					if !got.ReceivedAt.Equal(first.ReceivedAt) || got.EventID != p.EventID || got.Amount != p.Amount || got.Currency != p.Currency {
						t.Errorf("%s: returned %+v, want the stored row (received %v, event %s, %d %s)",
							tc.name, got, first.ReceivedAt, p.EventID, p.Amount, p.Currency)
					}
				}
				if n := testkit.PaymentRows(t, b.admin, p.TransactionID); n != 1 {
					t.Errorf("%d rows, want 1", n)
				}
			})
		}
	}
}

// TestABatchRowAlreadyStoredIsConfirmedByAFreshRead: a row of a multi-row
// statement that the arbiter held (stored by an earlier delivery) is not
// answered "recorded": a fresh read answers it duplicate or mismatch,
// with the stored row.
func TestABatchRowAlreadyStoredIsConfirmedByAFreshRead(t *testing.T) {
	t.Parallel()
	for _, path := range []struct {
		name string
		fn   recordFn
	}{{"Autocommit", nil}, {"Transaction", sideHook}} {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			testkit.Exec(t, b.admin, "CREATE TABLE hook_work (transaction_id text)")
			ps := b.store.Payments()
			ctx := Alone(context.Background())
			stored := map[string]Payment{}
			for _, tx := range []string{"tx_dup", "tx_mis"} {
				rec, err := ps.RecordPaymentFunc(ctx, newPayment(tx), path.fn)
				if err != nil {
					t.Fatal(err)
				}
				stored[tx] = rec
			}
			mis := newPayment("tx_mis")
			mis.Amount = 7
			items := []batchItem{{p: newPayment("tx_new_1")}, {p: newPayment("tx_dup")}, {p: mis}, {p: newPayment("tx_new_2")}}
			for i := range items {
				items[i].fn = path.fn
			}
			out := recordAsBatch(ps, items)
			for i, want := range []string{"recorded", "duplicate", "mismatch", "recorded"} {
				tx := items[i].p.TransactionID
				if got := answer(out[i].err); got != want {
					t.Errorf("%s: %s (%v), want %s", tx, got, out[i].err, want)
					continue
				}
				if s, ok := stored[tx]; ok && (!out[i].rec.ReceivedAt.Equal(s.ReceivedAt) || out[i].rec.Amount != s.Amount) {
					t.Errorf("%s: returned %+v, want the stored row %+v", tx, out[i].rec, s)
				}
			}
			if statements, rows := batchRows(t, ps); statements != 1 || rows != 4 {
				t.Errorf("%d statements carrying %v rows; want the four rows in one", statements, rows)
			}
			for _, tx := range []string{"tx_new_1", "tx_dup", "tx_mis", "tx_new_2"} {
				if n := testkit.PaymentRows(t, b.admin, tx); n != 1 {
					t.Errorf("%s: %d rows, want 1", tx, n)
				}
				if path.fn != nil && hookWork(t, b, tx) != 1 {
					t.Errorf("%s: hook work %d, want 1", tx, hookWork(t, b, tx))
				}
			}
		})
	}
}

// TestAStormOfRedeliveriesGivesEachItsExactAnswer: many payments, each
// delivered three times at once (twice the same, once with another amount),
// through the batcher. Whichever delivery the database recorded, the
// answers follow from the stored row exactly: one "recorded" (with the
// stored received_at), the others "duplicate" when they carry the stored
// amount and "mismatch" when not.
func TestAStormOfRedeliveriesGivesEachItsExactAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ps := b.store.Payments()
	const n = 200
	type delivery struct {
		p   Payment
		rec Payment
		err error
	}
	deliveries := make([][]*delivery, n)
	var wg sync.WaitGroup
	for i := range n {
		p := newPayment(fmt.Sprintf("tx_storm_%d", i))
		other := p
		other.Amount++
		deliveries[i] = []*delivery{{p: p}, {p: p}, {p: other}}
		for _, d := range deliveries[i] {
			wg.Go(func() {
				d.rec, d.err = ps.RecordPaymentForwarded(context.Background(), d.p, "default")
			})
		}
	}
	wg.Wait()
	ctx := context.Background()
	for i, ds := range deliveries {
		tx := ds[0].p.TransactionID
		stored, err := ps.Payment(ctx, "", tx)
		if err != nil {
			t.Errorf("%s: %v", tx, err)
			continue
		}
		recorded := 0
		for j, d := range ds {
			want := "duplicate"
			switch {
			case d.p.Amount != stored.Amount:
				want = "mismatch"
			case d.err == nil:
				want = "recorded"
				recorded++
				if !d.rec.ReceivedAt.Equal(stored.ReceivedAt) {
					t.Errorf("%s delivery %d: recorded at %v, stored at %v", tx, j, d.rec.ReceivedAt, stored.ReceivedAt)
				}
			}
			if got := answer(d.err); got != want {
				t.Errorf("%s delivery %d (amount %d, stored %d): %s (%v), want %s", tx, j, d.p.Amount, stored.Amount, got, d.err, want)
			}
		}
		if recorded != 1 {
			t.Errorf("payment %d: %d deliveries answered recorded, want exactly 1", i, recorded)
		}
	}
	var payments, jobs int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM payments").Scan(&payments); err != nil {
		t.Fatal(err)
	}
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = $1", ForwardArgs{}.Kind()).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if payments != n || jobs != n {
		t.Errorf("%d payments, %d forward jobs; want %d of each", payments, jobs, n)
	}
	statements, rows := batchRows(t, ps)
	t.Logf("%d statements carried %v rows", statements, rows)
}

// TestALeaseLostInAPaymentsHookCommitsNothing: the lease ends while the
// recording transaction's hook runs (deterministically: the hook ends it).
// The transaction must not commit, on the single-row path and on the
// batcher's: ErrUnavailable wrapping the lease's cause, no payment, no hook
// work; a retry under a live lease records it.
func TestALeaseLostInAPaymentsHookCommitsNothing(t *testing.T) {
	t.Parallel()
	paths := append(singleRowPaths[:len(singleRowPaths):len(singleRowPaths)], struct {
		name string
		cfg  func(*Config)
		ctx  func(context.Context) context.Context
	}{"Batcher", func(*Config) {}, func(ctx context.Context) context.Context { return ctx }})
	for _, sp := range paths {
		t.Run(sp.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, sp.cfg)
			testkit.Exec(t, b.admin, "CREATE TABLE hook_work (transaction_id text)")
			lease, lose := context.WithCancelCause(context.Background())
			defer lose(nil)
			ctx := sp.ctx(WithLease(context.Background(), lease))
			p := newPayment("tx_hook_lease")
			_, err := b.store.Payments().RecordPaymentFunc(ctx, p, func(ctx context.Context, tx pgx.Tx, p Payment) error {
				if err := sideHook(ctx, tx, p); err != nil {
					return err
				}
				lose(errLeaseLostForTest)
				return nil
			})
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errLeaseLostForTest) || errors.Is(err, ErrCommitUnknown) {
				t.Fatalf("got %v, want ErrUnavailable wrapping the lease's cause, not committed", err)
			}
			if n := testkit.PaymentRows(t, b.admin, p.TransactionID); n != 0 || hookWork(t, b, p.TransactionID) != 0 {
				t.Fatalf("payment %d, hook work %d; want nothing committed", n, hookWork(t, b, p.TransactionID))
			}
			if _, err := b.store.Payments().RecordPaymentFunc(sp.ctx(context.Background()), p, sideHook); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if n := testkit.PaymentRows(t, b.admin, p.TransactionID); n != 1 || hookWork(t, b, p.TransactionID) != 1 {
				t.Fatalf("after the retry: payment %d, hook work %d; want 1 and 1", n, hookWork(t, b, p.TransactionID))
			}
		})
	}
}

// TestALeaseLostInAnEventsHookCommitsNothing: RecordEvent's hook (the
// forward of the change) runs, then the lease ends before COMMIT: the
// event, the change of state and the hook's work roll back (ErrUnavailable
// wrapping the lease's cause); a retry under a live lease records the event
// once.
func TestALeaseLostInAnEventsHookCommitsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testkit.Exec(t, b.admin, "CREATE TABLE hook_work (transaction_id text)")
	ps := b.store.Payments()
	ctx := context.Background()
	if _, err := ps.RecordPayment(ctx, newPayment("tx_event_lease")); err != nil {
		t.Fatal(err)
	}
	refund := PaymentEvent{TransactionID: "tx_event_lease", EventID: "evt_refund_lease", Kind: lifecycle.Refund,
		Amount: 500, Currency: "EUR", RefundID: "re_1"}
	lease, lose := context.WithCancelCause(context.Background())
	defer lose(nil)
	ran := false
	c, err := ps.RecordEvent(WithLease(ctx, lease), refund, func(ctx context.Context, tx pgx.Tx, c Change) error {
		ran = true
		if _, err := tx.Exec(ctx, "INSERT INTO hook_work VALUES ($1)", c.TransactionID); err != nil {
			return err
		}
		lose(errLeaseLostForTest)
		return nil
	})
	if !ran {
		t.Fatal("the refund changed nothing: the hook never ran")
	}
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errLeaseLostForTest) || errors.Is(err, ErrCommitUnknown) || c != nil {
		t.Fatalf("got %+v, %v; want ErrUnavailable wrapping the lease's cause, not committed", c, err)
	}
	events := testkit.Count(t, b.admin, "SELECT count(*) FROM payment_events WHERE event_id = $1", refund.EventID)
	if events != 0 || hookWork(t, b, "tx_event_lease") != 0 {
		t.Fatalf("%d events, hook work %d; want nothing committed", events, hookWork(t, b, "tx_event_lease"))
	}
	st, err := ps.PaymentState(ctx, "", "tx_event_lease")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != lifecycle.StatusSucceeded || st.Version != 1 {
		t.Fatalf("state %s at version %d, want succeeded at version 1 (unchanged)", st.Status, st.Version)
	}
	c, err = ps.RecordEvent(ctx, refund, func(ctx context.Context, tx pgx.Tx, c Change) error {
		_, err := tx.Exec(ctx, "INSERT INTO hook_work VALUES ($1)", c.TransactionID)
		return err
	})
	if err != nil || c == nil || c.Version != 2 {
		t.Fatalf("retry: %+v, %v; want the change to version 2", c, err)
	}
	if n := hookWork(t, b, "tx_event_lease"); n != 1 {
		t.Fatalf("hook work %d after the retry, want 1", n)
	}
}

// TestOnlyAUniqueViolationOfTheArbiterIsAConflict: the arbiter's name
// alone does not make a conflict; the error must be a unique violation
// (23505). A foreign key of another table may bear the same name (a
// constraint's name is unique per table only), and its violation (23503)
// is no duplicate.
func TestOnlyAUniqueViolationOfTheArbiterIsAConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testkit.Exec(t, b.admin, `CREATE TABLE payment_refs (source text, transaction_id text,
		CONSTRAINT `+txIDConstraint+` FOREIGN KEY (source, transaction_id) REFERENCES payments (source, transaction_id))`)
	_, err := b.admin.Exec(context.Background(), "INSERT INTO payment_refs VALUES ('payments', 'tx_none')")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23503" || pgErr.ConstraintName != txIDConstraint {
		t.Fatalf("got %v; want a foreign key violation (23503) naming %s", err, txIDConstraint)
	}
	if isTxIDConflict(err) {
		t.Errorf("isTxIDConflict(%v) = true; want false: a foreign key violation is no duplicate", err)
	}
}
