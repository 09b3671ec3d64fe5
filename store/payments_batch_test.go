package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"

	"github.com/paylock/paylock/internal/faultproxy"
	"github.com/paylock/paylock/internal/testkit"
)

// batchItem is one delivery of a batch a test forms by hand.
type batchItem struct {
	ctx context.Context
	p   Payment
	fn  recordFn
}

type batchOutcome struct {
	rec Payment
	err error
}

// recordAsBatch sends items as one batch (writeBatch, as a writer that
// found them queued does) and settles each delivery as RecordPaymentFunc
// does, concurrently.
func recordAsBatch(s *Payments, items []batchItem) []batchOutcome {
	reqs := make([]*batchReq, len(items))
	for i, it := range items {
		if it.ctx == nil {
			it.ctx = context.Background()
		}
		reqs[i] = &batchReq{ctx: it.ctx, p: it.p.withSource(), fn: it.fn, done: make(chan batchResult, 1)}
	}
	s.writeBatch(reqs)
	out := make([]batchOutcome, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			out[i].rec, out[i].err = s.settle(r.ctx, r.p, r.fn, <-r.done)
		})
	}
	wg.Wait()
	return out
}

// batchRows reads paylock_db_batch_rows: statements observed and rows sent.
func batchRows(t *testing.T, s *Payments) (statements uint64, rows float64) {
	t.Helper()
	var m dto.Metric
	if err := s.batch.rows.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// sideHook writes a row of the hook's own work, which commits with the
// payment or not at all.
func sideHook(ctx context.Context, tx pgx.Tx, p Payment) error {
	_, err := tx.Exec(ctx, "INSERT INTO hook_work VALUES ($1)", p.TransactionID)
	return err
}

func hookWork(t *testing.T, b *bundle, tx string) int {
	t.Helper()
	var n int
	if err := b.admin.QueryRow(context.Background(), "SELECT count(*) FROM hook_work WHERE transaction_id = $1", tx).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestBatchWithARowViolatingAnotherConstraintRecordsTheOthers(t *testing.T) {
	t.Parallel()
	for _, path := range []struct {
		name string
		fn   recordFn
	}{{"Autocommit", nil}, {"Transaction", sideHook}} {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			testkit.Exec(t, b.admin, "CREATE TABLE hook_work (transaction_id text)")
			bad := newPayment("tx_bad")
			bad.Amount = 0 // CHECK (amount > 0)
			items := []batchItem{{p: newPayment("tx_1")}, {p: newPayment("tx_2")}, {p: bad}, {p: newPayment("tx_3")}}
			for i := range items {
				items[i].fn = path.fn
			}
			out := recordAsBatch(b.store.Payments(), items)
			for i, want := range []error{nil, nil, ErrInvalidPayload, nil} {
				if got := out[i].err; (want == nil && got != nil) || (want != nil && !errors.Is(got, want)) {
					t.Errorf("%s: %v, want %v", items[i].p.TransactionID, got, want)
				}
			}
			if out[0].rec.ReceivedAt.IsZero() {
				t.Error("tx_1: ReceivedAt not set")
			}
			for _, tx := range []string{"tx_1", "tx_2", "tx_3"} {
				if n := testkit.PaymentRows(t, b.admin, tx); n != 1 {
					t.Errorf("%s: %d rows, want 1", tx, n)
				}
				if path.fn != nil && hookWork(t, b, tx) != 1 {
					t.Errorf("%s: hook work %d, want 1", tx, hookWork(t, b, tx))
				}
			}
			if n := testkit.PaymentRows(t, b.admin, "tx_bad"); n != 0 {
				t.Errorf("tx_bad: %d rows, want 0", n)
			}
			if n, rows := batchRows(t, b.store.Payments()); rows < 4 {
				t.Errorf("%d statements with %v rows: the four distinct rows were never sent together", n, rows)
			}
		})
	}
}

