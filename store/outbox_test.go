package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/paylock/paylock/internal/testkit"
)

const forwardDest = "orders" // a forward destination's name

// forwardJobs returns the forward jobs' args held for the test's schema.
func (b *bundle) forwardJobs(t *testing.T) []ForwardJob {
	t.Helper()
	jobs, err := b.store.Outbox().ForwardJobs(context.Background(), ForwardJobFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func TestARecordedPaymentEnqueuesOneForwardInItsTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ForwardMaxAttempts = 7 })
	ctx := context.Background()

	p := newPayment("fwd-1")
	p.Source = "stripe"
	if _, err := b.store.Payments().RecordPaymentForwarded(ctx, p, forwardDest); err != nil {
		t.Fatal(err)
	}
	jobs := b.forwardJobs(t)
	if len(jobs) != 1 {
		t.Fatalf("%d forward jobs, want 1", len(jobs))
	}
	j := jobs[0]
	want := ForwardArgs{ID: PaymentForwardID("stripe", "fwd-1"), Type: ForwardPaymentRecorded, Destination: forwardDest, Source: "stripe", TransactionID: "fwd-1"}
	carried := j.Args.Payment
	j.Args.Payment = nil
	if j.Args != want || j.MaxAttempts != 7 || j.State != "available" {
		t.Fatalf("job %+v, want args %+v, 7 attempts, available", j, want)
	}
	// The job carries the payment as recorded: its worker need not read it.
	stored, err := b.store.Payments().Payment(ctx, "stripe", "fwd-1")
	if err != nil {
		t.Fatal(err)
	}
	j.Args.Payment = carried
	got, ok := j.Args.CarriedPayment()
	if !ok || got.Amount != stored.Amount || got.Currency != stored.Currency || got.EventID != stored.EventID ||
		!got.ReceivedAt.Equal(stored.ReceivedAt) || string(got.Payload) != string(stored.Payload) {
		t.Fatalf("carried payment %+v (%s), want the stored %+v (%s)", got, got.Payload, stored, stored.Payload)
	}

	t.Run("ADuplicateInsertsNoSecondJob", func(t *testing.T) {
		_, err := b.store.Payments().RecordPaymentForwarded(ctx, p, forwardDest)
		if !errors.Is(err, ErrDuplicate) {
			t.Fatalf("got %v, want ErrDuplicate", err)
		}
		if n := len(b.forwardJobs(t)); n != 1 {
			t.Fatalf("%d forward jobs after the duplicate, want 1", n)
		}
	})
	enqueue := func(t *testing.T, destination string) {
		t.Helper()
		tx, err := b.store.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.store.Outbox().EnqueueForwardTx(ctx, tx, Forward{Source: "stripe", TransactionID: "fwd-1", Destination: destination}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("ASecondEnqueueOfTheSamePaymentToTheSameDestinationIsSkipped", func(t *testing.T) {
		enqueue(t, forwardDest)
		if jobs := b.forwardJobs(t); len(jobs) != 1 || jobs[0].Args.Destination != forwardDest {
			t.Fatalf("jobs %+v: want the first one only", jobs)
		}
	})
	t.Run("WithoutADestinationNothingIsEnqueued", func(t *testing.T) {
		if _, err := b.store.Payments().RecordPaymentForwarded(ctx, newPayment("fwd-nourl"), ""); err != nil {
			t.Fatal(err)
		}
		if n := len(b.forwardJobs(t)); n != 1 {
			t.Fatalf("%d forward jobs, want 1", n)
		}
	})
	t.Run("AnotherDestinationGetsAJobOfItsOwnUnderTheSameWebhookID", func(t *testing.T) {
		enqueue(t, "elsewhere")
		enqueue(t, "elsewhere")
		jobs := b.forwardJobs(t)
		if len(jobs) != 2 || jobs[0].Args.ID != jobs[1].Args.ID || jobs[0].Args.Destination == jobs[1].Args.Destination {
			t.Fatalf("jobs %+v: want one per destination, same webhook-id", jobs)
		}
	})
}

func TestARolledBackRecordLeavesNoForward(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	boom := errors.New("the embedder's hook failed")
	_, err := b.store.Payments().RecordPaymentFunc(ctx, newPayment("fwd-rb"), func(ctx context.Context, tx pgx.Tx, p Payment) error {
		if err := b.store.Outbox().EnqueueForwardTx(ctx, tx, Forward{Source: p.Source, TransactionID: p.TransactionID, Destination: forwardDest}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the fn's error", err)
	}
	if n := testkit.PaymentRows(t, b.admin, "fwd-rb"); n != 0 {
		t.Fatalf("%d payment rows, want 0", n)
	}
	if jobs := b.forwardJobs(t); len(jobs) != 0 {
		t.Fatalf("forward jobs %+v after a rollback, want none", jobs)
	}
}

func TestEnqueueForwardRefusesAnIncompleteForward(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, f := range []Forward{{TransactionID: "tx"}, {Destination: forwardDest}} {
		_, err := b.store.Payments().RecordPaymentFunc(ctx, newPayment("fwd-bad-"+f.Destination), func(ctx context.Context, tx pgx.Tx, _ Payment) error {
			return b.store.Outbox().EnqueueForwardTx(ctx, tx, f)
		})
		if !errors.Is(err, ErrForward) {
			t.Errorf("%+v: got %v, want ErrForward", f, err)
		}
	}
}

func TestStatusChangesEnqueueDisbursementForwards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.store.Disbursements().OnStatusChange(b.store.Outbox().ForwardStatusHook(forwardDest))

	d, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-fwd", 2, "evt_fwd"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(b.forwardJobs(t)); n != 0 {
		t.Fatalf("%d forward jobs for a pending row, want 0", n)
	}
	if err := b.store.Disbursements().MarkSent(ctx, d.ID, "po_fwd", StatusSent); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.store.Disbursements().ApplyPayoutStatus(ctx, "pevt_1", "po_fwd", StatusPaid, ""); err != nil {
		t.Fatal(err)
	}
	jobs := b.forwardJobs(t) // newest first
	if len(jobs) != 2 {
		t.Fatalf("%d forward jobs, want 2 (sent, paid)", len(jobs))
	}
	for i, want := range []DisbursementStatus{StatusPaid, StatusSent} {
		a := jobs[i].Args
		fd := a.Disbursement
		if a.Type != ForwardDisbursementPrefix+string(want) || a.ID != DisbursementForwardID("L-fwd", 2, want) || a.Destination != forwardDest ||
			fd == nil || fd.Status != want || fd.LoanID != "L-fwd" || fd.Tranche != 2 || fd.ProviderRef != "po_fwd" ||
			fd.IdempotencyKey != "disburse-L-fwd-2" || fd.Amount != 500000 || fd.Currency != "JPY" {
			t.Errorf("job %d: %+v %+v, want a %s forward", i, a, fd, want)
		}
	}
	if jobs[0].Args.Disbursement.PreviousStatus != StatusSent || jobs[1].Args.Disbursement.PreviousStatus != StatusPending {
		t.Errorf("previous statuses %s, %s; want sent, pending", jobs[0].Args.Disbursement.PreviousStatus, jobs[1].Args.Disbursement.PreviousStatus)
	}

	t.Run("AStaleStatusChangesNothingAndForwardsNothing", func(t *testing.T) {
		if _, applied, err := b.store.Disbursements().ApplyPayoutStatus(ctx, "pevt_2", "po_fwd", StatusFailed, "late"); err != nil || applied {
			t.Fatalf("applied %v, %v", applied, err)
		}
		if n := len(b.forwardJobs(t)); n != 2 {
			t.Fatalf("%d forward jobs, want 2", n)
		}
	})
}

func TestForwardIDsAreStableAndDistinct(t *testing.T) {
	t.Parallel()
	ids := map[string]string{}
	for _, c := range []struct{ name, id string }{
		{"payments/tx_1", PaymentForwardID("payments", "tx_1")},
		{"stripe/tx_1", PaymentForwardID("stripe", "tx_1")},
		{"payments/tx_2", PaymentForwardID("payments", "tx_2")},
		{"a/b\nc", PaymentForwardID("a", "b\nc")},
		{"L-1/1/sent", DisbursementForwardID("L-1", 1, StatusSent)},
		{"L-1/1/paid", DisbursementForwardID("L-1", 1, StatusPaid)},
		{"L-1/2/sent", DisbursementForwardID("L-1", 2, StatusSent)},
	} {
		if prev, ok := ids[c.id]; ok {
			t.Errorf("%s and %s share webhook-id %s", prev, c.name, c.id)
		}
		ids[c.id] = c.name
		if len(c.id) != 36 {
			t.Errorf("%s: id %q is %d characters, want 36", c.name, c.id, len(c.id))
		}
	}
	if PaymentForwardID("", "tx_1") != PaymentForwardID(DefaultSource, "tx_1") {
		t.Error(`source "" is not DefaultSource`)
	}
	if got, want := PaymentForwardID("payments", "tx_1"), PaymentForwardID("payments", "tx_1"); got != want {
		t.Errorf("not deterministic: %s, %s", got, want)
	}
}

func TestRetryForwardOfAnUnknownJobIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.store.Outbox().RetryForward(ctx, 424242); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: got %v, want ErrNotFound", err)
	}
	d, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-rf", 1, "evt_rf"))
	if err != nil {
		t.Fatal(err)
	}
	var payoutJob int64
	if err := b.admin.QueryRow(ctx, "SELECT id FROM river_job WHERE kind = $1", PayoutKind).Scan(&payoutJob); err != nil {
		t.Fatal(err, d.ID)
	}
	if _, err := b.store.Outbox().RetryForward(ctx, payoutJob); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a payout job's id: got %v, want ErrNotFound", err)
	}
}

