package forward_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// expressBundle is a store whose forwards start in the express lane, and
// a worker on it, not started.
type expressBundle struct {
	store    *store.Store
	worker   *forward.Worker
	outcomes *outcomes
}

func expressSetup(t *testing.T, url string, maxAttempts int) *expressBundle {
	t.Helper()
	dsn, _ := paylocktest.MigratedSchema(t)
	st := paylocktest.OpenStore(t, store.Config{URL: dsn, ForwardMaxAttempts: maxAttempts, ExpressForwards: true})
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, forwardSecret)
	if err != nil {
		t.Fatal(err)
	}
	o := &outcomes{}
	w, err := forward.New(forward.Config{
		Secret:       secrets[0],
		Destinations: forward.Destinations{forward.DefaultDestination: url},
		Timeout:      300 * time.Millisecond,
		RescueAfter:  6 * time.Second, // the lease of a claim, too
		Backoff:      func(int) time.Duration { return 20 * time.Millisecond },
		Logger:       slog.New(slog.DiscardHandler),
		Observe:      o.observe,
	}, st.Payments())
	if err != nil {
		t.Fatal(err)
	}
	return &expressBundle{store: st, worker: w, outcomes: o}
}

func (b *expressBundle) lane(t *testing.T) int {
	t.Helper()
	return testkit.Count(t, b.store.Pool(), `SELECT count(*) FROM forward_express`)
}

// lostAnswer is the express lane of a store whose first claim's answer
// never comes: the claim runs (its rows leased) and the drainer's call
// waits until its context ends, as over a connection whose replies are
// dropped.
type lostAnswer struct {
	forward.ExpressStore
	lost atomic.Bool
}

func (l *lostAnswer) ClaimExpress(ctx context.Context, limit int, lease time.Duration, done []int64) ([]store.ExpressMessage, error) {
	ms, err := l.ExpressStore.ClaimExpress(ctx, limit, lease, done)
	if err == nil && len(ms) > 0 && l.lost.CompareAndSwap(false, true) {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	return ms, err
}

// TestAnExpressClaimWhoseAnswerIsLostHoldsNothingForGood: the drainer's
// first claim runs but its answer never comes. The call is bounded, the
// drainer goes on, and the leased messages are sent once their lease runs
// out: every message reaches the receiver, and the lane ends empty.
func TestAnExpressClaimWhoseAnswerIsLostHoldsNothingForGood(t *testing.T) {
	t.Parallel()
	rc := receiver(t)
	b := expressSetup(t, rc.URL+"/paylock", 25)
	ctx := context.Background()
	const n = 5
	for i := range n {
		if _, err := b.store.Payments().RecordPaymentForwarded(ctx, payment("tx-lost-"+string(rune('a'+i))), forward.DefaultDestination); err != nil {
			t.Fatal(err)
		}
	}
	runWorker(t, b.store, b.worker)
	es := &lostAnswer{ExpressStore: b.store.Outbox()}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.worker.RunExpress(dctx, es) }()
	t.Cleanup(func() { cancel(); <-done })
	testkit.WaitFor(t, 30*time.Second, "every message delivered and the lane empty", func() bool {
		return len(rc.Attempts()) >= n && b.lane(t) == 0
	})
	if !es.lost.Load() {
		t.Fatal("no claim's answer was lost: the fault did not happen")
	}
	ids := map[string]bool{}
	for _, a := range rc.Attempts() {
		ids[a.Header.Get("webhook-id")] = true
	}
	if len(ids) != n {
		t.Fatalf("%d webhook-ids delivered, want %d", len(ids), n)
	}
	if jobs := testkit.Count(t, b.store.Pool(), `SELECT count(*) FROM river_job WHERE kind = 'forward'`); jobs != 0 {
		t.Errorf("%d River jobs, want none: every message went from the lane", jobs)
	}
}

// TestAnExpressMessageRefusedForGoodIsGivenUpWithoutASecondSend: the
// destination refuses the lane's attempt for good (ErrPermanent); the
// message is handed over to River, whose job gives it up at once
// (cancelled) without sending it again.
func TestAnExpressMessageRefusedForGoodIsGivenUpWithoutASecondSend(t *testing.T) {
	t.Parallel()
	h := memHarness(t)
	h.RefusePermanently()
	b := expressSetup(t, h.URL, 25)
	ctx := context.Background()
	if _, err := b.store.Payments().RecordPaymentForwarded(ctx, payment("tx-refused"), forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	runWorker(t, b.store, b.worker)
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.worker.RunExpress(dctx, b.store.Outbox()) }()
	t.Cleanup(func() { cancel(); <-done })
	testkit.WaitFor(t, 15*time.Second, "the message given up", func() bool {
		return testkit.Count(t, b.store.Pool(), `SELECT count(*) FROM river_job WHERE kind = 'forward' AND state = 'cancelled'`) == 1
	})
	time.Sleep(200 * time.Millisecond) // nothing more may come
	if got := len(h.Received()); got != 1 {
		t.Fatalf("%d messages at the destination, want 1: a refusal for good is not sent again", got)
	}
	if o := b.outcomes.list(); len(o) != 2 || o[0] != forward.OutcomeFailedAttempt || o[1] != forward.OutcomeDiscarded {
		t.Fatalf("outcomes %v, want the lane's failed attempt, then River's discard", o)
	}
}

