package store

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lifecycle"
)

// routedSetup is a store whose "stripe" source forwards every message to
// ledger and analytics (Outbox.Route), counting the router's calls.
func routedSetup(t *testing.T) (*bundle, *atomic.Int64) {
	t.Helper()
	b := setup(t)
	calls := new(atomic.Int64)
	b.store.Outbox().Route("stripe", func(context.Context, ForwardArgs, *Payment) ([]ForwardTarget, error) {
		calls.Add(1)
		return []ForwardTarget{{Destination: "ledger"}, {Destination: "analytics"}}, nil
	})
	return b, calls
}

func stripePayment(id string) Payment {
	p := newPayment(id)
	p.Source = "stripe"
	return p
}

// jobsOf returns the forward jobs of a source's transaction id.
func (b *bundle) jobsOf(t *testing.T, source, txID string) []ForwardJob {
	t.Helper()
	var out []ForwardJob
	for _, j := range b.forwardJobs(t) {
		if j.Args.Source == source && j.Args.TransactionID == txID {
			out = append(out, j)
		}
	}
	return out
}

// TestARoutedSourcesRecordIsOneCallThatEnqueuesItsForwards: with the
// source's route set on the store, RecordPayment and RecordEvent insert
// the routed forward jobs themselves, in the recording transaction and
// before the caller's hook; no hook carries them.
func TestARoutedSourcesRecordIsOneCallThatEnqueuesItsForwards(t *testing.T) {
	t.Parallel()
	b, calls := routedSetup(t)
	ctx := context.Background()
	ps := b.store.Payments()

	t.Run("PaymentRecordedEnqueuesOneJobPerTarget", func(t *testing.T) {
		rec, err := ps.RecordPayment(ctx, stripePayment("route-1"))
		if err != nil {
			t.Fatal(err)
		}
		jobs := b.jobsOf(t, "stripe", "route-1")
		dests := map[string]bool{}
		for _, j := range jobs {
			dests[j.Args.Destination] = true
			carried, ok := j.Args.CarriedPayment()
			if j.Args.ID != PaymentForwardID("stripe", "route-1") || j.Args.Type != ForwardPaymentRecorded ||
				!ok || carried.Amount != rec.Amount || !carried.ReceivedAt.Equal(rec.ReceivedAt) {
				t.Errorf("job %+v: want the payment.recorded of stripe/route-1 carrying the payment as recorded", j.Args)
			}
		}
		if len(jobs) != 2 || !dests["ledger"] || !dests["analytics"] {
			t.Fatalf("jobs %+v: want one to ledger and one to analytics", jobs)
		}
	})

	t.Run("ADuplicateInsertsNone", func(t *testing.T) {
		before := calls.Load()
		if _, err := ps.RecordPayment(ctx, stripePayment("route-1")); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("redelivery: %v, want ErrDuplicate", err)
		}
		if n := len(b.jobsOf(t, "stripe", "route-1")); n != 2 || calls.Load() != before {
			t.Fatalf("after a duplicate: %d jobs, %d routings; want 2 and none", n, calls.Load()-before)
		}
	})

	t.Run("TheJobsAreInBeforeTheCallersHookAndRollBackWithIt", func(t *testing.T) {
		var seen int
		errHook := errors.New("the embedder's ledger is down")
		_, err := ps.RecordPaymentFunc(ctx, stripePayment("route-hook"), func(ctx context.Context, tx pgx.Tx, p Payment) error {
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'forward' AND args->>'transaction_id' = $1`,
				p.TransactionID).Scan(&seen); err != nil {
				return err
			}
			return errHook
		})
		if !errors.Is(err, errHook) || seen != 2 {
			t.Fatalf("record: %v, the hook saw %d jobs; want its error, and 2 jobs in its transaction", err, seen)
		}
		if _, err := ps.Payment(ctx, "stripe", "route-hook"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the payment whose hook failed: %v, want ErrNotFound", err)
		}
		if n := len(b.jobsOf(t, "stripe", "route-hook")); n != 0 {
			t.Errorf("%d jobs of the rolled-back payment, want none", n)
		}
	})

	t.Run("AStateChangeEnqueuesItsMessagesJobs", func(t *testing.T) {
		c, err := ps.RecordEvent(ctx, PaymentEvent{Source: "stripe", TransactionID: "route-1", EventID: "evt_re_1",
			Kind: lifecycle.Refund, RefundID: "re_1", Amount: 500, Currency: "EUR"}, nil)
		if err != nil || c == nil {
			t.Fatalf("refund: %+v, %v; want a change", c, err)
		}
		var changes []ForwardJob
		for _, j := range b.jobsOf(t, "stripe", "route-1") {
			if j.Args.ID == EventForwardID("stripe", "evt_re_1") {
				changes = append(changes, j)
				if j.Args.Type != c.Message || j.Args.State == nil || j.Args.State.Version != c.Version {
					t.Errorf("job %+v: want %s carrying version %d", j.Args, c.Message, c.Version)
				}
			}
		}
		if len(changes) != 2 {
			t.Fatalf("%d jobs of the refund's change, want 2 (ledger and analytics)", len(changes))
		}
		if _, err := ps.RecordEvent(ctx, PaymentEvent{Source: "stripe", TransactionID: "route-1", EventID: "evt_re_1",
			Kind: lifecycle.Refund, RefundID: "re_1", Amount: 500, Currency: "EUR"}, nil); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("the refund again: %v, want ErrDuplicate", err)
		}
		if n := len(b.jobsOf(t, "stripe", "route-1")); n != 4 {
			t.Errorf("%d jobs after the refund's redelivery, want 4", n)
		}
	})

	t.Run("ASourceWithoutARouteInsertsNone", func(t *testing.T) {
		if b.store.outbox.recordHook("adyen", nil) != nil || b.store.outbox.changeHook("adyen", nil) != nil {
			t.Fatal("a source without a route has a hook: its payments would not take the one-statement path")
		}
		if b.store.outbox.recordHook("stripe", nil) == nil {
			t.Fatal("a routed source has no hook")
		}
		p := stripePayment("route-none")
		p.Source = "adyen"
		if _, err := ps.RecordPayment(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := ps.RecordEvent(ctx, PaymentEvent{Source: "adyen", TransactionID: "route-none", EventID: "evt_re_n",
			Kind: lifecycle.Refund, RefundID: "re_n", Amount: 500, Currency: "EUR"}, nil); err != nil {
			t.Fatal(err)
		}
		if n := len(b.jobsOf(t, "adyen", "route-none")); n != 0 {
			t.Fatalf("%d jobs of a source without a route, want none", n)
		}
	})

	t.Run("ANilRouteStopsForwarding", func(t *testing.T) {
		b.store.Outbox().Route("stripe", nil)
		if _, err := ps.RecordPayment(ctx, stripePayment("route-off")); err != nil {
			t.Fatal(err)
		}
		if n := len(b.jobsOf(t, "stripe", "route-off")); n != 0 {
			t.Fatalf("%d jobs after Route(stripe, nil), want none", n)
		}
	})
}

// A forward job that cannot be inserted rolls its payment back: nothing
// is recorded, and the error says to retry (ErrUnavailable).
func TestAFailingForwardInsertRollsTheRecordBack(t *testing.T) {
	t.Parallel()
	b, _ := routedSetup(t)
	ctx := context.Background()
	ps := b.store.Payments()
	if _, err := ps.RecordPayment(ctx, stripePayment("route-ev")); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, b.admin, `CREATE FUNCTION refuse_job() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'no jobs today'; END$$`)
	testkit.Exec(t, b.admin, `CREATE TRIGGER refuse_job BEFORE INSERT ON river_job FOR EACH ROW EXECUTE FUNCTION refuse_job()`)

	if _, err := ps.RecordPayment(ctx, stripePayment("route-refused")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("record with its job refused: %v, want ErrUnavailable", err)
	}
	if _, err := ps.Payment(ctx, "stripe", "route-refused"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the payment whose job was refused: %v, want ErrNotFound (rolled back)", err)
	}
	ev := PaymentEvent{Source: "stripe", TransactionID: "route-ev", EventID: "evt_re_x", Kind: lifecycle.Refund,
		RefundID: "re_x", Amount: 500, Currency: "EUR"}
	if _, err := ps.RecordEvent(ctx, ev, nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("refund with its job refused: %v, want ErrUnavailable", err)
	}
	if err := ps.EventRecorded(ctx, ev); !errors.Is(err, ErrNotFound) {
		t.Errorf("the refund whose job was refused: %v, want ErrNotFound (rolled back)", err)
	}
	// A source without a route records without a job, on one statement.
	p := stripePayment("route-unrouted")
	p.Source = "adyen"
	if _, err := ps.RecordPayment(ctx, p); err != nil {
		t.Fatalf("a source without a route, with jobs refused: %v, want recorded", err)
	}
}

// A batch of a routed source's payments inserts their jobs with the
// batch (one InsertManyTx before COMMIT), and an unrouted row beside
// them none.
func TestABatchOfARoutedSourceInsertsEachPaymentsJobs(t *testing.T) {
	t.Parallel()
	b, _ := routedSetup(t)
	ps := b.store.Payments()
	if ps.batch == nil {
		t.Fatal("the store does not batch: Config.BatchMax must default above 1 for this test")
	}
	var items []batchItem
	for _, id := range []string{"batch-r1", "batch-r2", "batch-r3"} {
		items = append(items, batchItem{p: stripePayment(id), fn: ps.outbox.recordHook("stripe", nil)})
	}
	unrouted := stripePayment("batch-u")
	unrouted.Source = "adyen"
	items = append(items, batchItem{p: unrouted, fn: ps.outbox.recordHook("adyen", nil)})
	for _, o := range recordAsBatch(ps, items) {
		if o.err != nil {
			t.Fatal(o.err)
		}
	}
	if statements, rows := batchRows(t, ps); statements != 1 || rows != 4 {
		t.Fatalf("%d statements of %v rows, want one of 4", statements, rows)
	}
	for _, id := range []string{"batch-r1", "batch-r2", "batch-r3"} {
		if n := len(b.jobsOf(t, "stripe", id)); n != 2 {
			t.Errorf("%s: %d jobs, want 2", id, n)
		}
	}
	if n := len(b.jobsOf(t, "adyen", "batch-u")); n != 0 {
		t.Errorf("the unrouted row: %d jobs, want none", n)
	}
}