func TestRetryGivenUpForwardsPutsEachBackOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, id := range []string{"fwd-g1", "fwd-g2", "fwd-g3"} {
		if _, err := b.store.Payments().RecordPaymentForwarded(ctx, newPayment(id), forwardDest); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Exec(t, b.admin, `UPDATE river_job SET state = 'discarded', finalized_at = now(), attempt = max_attempts WHERE kind = 'forward' AND args->>'transaction_id' <> 'fwd-g3'`)
	given, err := b.store.Outbox().ForwardJobs(ctx, ForwardJobFilter{GivenUp: true})
	if err != nil || len(given) != 2 || !given[0].GivenUp() {
		t.Fatalf("given up: %+v, %v; want 2", given, err)
	}
	n, err := b.store.Outbox().RetryGivenUpForwards(ctx)
	if err != nil || n != 2 {
		t.Fatalf("retried %d, %v; want 2", n, err)
	}
	for _, j := range b.forwardJobs(t) {
		if j.State != "available" {
			t.Errorf("job %d (%s) is %s after the retry, want available", j.ID, j.Args.TransactionID, j.State)
		}
		if want := DefaultForwardMaxAttempts + 1; j.Args.TransactionID != "fwd-g3" && j.MaxAttempts != want {
			t.Errorf("job %d has %d attempts, want %d", j.ID, j.MaxAttempts, want)
		}
	}
	if n, err := b.store.Outbox().RetryGivenUpForwards(ctx); err != nil || n != 0 {
		t.Fatalf("a second retry put back %d, %v; want 0", n, err)
	}
}

