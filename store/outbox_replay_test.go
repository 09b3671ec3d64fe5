package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// finish marks every forward job completed, as the worker would.
func (b *bundle) finish(t *testing.T) {
	t.Helper()
	if _, err := b.admin.Exec(context.Background(),
		`UPDATE river_job SET state = 'completed', attempt = 1, attempted_at = now(), finalized_at = now() WHERE kind = 'forward'`); err != nil {
		t.Fatal(err)
	}
}

func TestReplayForwards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	start := time.Now().Add(-time.Minute)
	for _, id := range []string{"r-1", "r-2", "r-3"} {
		p := newPayment(id)
		p.Source = "stripe"
		if _, err := b.store.Payments().RecordPaymentForwarded(ctx, p, forwardDest); err != nil {
			t.Fatal(err)
		}
	}
	other := newPayment("r-1") // same id, other source: not selected
	other.Source = "adyen"
	if _, err := b.store.Payments().RecordPaymentForwarded(ctx, other, forwardDest); err != nil {
		t.Fatal(err)
	}
	// r-3's job is gone (River deleted it after its retention).
	if _, err := b.admin.Exec(ctx, `DELETE FROM river_job WHERE args->>'id' = $1`, PaymentForwardID("stripe", "r-3")); err != nil {
		t.Fatal(err)
	}
	b.finish(t)
	filter := ReplayFilter{Source: "stripe", Since: start, Destination: forwardDest}

	t.Run("DryRunOnlyCounts", func(t *testing.T) {
		f := filter
		f.DryRun, f.Destination = true, ""
		res, err := b.store.Outbox().ReplayForwards(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if res != (ReplayResult{Payments: 3, Retried: 2, Inserted: 1}) {
			t.Fatalf("dry run %+v, want 3 payments, 2 retried, 1 inserted", res)
		}
		for _, j := range b.forwardJobs(t) {
			if j.State != "completed" {
				t.Fatalf("dry run changed job %+v", j)
			}
		}
		if n := len(b.forwardJobs(t)); n != 3 {
			t.Fatalf("%d jobs after the dry run, want 3", n)
		}
	})
	t.Run("ReplaysWithTheOriginalWebhookIDs", func(t *testing.T) {
		res, err := b.store.Outbox().ReplayForwards(ctx, filter)
		if err != nil {
			t.Fatal(err)
		}
		if res != (ReplayResult{Payments: 3, Retried: 2, Inserted: 1}) {
			t.Fatalf("replay %+v, want 3 payments, 2 retried, 1 inserted", res)
		}
		for _, id := range []string{"r-1", "r-2", "r-3"} {
			jobs, err := b.store.Outbox().PaymentForwards(ctx, "stripe", id)
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 1 || jobs[0].State != "available" || jobs[0].Args.ID != PaymentForwardID("stripe", id) {
				t.Fatalf("%s: jobs %+v, want one available job with its webhook-id", id, jobs)
			}
		}
		adyen, err := b.store.Outbox().PaymentForwards(ctx, "adyen", "r-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(adyen) != 1 || adyen[0].State != "completed" {
			t.Fatalf("adyen's job %+v, want it left completed", adyen)
		}
		// Jobs still waiting are left alone.
		res, err = b.store.Outbox().ReplayForwards(ctx, filter)
		if err != nil {
			t.Fatal(err)
		}
		if res != (ReplayResult{Payments: 3, Pending: 3}) {
			t.Fatalf("second replay %+v, want 3 pending", res)
		}
	})
	t.Run("TransactionLimitsToOne", func(t *testing.T) {
		b.finish(t)
		f := filter
		f.Since, f.TransactionID = time.Time{}, "r-2"
		res, err := b.store.Outbox().ReplayForwards(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if res != (ReplayResult{Payments: 1, Retried: 1}) {
			t.Fatalf("replay %+v, want one payment retried", res)
		}
	})
	t.Run("UntilBoundsTheWindow", func(t *testing.T) {
		f := filter
		f.DryRun, f.Until = true, start
		res, err := b.store.Outbox().ReplayForwards(ctx, f)
		if err != nil || res.Payments != 0 {
			t.Fatalf("replay %+v, %v: want nothing before start", res, err)
		}
	})
	t.Run("NeedsAWindowAndADestination", func(t *testing.T) {
		for _, f := range []ReplayFilter{{Source: "stripe", Destination: forwardDest}, {Source: "stripe", Since: start}} {
			if _, err := b.store.Outbox().ReplayForwards(ctx, f); !errors.Is(err, ErrForward) {
				t.Errorf("%+v: got %v, want ErrForward", f, err)
			}
		}
	})
}
