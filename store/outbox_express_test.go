package store

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// expressSetup is routedSetup with the messages starting in the express
// lane (Config.ExpressForwards) and 7 attempts each.
func expressSetup(t *testing.T) *bundle {
	t.Helper()
	b := setup(t, func(c *Config) { c.ExpressForwards, c.ForwardMaxAttempts = true, 7 })
	b.store.Outbox().Route("stripe", func(context.Context, ForwardArgs, *Payment) ([]ForwardTarget, error) {
		return []ForwardTarget{{Destination: "ledger", Fingerprint: "fp-ledger"}, {Destination: "analytics"}}, nil
	})
	return b
}

func (b *bundle) laneRows(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.admin.QueryRow(context.Background(), `SELECT count(*) FROM forward_express`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func claim(t *testing.T, b *bundle, limit int, lease time.Duration, done ...int64) []ExpressMessage {
	t.Helper()
	ms, err := b.store.Outbox().ClaimExpress(context.Background(), limit, lease, done)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestTheExpressLaneTakesARecordsMessagesAndDeletesThemOnceDelivered: with
// ExpressForwards, a routed record inserts one row per destination in
// its transaction and no River job; a claim leases them (a second claim
// gets none), and the next claim's done deletes them.
func TestTheExpressLaneTakesARecordsMessagesAndDeletesThemOnceDelivered(t *testing.T) {
	t.Parallel()
	b := expressSetup(t)
	ctx := context.Background()
	rec, err := b.store.Payments().RecordPayment(ctx, stripePayment("xl-1"))
	if err != nil {
		t.Fatal(err)
	}
	if jobs := b.forwardJobs(t); len(jobs) != 0 {
		t.Fatalf("River jobs %+v: want none, the messages start in the lane", jobs)
	}
	stats, err := b.store.Outbox().DestinationStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 2 || stats[0].Destination != "analytics" || stats[0].Backlog != 1 || stats[1].Destination != "ledger" || stats[1].Backlog != 1 {
		t.Fatalf("destination stats %+v: want analytics and ledger with the lane's message each in their backlog", stats)
	}
	ms := claim(t, b, 10, time.Minute)
	if len(ms) != 2 {
		t.Fatalf("claimed %d messages, want 2 (ledger, analytics)", len(ms))
	}
	dests := map[string]string{}
	for _, m := range ms {
		dests[m.Args.Destination] = m.Args.Fingerprint
		carried, ok := m.Args.CarriedPayment()
		if m.Args.ID != PaymentForwardID("stripe", "xl-1") || !ok || carried.Amount != rec.Amount ||
			!carried.ReceivedAt.Equal(rec.ReceivedAt) || m.MaxAttempts != 7 || m.Claims != 1 || m.Held {
			t.Errorf("message %+v: want stripe/xl-1's payment.recorded carrying the payment, 7 attempts, claimed once", m)
		}
	}
	if dests["ledger"] != "fp-ledger" || dests["analytics"] != "" {
		t.Errorf("destinations and fingerprints %v, want ledger's fp-ledger and analytics' none", dests)
	}
	if again := claim(t, b, 10, time.Minute); len(again) != 0 {
		t.Fatalf("a second claim took %d leased messages, want none", len(again))
	}
	if _, err := b.store.Payments().RecordPayment(ctx, stripePayment("xl-1")); err == nil {
		t.Fatal("a redelivery recorded again")
	}
	if n := b.laneRows(t); n != 2 {
		t.Fatalf("%d rows after a duplicate, want 2: a duplicate inserts none", n)
	}
	if again := claim(t, b, 0, time.Minute, ms[0].ID, ms[1].ID); len(again) != 0 {
		t.Fatalf("a delete-only claim took %d", len(again))
	}
	if n := b.laneRows(t); n != 0 {
		t.Fatalf("%d rows once delivered, want none", n)
	}
	var sent, listed int
	if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM forward_sent WHERE message_id = $1 AND transaction_id = 'xl-1'`,
		PaymentForwardID("stripe", "xl-1")).Scan(&sent); err != nil {
		t.Fatal(err)
	}
	if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM forward_messages WHERE transaction_id = 'xl-1' AND state = 'completed' AND lane = 'express'`).Scan(&listed); err != nil {
		t.Fatal(err)
	}
	if sent != 2 || listed != 2 {
		t.Fatalf("forward_sent holds %d and forward_messages lists %d of xl-1's deliveries, want 2 and 2", sent, listed)
	}
	fwds, err := b.store.Outbox().PaymentForwards(ctx, "stripe", "xl-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(fwds) != 2 {
		t.Fatalf("PaymentForwards: %+v, want the 2 deliveries of the lane", fwds)
	}
	for _, f := range fwds {
		if f.ID != 0 || f.State != "completed" || f.FinalizedAt.IsZero() || f.Attempt != 1 || f.Args.Type != ForwardPaymentRecorded {
			t.Errorf("PaymentForwards: %+v, want a delivery of the lane (no River id, completed, one attempt)", f)
		}
	}
	// A delete of rows already gone notes nothing more.
	if err := b.store.Outbox().DoneExpress(ctx, []int64{ms[0].ID}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.store.Outbox().PurgeExpressSent(ctx); err != nil || n != 0 {
		t.Fatalf("purge: %d, %v; want nothing old enough", n, err)
	}
	if _, err := b.admin.Exec(ctx, `UPDATE forward_sent SET sent_at = now() - interval '25 hours'`); err != nil {
		t.Fatal(err)
	}
	if n, err := b.store.Outbox().PurgeExpressSent(ctx); err != nil || n != 2 {
		t.Fatalf("purge: %d, %v; want the 2 rows of a day ago", n, err)
	}
}

// TestTheExpressLaneClaimsAPaymentsMessagesOneAtATimeInOrder: a payment's
// second message to a destination is not claimed while its first is in
// the lane, leased or not; once the first is deleted, it is. A lease that
// runs out lets the message be claimed again, and says so (Claims).
func TestTheExpressLaneClaimsAPaymentsMessagesOneAtATimeInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ExpressForwards = true })
	ctx := context.Background()
	ob := b.store.Outbox()
	if _, err := b.store.Payments().RecordPaymentForwarded(ctx, stripePayment("xl-2"), "default"); err != nil {
		t.Fatal(err)
	}
	hook := ob.ForwardChangeHook("default")
	err := pgx.BeginFunc(ctx, b.store.Pool(), func(tx pgx.Tx) error {
		return hook(ctx, tx, Change{Source: "stripe", TransactionID: "xl-2", EventID: "evt_refund", Message: "payment.refunded", Version: 2})
	})
	if err != nil {
		t.Fatal(err)
	}
	first := claim(t, b, 10, 50*time.Millisecond)
	if len(first) != 1 || first[0].Args.Type != ForwardPaymentRecorded {
		t.Fatalf("claimed %+v, want the payment.recorded alone", first)
	}
	time.Sleep(100 * time.Millisecond) // the lease runs out
	again := claim(t, b, 10, time.Minute)
	if len(again) != 1 || again[0].ID != first[0].ID || again[0].Claims != 2 {
		t.Fatalf("after the lease claimed %+v, want the payment.recorded again, its second claim", again)
	}
	second := claim(t, b, 10, time.Minute, again[0].ID)
	if len(second) != 0 {
		t.Fatalf("the claim that deletes the first took %+v: it sees the first still there, want none", second)
	}
	second = claim(t, b, 10, time.Minute)
	if len(second) != 1 || second[0].Args.Type != "payment.refunded" || second[0].Args.State == nil || second[0].Args.State.Version != 2 {
		t.Fatalf("claimed %+v, want the payment.refunded (version 2)", second)
	}
}