// vacuums counts the lane's vacuums (store.VacuumExpress), which go to
// the store.
type vacuums struct {
	forward.ExpressStore
	n atomic.Int32
}

func (v *vacuums) VacuumExpress(ctx context.Context) error {
	err := v.ExpressStore.VacuumExpress(ctx)
	if err == nil {
		v.n.Add(1)
	}
	return err
}

// TestABusyExpressLaneIsVacuumedByItsDrainer: once the drainer deleted
// enough rows (those delivered), it vacuums the lane itself, which
// autovacuum would visit at most once a minute, so that its claims do
// not step over a minute of deleted rows. Postgres counts the vacuum.
func TestABusyExpressLaneIsVacuumedByItsDrainer(t *testing.T) {
	t.Parallel()
	rc := receiver(t)
	b := expressSetup(t, rc.URL+"/paylock", 25)
	ctx := context.Background()
	const n = 300 // above the drainer's threshold (expressVacuumRows)
	for i := range n {
		if _, err := b.store.Payments().RecordPaymentForwarded(ctx, payment(fmt.Sprintf("tx-vacuum-%03d", i)), forward.DefaultDestination); err != nil {
			t.Fatal(err)
		}
	}
	runWorker(t, b.store, b.worker)
	es := &vacuums{ExpressStore: b.store.Outbox()}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.worker.RunExpress(dctx, es) }()
	t.Cleanup(func() { cancel(); <-done })
	testkit.WaitFor(t, 30*time.Second, "every message delivered and the lane vacuumed", func() bool {
		return len(rc.Attempts()) >= n && b.lane(t) == 0 && es.n.Load() > 0
	})
	if got := testkit.Count(t, b.store.Pool(), `SELECT vacuum_count FROM pg_stat_user_tables
		WHERE relname = 'forward_express' AND schemaname = current_schema()`); got == 0 {
		t.Errorf("Postgres counts no vacuum of forward_express after %d of the drainer's", es.n.Load())
	}
}

// renderedSetup is expressSetup (25 attempts) whose source acme
// forwards to url as serve sets it up: its payments recorded with their
// lane rows in one statement, each row carrying its rendered body.
func renderedSetup(t *testing.T, url string) *expressBundle {
	t.Helper()
	b := expressSetup(t, url, 25)
	b.store.Outbox().Route("acme", store.ToDestination(forward.DefaultDestination))
	b.store.Outbox().Render(forward.RecordedBody(nil, nil))
	return b
}

