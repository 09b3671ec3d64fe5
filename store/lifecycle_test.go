package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lifecycle"
)

// delivery is one of a lifecycle's events as the store records it: the
// success through RecordPaymentForwarded's path, the rest through
// RecordEvent.
type delivery struct {
	success *Payment
	event   *PaymentEvent
}

var lifeDay = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// sixDeliveries is issue #23's lifecycle of transaction tx: a failure, a
// success, two partial refunds, a dispute opened and lost.
func sixDeliveries(tx string) []delivery {
	ev := func(id string, k lifecycle.Kind, amount int64, refund string, h int) delivery {
		return delivery{event: &PaymentEvent{Source: "stripe", TransactionID: tx, EventID: "evt_" + id + "_" + tx, Kind: k,
			Amount: amount, Currency: "EUR", RefundID: refund, At: lifeDay.Add(time.Duration(h) * time.Hour),
			Payload: []byte(`{"id":"` + id + `"}`)}}
	}
	ok := Payment{Source: "stripe", TransactionID: tx, Amount: 1000, Currency: "EUR", EventID: "evt_ok_" + tx,
		Payload: []byte(`{"id":"ok"}`)}
	return []delivery{
		ev("fail", lifecycle.Failed, 1000, "", 0),
		{success: &ok},
		ev("r1", lifecycle.Refund, 300, "re_1", 2),
		ev("r2", lifecycle.Refund, 200, "re_2", 3),
		ev("dp", lifecycle.DisputeOpened, 1000, "", 24),
		ev("dl", lifecycle.DisputeLost, 1000, "", 48),
	}
}

// deliver records d the way the handler does, forwarding to "dest".
func deliver(ctx context.Context, p *Payments, d delivery) error {
	if d.success != nil {
		_, err := p.RecordPaymentForwarded(ctx, *d.success, "dest")
		if errors.Is(err, ErrDuplicate) {
			return nil
		}
		return err
	}
	_, err := p.RecordEvent(ctx, *d.event, p.outbox.ForwardChangeHook("dest"))
	if errors.Is(err, ErrDuplicate) {
		return nil
	}
	return err
}