func TestBatchCarryingOneTransactionTwiceRecordsTheFirstAndConfirmsTheSecond(t *testing.T) {
	t.Parallel()
	for _, path := range []struct {
		name string
		fn   recordFn
	}{{"Autocommit", nil}, {"Transaction", sideHook}} {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			testkit.Exec(t, b.admin, "CREATE TABLE hook_work (transaction_id text)")
			twin := newPayment("tx_1")
			twin.Amount = 5
			items := []batchItem{{p: newPayment("tx_1")}, {p: newPayment("tx_2")}, {p: twin}, {p: newPayment("tx_1")}}
			for i := range items {
				items[i].fn = path.fn
			}
			out := recordAsBatch(b.store.Payments(), items)
			for i, want := range []error{nil, nil, ErrMismatch, ErrDuplicate} {
				if got := out[i].err; (want == nil && got != nil) || (want != nil && !errors.Is(got, want)) {
					t.Errorf("row %d (%s): %v, want %v", i, items[i].p.TransactionID, got, want)
				}
			}
			if n := testkit.PaymentRows(t, b.admin, "tx_1"); n != 1 {
				t.Errorf("tx_1: %d rows, want 1", n)
			}
			if path.fn != nil && hookWork(t, b, "tx_1") != 1 {
				t.Errorf("tx_1: hook work %d, want 1", hookWork(t, b, "tx_1"))
			}
		})
	}
}

func TestBatchWhoseCommitOutcomeIsUnknownAnswersUnavailableForAllItsRowsAndRetriesConverge(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"Autocommit", "Transaction"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			up, err := url.Parse(b.url)
			if err != nil {
				t.Fatal(err)
			}
			px, err := faultproxy.New(up.Host)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { px.Close() })
			s, err := Open(context.Background(), Config{URL: testkit.WithHost(t, b.url, px.Addr()) + "&connect_timeout=2",
				StatementTimeout: time.Second, CommitTimeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			items := make([]batchItem, 4)
			for i := range items {
				items[i].p = newPayment(fmt.Sprintf("tx_%d", i))
			}
			if path == "Autocommit" {
				px.DropReplies(true) // the batch's one statement is its commit
			} else {
				// The last hook runs just before COMMIT: from then on the
				// server gets every request and no reply comes back.
				for i := range items {
					items[i].fn = func(context.Context, pgx.Tx, Payment) error {
						if i == len(items)-1 {
							px.DropReplies(true)
						}
						return nil
					}
				}
			}
			for i, o := range recordAsBatch(s.Payments(), items) {
				if !errors.Is(o.err, ErrCommitUnknown) || !errors.Is(o.err, ErrUnavailable) || isSuccessLike(o.err) {
					t.Errorf("row %d: %v, want ErrCommitUnknown (503)", i, o.err)
				}
			}
			px.Restore()
			for _, it := range items {
				_, err := s.Payments().RecordPaymentFunc(context.Background(), it.p, it.fn)
				if err != nil && !errors.Is(err, ErrDuplicate) {
					t.Errorf("retry of %s: %v, want nil or ErrDuplicate", it.p.TransactionID, err)
				}
				if n := testkit.PaymentRows(t, b.admin, it.p.TransactionID); n != 1 {
					t.Errorf("%s: %d rows after the retry, want 1", it.p.TransactionID, n)
				}
			}
		})
	}
}

var errLeaseLostForTest = errors.New("lease lost (test)")

func TestBatchRowWhoseLeaseIsLostDoesNotCommitItsHookWork(t *testing.T) {
	t.Parallel()
	// lost: the lease of row 1 is lost while its own hook runs; then:
	// row 0's lease is lost while row 2's hook runs, after its own hook
	// wrote.
	for _, tc := range []struct {
		name   string
		victim int
		during int
		// withLease: the lease rides on a context that never ends
		// (WithLease, as the handler passes it) instead of being the ctx.
		withLease bool
	}{{"DuringItsOwnHook", 1, 1, false}, {"AfterItsHookRan", 0, 2, false},
		{"DuringItsOwnHook/WithLease", 1, 1, true}, {"AfterItsHookRan/WithLease", 0, 2, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			testkit.Exec(t, b.admin, "CREATE TABLE hook_work (transaction_id text)")
			ctx, lose := context.WithCancelCause(context.Background())
			defer lose(nil)
			items := make([]batchItem, 3)
			for i := range items {
				items[i].p = newPayment(fmt.Sprintf("tx_%d", i))
				items[i].fn = func(hctx context.Context, tx pgx.Tx, p Payment) error {
					err := sideHook(hctx, tx, p)
					if i == tc.during {
						lose(errLeaseLostForTest)
					}
					return err
				}
			}
			items[tc.victim].ctx = ctx
			if tc.withLease {
				items[tc.victim].ctx = WithLease(context.Background(), ctx)
			}
			out := recordAsBatch(b.store.Payments(), items)
			for i, o := range out {
				tx := items[i].p.TransactionID
				if i == tc.victim {
					if !errors.Is(o.err, ErrUnavailable) || !errors.Is(o.err, errLeaseLostForTest) {
						t.Errorf("%s (lease lost): %v, want ErrUnavailable wrapping the cause", tx, o.err)
					}
					if testkit.PaymentRows(t, b.admin, tx) != 0 || hookWork(t, b, tx) != 0 {
						t.Errorf("%s (lease lost): its payment or its hook's work committed", tx)
					}
					continue
				}
				if o.err != nil {
					t.Errorf("%s: %v, want recorded", tx, o.err)
				}
				if testkit.PaymentRows(t, b.admin, tx) != 1 || hookWork(t, b, tx) != 1 {
					t.Errorf("%s: payment %d, hook work %d; want 1 and 1", tx, testkit.PaymentRows(t, b.admin, tx), hookWork(t, b, tx))
				}
			}
		})
	}
}