// A payment recorded with its lane rows in one statement, under a
// renderer (store.Outbox.Render with RecordedBody), gives its rows the
// message's body: the drainer sends it as it is, and it is, byte for
// byte, the body River's worker builds of the payment as recorded when
// the lane's attempt failed and the message went on in River.
func TestTheLaneSendsTheBodyRenderedWhenThePaymentWasRecorded(t *testing.T) {
	t.Parallel()
	h := memHarness(t)
	b := renderedSetup(t, h.URL)
	ctx := context.Background()
	// A payload in jsonb's own order, which River's job reads back as it
	// was written.
	rec, err := b.store.Payments().RecordPayment(ctx, payment("tx-body"))
	if err != nil {
		t.Fatal(err)
	}
	if n := testkit.Count(t, b.store.Pool(), `SELECT count(*) FROM forward_express
		WHERE body IS NOT NULL AND NOT convert_from(args, 'UTF8')::jsonb ? 'payment'`); n != 1 {
		t.Fatalf("%d lane rows with a body and args without the payment, want 1", n)
	}
	h.Refuse(1)
	runWorker(t, b.store, b.worker)
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.worker.RunExpress(dctx, b.store.Outbox()) }()
	t.Cleanup(func() { cancel(); <-done })
	testkit.WaitFor(t, 15*time.Second, "the message sent again by River", func() bool { return len(h.Received()) == 2 })
	got := h.Received()
	if got[0].Accepted || !got[1].Accepted {
		t.Fatalf("accepted %v, %v: want the lane's attempt refused, River's taken", got[0].Accepted, got[1].Accepted)
	}
	if string(got[0].Body) != string(got[1].Body) {
		t.Fatalf("the lane sent\n%s\nRiver sent\n%s\nwant the same bytes", got[0].Body, got[1].Body)
	}
	var msg struct {
		Data struct {
			ReceivedAt time.Time `json:"received_at"`
			Amount     int64     `json:"amount"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got[0].Body, &msg); err != nil {
		t.Fatal(err)
	}
	if !msg.Data.ReceivedAt.Equal(rec.ReceivedAt) || msg.Data.Amount != rec.Amount {
		t.Fatalf("the message says %+v, want the payment as recorded at %v", msg.Data, rec.ReceivedAt)
	}
}

// The drainer sends a lane row's body as it is: it does not build the
// message again from the payment.
func TestTheLaneSendsARowsBodyAsItIs(t *testing.T) {
	t.Parallel()
	h := memHarness(t)
	b := renderedSetup(t, h.URL)
	ctx := context.Background()
	if _, err := b.store.Payments().RecordPayment(ctx, payment("tx-as-is")); err != nil {
		t.Fatal(err)
	}
	const marked = `{"type":"payment.recorded","data":{"marked":true}}`
	if _, err := b.store.Pool().Exec(ctx, `UPDATE forward_express SET body = convert_to($1, 'UTF8') WHERE body IS NOT NULL`, marked); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.worker.RunExpress(dctx, b.store.Outbox()) }()
	t.Cleanup(func() { cancel(); <-done })
	testkit.WaitFor(t, 15*time.Second, "the message sent", func() bool { return len(h.Received()) == 1 })
	if got := h.Received()[0]; string(got.Body) != marked || !got.Accepted {
		t.Fatalf("the destination got %s (accepted %v), want the row's body %s", got.Body, got.Accepted, marked)
	}
}

// claimCount counts the messages the drainer's claims returned.
type claimCount struct {
	forward.ExpressStore
	n atomic.Int32
}

func (c *claimCount) ClaimExpress(ctx context.Context, limit int, lease time.Duration, done []int64) ([]store.ExpressMessage, error) {
	ms, err := c.ExpressStore.ClaimExpress(ctx, limit, lease, done)
	c.n.Add(int32(len(ms)))
	return ms, err
}

// While the drainer runs, the lane rows that this process's recordings
// insert are its own from birth (store.Outbox.TakeExpress): it sends them
// without claiming them, and deletes them as it does claimed ones. Once
// it stops, the rows recorded after wait for any drainer's claim.
func TestTheDrainerSendsTheRowsItsProcessRecordsWithoutClaimingThem(t *testing.T) {
	t.Parallel()
	rc := receiver(t)
	b := renderedSetup(t, rc.URL+"/paylock")
	es := &claimCount{ExpressStore: b.store.Outbox()}
	ctx := context.Background()
	// Recorded before the drainer runs: claimed. Once it is delivered, the
	// drainer takes births (it does before its first claim).
	if _, err := b.store.Payments().RecordPayment(ctx, payment("tx-birth-before")); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.worker.RunExpress(dctx, es) }()
	testkit.WaitFor(t, 15*time.Second, "the message recorded before the drainer ran, claimed and sent", func() bool {
		return len(rc.Attempts()) == 1 && b.lane(t) == 0
	})
	if c := es.n.Swap(0); c != 1 {
		t.Fatalf("the drainer's claims returned %d messages, want the one recorded before it ran", c)
	}
	const n = 12
	for i := range n {
		if _, err := b.store.Payments().RecordPayment(ctx, payment(fmt.Sprintf("tx-birth-%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 15*time.Second, "every message delivered and the lane empty", func() bool {
		return len(rc.Attempts()) >= n+1 && b.lane(t) == 0
	})
	if c := es.n.Load(); c != 0 {
		t.Errorf("the drainer's claims returned %d messages, want none: its process recorded them", c)
	}
	if sent := testkit.Count(t, b.store.Pool(), `SELECT count(*) FROM forward_sent`); sent != n+1 {
		t.Errorf("forward_sent holds %d messages, want %d", sent, n+1)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Payments().RecordPayment(ctx, payment("tx-birth-after")); err != nil {
		t.Fatal(err)
	}
	ms, err := b.store.Outbox().ClaimExpress(ctx, 10, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Args.TransactionID != "tx-birth-after" {
		t.Fatalf("a claim once the drainer stopped got %d messages, want tx-birth-after's", len(ms))
	}
}