// forwardsOf are the forward jobs of transaction tx, by insertion.
func forwardsOf(t *testing.T, db *pgx.Conn, tx string) []ForwardArgs {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT args FROM river_job WHERE kind = 'forward' AND args->>'transaction_id' = $1 ORDER BY id`, tx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ForwardArgs, error) {
		var raw []byte
		var a ForwardArgs
		if err := r.Scan(&raw); err != nil {
			return a, err
		}
		return a, json.Unmarshal(raw, &a)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var wantLifecycle = lifecycle.State{Status: lifecycle.PartiallyRefunded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000,
	AmountRefunded: 500, Dispute: lifecycle.Lost}

// checkLifecycle checks tx's final state and its forwards: one per change,
// versions 1..n, the newest carrying the final state, one payment.recorded.
func checkLifecycle(t *testing.T, b *bundle, tx, name string) {
	t.Helper()
	st, err := b.store.Payments().PaymentState(context.Background(), "stripe", tx)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if st.State != wantLifecycle || !st.Recorded || len(st.Events) != 5 {
		t.Fatalf("%s: state %+v recorded %v with %d events, want %+v, recorded, 5 events", name, st.State, st.Recorded, len(st.Events), wantLifecycle)
	}
	jobs := forwardsOf(t, b.admin, tx)
	if len(jobs) != st.Version {
		t.Fatalf("%s: %d forwards, version %d", name, len(jobs), st.Version)
	}
	recorded, ids := 0, map[string]bool{}
	versions := map[int]bool{}
	var newest *ForwardedState
	for _, j := range jobs {
		if ids[j.ID] {
			t.Fatalf("%s: forward id %s twice", name, j.ID)
		}
		ids[j.ID] = true
		v := 1
		if j.State != nil {
			v = j.State.Version
		}
		if versions[v] || v < 1 || v > st.Version {
			t.Fatalf("%s: version %d repeated or out of 1..%d", name, v, st.Version)
		}
		versions[v] = true
		if v == st.Version {
			newest = j.State
		}
		if j.Type == ForwardPaymentRecorded {
			recorded++
		}
	}
	if recorded != 1 {
		t.Fatalf("%s: %d payment.recorded forwards, want 1", name, recorded)
	}
	want := ForwardedState{Status: "partially_refunded", Amount: 1000, Currency: "EUR", AmountRefunded: 500, Dispute: "lost", Version: st.Version}
	if newest == nil || newest.EventID == "" || newest.AmountAuthorized == nil || newest.AmountCaptured == nil {
		t.Fatalf("%s: the newest forward carries no state: %+v", name, newest)
	}
	if newest.Authorized() != 1000 || newest.Captured() != 1000 {
		t.Fatalf("%s: the newest forward carries %d authorised, %d captured; want 1000 and 1000", name, newest.Authorized(), newest.Captured())
	}
	want.EventID, want.AmountAuthorized, want.AmountCaptured = newest.EventID, newest.AmountAuthorized, newest.AmountCaptured
	if *newest != want {
		t.Fatalf("%s: the newest forward carries %+v, want %+v", name, *newest, want)
	}
}

// TestLifecycleInEveryOrderThroughPostgres records issue #23's six-event
// lifecycle in many orders (every one of the 720 with
// PAYLOCK_ALL_ORDERS=1), each event delivered 1-3 times, through the
// store's real transactions: the same final state, one forward per change.
func TestLifecycleInEveryOrderThroughPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
	orders := permutationsOf(6)
	r := rand.New(rand.NewPCG(10, 23))
	if os.Getenv("PAYLOCK_ALL_ORDERS") == "" {
		r.Shuffle(len(orders), func(i, j int) { orders[i], orders[j] = orders[j], orders[i] })
		orders = orders[:60]
	}
	ctx := context.Background()
	for n, order := range orders {
		tx := fmt.Sprintf("pi_order_%d", n)
		all := sixDeliveries(tx)
		var seq []delivery
		for _, i := range order {
			for range 1 + r.IntN(3) {
				seq = append(seq, all[i])
			}
		}
		for _, d := range seq {
			if err := deliver(ctx, b.store.Payments(), d); err != nil {
				t.Fatalf("order %v: %v", order, err)
			}
		}
		checkLifecycle(t, b, tx, fmt.Sprint("order ", order))
	}
}

// TestConcurrentDuplicatesOfEveryEventRecordEachOnce delivers each event of
// the lifecycle three times at once, every delivery on its own goroutine:
// the transactions race on the event's constraint and the payment's row,
// and the outcome is that of one delivery each.
func TestConcurrentDuplicatesOfEveryEventRecordEachOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for round := range 8 {
		tx := fmt.Sprintf("pi_race_%d", round)
		var wg sync.WaitGroup
		errs := make(chan error, 18)
		for _, d := range sixDeliveries(tx) {
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						err := deliver(ctx, b.store.Payments(), d)
						if errors.Is(err, ErrUnavailable) {
							continue // a deadlock or serialization failure: the PSP retries
						}
						errs <- err
						return
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		checkLifecycle(t, b, tx, tx)
	}
}

func TestARefundBeforeItsPaymentWaitsAsAnOrphan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.store.Payments()
	refund := PaymentEvent{TransactionID: "tx_orphan", EventID: "re_evt", Kind: lifecycle.Refund, RefundID: "re_1", Amount: 500}
	c, err := p.RecordEvent(ctx, refund, nil)
	if err != nil || c != nil {
		t.Fatalf("the refund: change %+v, %v; want none forwarded", c, err)
	}
	if _, err := p.Confirm(ctx, newPayment("tx_orphan")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Confirm of a payment known by a refund alone: %v, want ErrNotFound", err)
	}
	if _, err := p.Payment(ctx, "", "tx_orphan"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Payment of a payment known by a refund alone: %v, want ErrNotFound", err)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM payment_attention WHERE transaction_id = 'tx_orphan' AND reason = 'orphan'`); n != 1 {
		t.Fatalf("%d orphans, want 1", n)
	}
	rec, err := p.RecordPayment(ctx, newPayment("tx_orphan"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Lifecycle == nil || rec.Lifecycle.Version != 1 || rec.Lifecycle.State.Status != lifecycle.PartiallyRefunded ||
		rec.Lifecycle.State.AmountRefunded != 500 {
		t.Fatalf("the payment's change: %+v, want version 1, partially_refunded, 500 refunded", rec.Lifecycle)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM payment_attention`); n != 0 {
		t.Fatalf("%d orphans after the payment, want 0", n)
	}
	if _, err := p.RecordPayment(ctx, newPayment("tx_orphan")); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the payment again: %v, want ErrDuplicate", err)
	}
	if _, err := p.RecordEvent(ctx, refund, nil); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the refund again: %v, want ErrDuplicate", err)
	}
}

func TestAPaymentRecordedFirstIsSucceededAtVersionOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rec, err := b.store.Payments().RecordPayment(ctx, newPayment("tx_plain"))
	if err != nil || rec.Lifecycle != nil {
		t.Fatalf("RecordPayment: %+v, %v", rec.Lifecycle, err)
	}
	st, err := b.store.Payments().PaymentState(ctx, "", "tx_plain")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != lifecycle.StatusSucceeded || st.Version != 1 || !st.Recorded || st.Amount != 1999 {
		t.Fatalf("state %+v, want succeeded, version 1, 1999", st)
	}
	failed := PaymentEvent{TransactionID: "tx_plain", EventID: "evt_fail", Kind: lifecycle.Failed, Amount: 1999}
	if c, err := b.store.Payments().RecordEvent(ctx, failed, nil); err != nil || c != nil {
		t.Fatalf("a failure after the success: %+v, %v; want nothing changed", c, err)
	}
	if _, err := b.store.Payments().PaymentState(ctx, "", "tx_unknown"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown payment: %v, want ErrNotFound", err)
	}
}

// permutationsOf lists every order of 0..n-1.
func permutationsOf(n int) [][]int {
	var out [][]int
	cur := make([]int, n)
	for i := range cur {
		cur[i] = i
	}
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			out = append(out, append([]int(nil), cur...))
			return
		}
		for i := k; i < n; i++ {
			cur[k], cur[i] = cur[i], cur[k]
			rec(k + 1)
			cur[k], cur[i] = cur[i], cur[k]
		}
	}
	rec(0)
	return out
}

func TestOrphansAndOverRefundsAreReviewItems(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.OrphanAfter = time.Millisecond })
	ctx := context.Background()
	p := b.store.Payments()
	if _, err := p.RecordEvent(ctx, PaymentEvent{TransactionID: "tx_lost", EventID: "evt_lost_refund", Kind: lifecycle.Refund,
		RefundID: "re_lost", Amount: 100}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.RecordPayment(ctx, newPayment("tx_over")); err != nil {
		t.Fatal(err)
	}
	for i, amount := range []int64{1500, 1000} {
		if _, err := p.RecordEvent(ctx, PaymentEvent{TransactionID: "tx_over", EventID: fmt.Sprint("evt_over_", i), Kind: lifecycle.Refund,
			RefundID: fmt.Sprint("re_", i), Amount: amount}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var items []ReviewItem
	testkit.WaitFor(t, 5*time.Second, "two payment items", func() bool {
		var err error
		items, err = b.store.Review().ReviewItems(ctx, ReviewFilter{Kind: ReviewLifecycle})
		return err == nil && len(items) == 2
	})
	reasons := map[string]string{}
	for _, it := range items {
		reasons[it.Details["transaction_id"].(string)] = it.Details["reason"].(string)
	}
	if reasons["tx_lost"] != "orphan" || reasons["tx_over"] != "over_refunded" {
		t.Fatalf("items %v, want tx_lost orphaned and tx_over over-refunded", reasons)
	}
	st, err := p.PaymentState(ctx, "", "tx_over")
	if err != nil || st.AmountRefunded != 1999 || !st.OverRefunded || st.Status != lifecycle.Refunded {
		t.Fatalf("tx_over: %+v, %v; want refunded, capped at 1999, flagged", st.State, err)
	}
	it, err := b.store.Review().ResolveReview(ctx, items[0].ID, Resolve{Action: ActionAcknowledge, Note: "seen", Who: "alice"})
	if err != nil || it.Resolution == nil {
		t.Fatalf("acknowledge: %+v, %v", it, err)
	}
	if open, _ := b.store.Review().ReviewItems(ctx, ReviewFilter{Kind: ReviewLifecycle}); len(open) != 1 {
		t.Fatalf("%d open payment items after acknowledging one, want 1", len(open))
	}
	stats, err := b.store.Review().ReviewQueueStats(ctx)
	if err != nil || stats[ReviewLifecycle].Items != 1 {
		t.Fatalf("stats %+v, %v; want one open payment item", stats, err)
	}
}

// TestLifecycleMigrationMakesExistingPaymentsSucceededAtVersionOne migrates
// a schema holding payments of the previous version (00009) to 00010
// without rewriting the table: every existing row is succeeded at version
// 1, nothing refunded, and a refund of one then folds onto it; an insert
// of the previous version's shape still records after the migration.
func TestLifecycleMigrationMakesExistingPaymentsSucceededAtVersionOne(t *testing.T) {
	t.Parallel()
	u := testkit.Schema(t)
	ctx := context.Background()
	s, err := Open(ctx, Config{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.migrate(ctx, 9); err != nil {
		t.Fatal(err)
	}
	admin := testkit.Connect(t, u)
	const oldInsert = `INSERT INTO payments (source, transaction_id, amount, currency, payload, event_id) VALUES ('stripe', $1, 1000, 'EUR', '{}', $1)`
	for _, tx := range []string{"pi_old_1", "pi_old_2"} {
		if _, err := admin.Exec(ctx, oldInsert, tx); err != nil {
			t.Fatal(err)
		}
	}
	relfile := queryString(t, admin, `SELECT pg_relation_filenode('payments')::text`)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if after := queryString(t, admin, `SELECT pg_relation_filenode('payments')::text`); after != relfile {
		t.Errorf("payments was rewritten by the migration (filenode %s, then %s)", relfile, after)
	}
	for _, tx := range []string{"pi_old_1", "pi_old_2"} {
		st, err := s.Payments().PaymentState(ctx, "stripe", tx)
		if err != nil || st.Status != lifecycle.StatusSucceeded || st.Version != 1 || st.AmountRefunded != 0 || !st.Recorded {
			t.Fatalf("%s after the migration: %+v, %v; want succeeded at version 1", tx, st, err)
		}
	}
	c, err := s.Payments().RecordEvent(ctx, PaymentEvent{Source: "stripe", TransactionID: "pi_old_1", EventID: "evt_old_refund",
		Kind: lifecycle.Refund, Amount: 1000, Cumulative: true}, nil)
	if err != nil || c == nil || c.Version != 2 || c.State.Status != lifecycle.Refunded {
		t.Fatalf("a refund of an existing payment: %+v, %v; want refunded at version 2", c, err)
	}
	if _, err := admin.Exec(ctx, oldInsert, "pi_old_3"); err != nil {
		t.Fatalf("the previous version's insert after the migration: %v", err)
	}
}

// TestReplayOfAPaymentRecordedOverItsEventsCarriesItsState sends
// payment.recorded again for a payment whose success arrived after a
// refund, once River no longer holds its job: the fresh job carries the
// payment's state and version, not "succeeded at version 1"; a payment
// known only by its events is not replayed at all.
func TestReplayOfAPaymentRecordedOverItsEventsCarriesItsState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.store.Payments()
	for _, tx := range []string{"tx_claimed", "tx_waiting"} {
		if _, err := p.RecordEvent(ctx, PaymentEvent{TransactionID: tx, EventID: "evt_refund_" + tx, Kind: lifecycle.Refund,
			RefundID: "re_" + tx, Amount: 500}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.RecordPaymentForwarded(ctx, newPayment("tx_claimed"), "dest"); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, b.admin, `DELETE FROM river_job`)
	res, err := b.store.Outbox().ReplayForwards(ctx, ReplayFilter{Destination: "dest", Since: time.Now().Add(-time.Hour)})
	if err != nil || res.Payments != 1 || res.Inserted != 1 {
		t.Fatalf("replay: %+v, %v; want the one recorded payment inserted", res, err)
	}
	jobs := forwardsOf(t, b.admin, "tx_claimed")
	if len(jobs) != 1 || jobs[0].State == nil || jobs[0].State.Version != 1 || jobs[0].State.Status != "partially_refunded" ||
		jobs[0].State.AmountRefunded != 500 {
		t.Fatalf("replayed jobs %+v, want one carrying partially_refunded at version 1", jobs)
	}
}

func TestAnEventIDRecordedForAnotherPaymentIsAMismatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.store.Payments()
	refund := PaymentEvent{TransactionID: "tx_a", EventID: "evt_reused", Kind: lifecycle.Refund, RefundID: "re_a", Amount: 100}
	if _, err := p.RecordEvent(ctx, refund, nil); err != nil {
		t.Fatal(err)
	}
	other := refund
	other.TransactionID = "tx_b"
	if _, err := p.RecordEvent(ctx, other, nil); !errors.Is(err, ErrMismatch) {
		t.Fatalf("the same event id for another payment: %v, want ErrMismatch", err)
	}
	if err := p.EventRecorded(ctx, other); !errors.Is(err, ErrMismatch) {
		t.Fatalf("EventRecorded of it: %v, want ErrMismatch", err)
	}
	if err := p.EventRecorded(ctx, refund); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("EventRecorded of the event as recorded: %v, want ErrDuplicate", err)
	}
	if _, err := p.PaymentState(ctx, "", "tx_b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tx_b: %v, want nothing recorded", err)
	}
}