func TestConcurrentDeliveriesAreBatchedAndEachForwardedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ps := b.store.Payments()
	const n = 300
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		for range 2 { // every payment twice: a storm with duplicates
			wg.Go(func() {
				_, err := ps.RecordPaymentForwarded(context.Background(), newPayment(fmt.Sprintf("tx_%d", i)), "default")
				if err != nil && !errors.Is(err, ErrDuplicate) {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var payments, jobs int
	ctx := context.Background()
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
	if float64(statements) >= rows {
		t.Errorf("%d statements for %v rows: no batch carried more than one row", statements, rows)
	}
	t.Logf("%d statements carried %v rows", statements, rows)
}

func TestBatchWhoseHookPanicsRecordsTheOthersAndPanicsInItsOwnCaller(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testkit.Exec(t, b.admin, "CREATE TABLE hook_work (transaction_id text)")
	ps := b.store.Payments()
	reqs := make([]*batchReq, 3)
	for i := range reqs {
		fn := sideHook
		if i == 1 {
			fn = func(context.Context, pgx.Tx, Payment) error { panic("hook bug") }
		}
		reqs[i] = &batchReq{ctx: context.Background(), p: newPayment(fmt.Sprintf("tx_%d", i)).withSource(), fn: fn, done: make(chan batchResult, 1)}
	}
	ps.writeBatch(reqs) // the writer survives the panic
	for i, r := range reqs {
		func() {
			defer func() {
				if p := recover(); (p != nil) != (i == 1) {
					t.Errorf("row %d: panic %v, want one only for the row whose hook panics", i, p)
				}
			}()
			if _, err := ps.settle(r.ctx, r.p, r.fn, <-r.done); err != nil {
				t.Errorf("row %d: %v", i, err)
			}
		}()
	}
	for i, want := range []int{1, 0, 1} {
		tx := fmt.Sprintf("tx_%d", i)
		if n := testkit.PaymentRows(t, b.admin, tx); n != want || hookWork(t, b, tx) != want {
			t.Errorf("%s: payment %d, hook work %d; want %d and %d", tx, n, hookWork(t, b, tx), want, want)
		}
	}
}

// TestALoneQueuedRowWithAHookCountsAsAStatement: the writer hands a lone
// queued row with a hook back to its caller, which records it in a
// statement of its own; paylock_db_batch_rows counts that statement, as it
// counts a lone row the writer sends.
func TestALoneQueuedRowWithAHookCountsAsAStatement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testkit.Exec(t, b.admin, "CREATE TABLE hook_work (transaction_id text)")
	ps := b.store.Payments()
	r := &batchReq{ctx: context.Background(), p: newPayment("tx_lone").withSource(), fn: sideHook, done: make(chan batchResult, 1)}
	ps.writeBatch([]*batchReq{r})
	if _, err := ps.settle(r.ctx, r.p, r.fn, <-r.done); err != nil {
		t.Fatal(err)
	}
	if statements, rows := batchRows(t, ps); statements != 1 || rows != 1 {
		t.Errorf("%d statements carrying %v rows, want 1 and 1", statements, rows)
	}
	if n := testkit.PaymentRows(t, b.admin, "tx_lone"); n != 1 || hookWork(t, b, "tx_lone") != 1 {
		t.Errorf("payment %d, hook work %d; want 1 and 1", n, hookWork(t, b, "tx_lone"))
	}
}