// TestAnExpressMessageHandedOverIsARiverJob: HandOverExpress deletes the
// row and inserts its job, due when asked, with one attempt fewer after a
// failed attempt; a row already gone is not handed over. A payment with a
// job in River not completed makes its lane messages Held; ReleaseExpress
// gives a message back for a while.
func TestAnExpressMessageHandedOverIsARiverJob(t *testing.T) {
	t.Parallel()
	b := expressSetup(t)
	ctx := context.Background()
	ob := b.store.Outbox()
	if _, err := b.store.Payments().RecordPayment(ctx, stripePayment("xl-3")); err != nil {
		t.Fatal(err)
	}
	ms := claim(t, b, 10, time.Minute)
	if len(ms) != 2 {
		t.Fatalf("claimed %d, want 2", len(ms))
	}
	at := time.Now().Add(time.Hour)
	hs := []ExpressHandover{{Message: ms[0], At: at, Attempted: true}, {Message: ms[1]}}
	if err := ob.HandOverExpress(ctx, hs); err != nil {
		t.Fatal(err)
	}
	if n := b.laneRows(t); n != 0 {
		t.Fatalf("%d rows left, want none", n)
	}
	jobs := b.jobsOf(t, "stripe", "xl-3")
	if len(jobs) != 2 {
		t.Fatalf("jobs %+v, want 2", jobs)
	}
	for _, j := range jobs {
		switch j.Args.Destination {
		case ms[0].Args.Destination:
			if j.MaxAttempts != 6 || j.ScheduledAt.Before(at.Add(-time.Second)) || j.Args.Fingerprint != ms[0].Args.Fingerprint {
				t.Errorf("job %+v: want 6 attempts, due in an hour, its fingerprint kept", j)
			}
		default:
			if j.MaxAttempts != 7 || j.ScheduledAt.After(time.Now().Add(time.Second)) {
				t.Errorf("job %+v: want 7 attempts, due now", j)
			}
		}
		if _, ok := j.Args.CarriedPayment(); !ok {
			t.Errorf("job %+v carries no payment", j)
		}
	}
	// Handed over again (a drainer whose flush was retried): nothing more.
	if err := ob.HandOverExpress(ctx, hs); err != nil {
		t.Fatal(err)
	}
	if jobs := b.jobsOf(t, "stripe", "xl-3"); len(jobs) != 2 {
		t.Fatalf("after a second hand-over %d jobs, want 2", len(jobs))
	}

	// The payment's jobs are in River, not completed: its next messages
	// in the lane are held.
	hook := ob.ForwardChangeHook("ledger")
	err := pgx.BeginFunc(ctx, b.store.Pool(), func(tx pgx.Tx) error {
		return hook(ctx, tx, Change{Source: "stripe", TransactionID: "xl-3", EventID: "evt_x3", Message: "payment.refunded", Version: 2})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Payments().RecordPayment(ctx, stripePayment("xl-4")); err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, m := range claim(t, b, 10, time.Minute) {
		held[m.Args.TransactionID+"/"+m.Args.Destination] = m.Held
		if err := ob.ReleaseExpress(ctx, []int64{m.ID}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if len(held) != 3 || !held["xl-3/ledger"] || held["xl-4/ledger"] || held["xl-4/analytics"] {
		t.Fatalf("held %v: want xl-3's ledger message held, xl-4's not", held)
	}
	if again := claim(t, b, 10, time.Minute); len(again) != 0 {
		t.Fatalf("claimed %d released for an hour, want none", len(again))
	}
	if err := ob.ReleaseExpress(ctx, []int64{}, 0); err != nil {
		t.Fatal(err)
	}
}