func TestAForwardJobNamesItsDestinationAndAnOlderJobsURLPrintsWithoutCredentials(t *testing.T) {
	t.Parallel()
	var old ForwardArgs
	if err := json.Unmarshal([]byte(`{"id":"pay_1","type":"payment.recorded","url":"https://u:s3cret@orders.internal/hook?token=s3cret","source":"stripe","transaction_id":"tx"}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.URL != "https://u:s3cret@orders.internal/hook?token=s3cret" || old.Destination != "" {
		t.Fatalf("an older job's args decode to %+v", old)
	}
	if got := old.Target(); got != "https://orders.internal/hook" {
		t.Errorf("an older job's Target() = %q, want its URL without credentials or query", got)
	}
	b, err := json.Marshal(ForwardArgs{ID: "pay_1", Type: ForwardPaymentRecorded, Destination: "stripe", Source: "stripe", TransactionID: "tx"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"pay_1","type":"payment.recorded","destination":"stripe","source":"stripe","transaction_id":"tx"}`; string(b) != want {
		t.Errorf("a new job's args %s, want %s (no url)", b, want)
	}
}

func TestForwardJobsSinceListsOnlyTheJobsCreatedInTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, id := range []string{"fwd-s1", "fwd-s2"} {
		if _, err := b.store.Payments().RecordPaymentForwarded(ctx, newPayment(id), forwardDest); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Exec(t, b.admin, `UPDATE river_job SET created_at = now() - interval '4 days' WHERE kind = 'forward' AND args->>'transaction_id' = 'fwd-s1'`)
	jobs, err := b.store.Outbox().ForwardJobs(ctx, ForwardJobFilter{Since: time.Now().Add(-72 * time.Hour)})
	if err != nil || len(jobs) != 1 || jobs[0].Args.TransactionID != "fwd-s2" {
		t.Fatalf("since 72h: %+v, %v; want fwd-s2 alone", jobs, err)
	}
	if jobs, err = b.store.Outbox().ForwardJobs(ctx, ForwardJobFilter{}); err != nil || len(jobs) != 2 {
		t.Fatalf("no window: %d jobs, %v; want 2", len(jobs), err)
	}
}

func TestARoutedPaymentEnqueuesOneJobPerTargetOrNothingWhenRoutingFails(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ForwardMaxAttempts = 7 })
	ctx := context.Background()
	errRoute := errors.New("no such destination")
	var seen *Payment
	route := func(_ context.Context, a ForwardArgs, p *Payment) ([]ForwardTarget, error) {
		if a.TransactionID == "routed-bad" {
			return nil, errRoute
		}
		seen = p
		return []ForwardTarget{{Destination: "ledger", Fingerprint: "fp1_a", MaxAttempts: 3}, {Destination: "analytics"}}, nil
	}
	b.store.Outbox().Route(DefaultSource, route)
	if _, err := b.store.Payments().RecordPayment(ctx, newPayment("routed-1")); err != nil {
		t.Fatal(err)
	}
	if seen == nil || seen.TransactionID != "routed-1" || seen.Amount == 0 {
		t.Errorf("the router saw payment %+v, want routed-1 as recorded", seen)
	}
	jobs := b.forwardJobs(t)
	byDest := map[string]ForwardJob{}
	for _, j := range jobs {
		byDest[j.Args.Destination] = j
	}
	if l, a := byDest["ledger"], byDest["analytics"]; len(jobs) != 2 || l.MaxAttempts != 3 || l.Args.Fingerprint != "fp1_a" ||
		a.MaxAttempts != 7 || a.Args.Fingerprint != "" || l.Args.ID != a.Args.ID {
		t.Fatalf("jobs %+v: want ledger's (3 attempts, its fingerprint) and analytics' (the store's 7), one webhook-id", jobs)
	}
	_, err := b.store.Payments().RecordPayment(ctx, newPayment("routed-bad"))
	if !errors.Is(err, errRoute) {
		t.Fatalf("record with a failing route: %v, want its error", err)
	}
	if _, err := b.store.Payments().Payment(ctx, DefaultSource, "routed-bad"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the payment whose routing failed: %v, want ErrNotFound (nothing written)", err)
	}
	if n := len(b.forwardJobs(t)); n != 2 {
		t.Errorf("%d forward jobs, want 2", n)
	}
}

// A payment whose payload is over CarriedPayloadMax is read when its job
// is sent, not written twice.
func TestAPayloadOverTheCarriedMaxIsNotCarried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	big := newPayment("fwd-big")
	big.Source = "stripe"
	big.Payload = []byte(`{"transaction_id":"fwd-big","pad":"` + strings.Repeat("x", CarriedPayloadMax) + `"}`)
	if _, err := b.store.Payments().RecordPaymentForwarded(ctx, big, forwardDest); err != nil {
		t.Fatal(err)
	}
	for _, j := range b.forwardJobs(t) {
		if j.Args.TransactionID == "fwd-big" {
			if _, ok := j.Args.CarriedPayment(); ok {
				t.Fatalf("a payload of %d bytes was carried, want it read when sent (over %d)", len(big.Payload), CarriedPayloadMax)
			}
			return
		}
	}
	t.Fatal("no job for fwd-big")
}
