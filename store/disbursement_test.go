package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func newDisbursement(loanID string, tranche int, eventID string) Disbursement {
	return Disbursement{LoanID: loanID, Tranche: tranche, Amount: 500000, Currency: "JPY", EventID: eventID}
}

func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.admin.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (b *bundle) events(t *testing.T, source, eventID string) int {
	t.Helper()
	return b.count(t, "SELECT count(*) FROM webhook_events WHERE source = $1 AND event_id = $2", source, eventID)
}

func TestAcceptDisbursementRecordsEachTrancheOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	d, err := b.store.AcceptDisbursement(ctx, newDisbursement("L-1", 1, "evt_1"))
	if err != nil {
		t.Fatalf("first event: %v", err)
	}
	if d.Status != StatusPending || d.IdempotencyKey != "disburse-L-1-1" || d.Attempts != 0 || d.ID == 0 {
		t.Fatalf("created %+v", d)
	}

	t.Run("TheSameEventAgainIsSeen", func(t *testing.T) {
		_, err := b.store.AcceptDisbursement(ctx, newDisbursement("L-1", 1, "evt_1"))
		if !errors.Is(err, ErrEventSeen) || !errors.Is(err, ErrDuplicate) {
			t.Fatalf("got %v, want ErrEventSeen (and ErrDuplicate)", err)
		}
	})
	t.Run("ANewEventForTheSameTrancheIsADuplicateAndIsRecorded", func(t *testing.T) {
		_, err := b.store.AcceptDisbursement(ctx, newDisbursement("L-1", 1, "evt_2"))
		if !errors.Is(err, ErrDuplicate) || errors.Is(err, ErrEventSeen) {
			t.Fatalf("got %v, want ErrDuplicate but not ErrEventSeen", err)
		}
		if n := b.events(t, SourceLoans, "evt_2"); n != 1 {
			t.Fatalf("evt_2 recorded %d times, want 1", n)
		}
	})
	t.Run("ANewEventWithAnotherAmountIsAMismatchAndIsNotRecorded", func(t *testing.T) {
		other := newDisbursement("L-1", 1, "evt_3")
		other.Amount = 400000
		_, err := b.store.AcceptDisbursement(ctx, other)
		if !errors.Is(err, ErrMismatch) {
			t.Fatalf("got %v, want ErrMismatch", err)
		}
		if n := b.events(t, SourceLoans, "evt_3"); n != 0 {
			t.Fatalf("a mismatched event was recorded (%d rows)", n)
		}
	})
	t.Run("AnEventIdReusedForAnotherTrancheIsAMismatch", func(t *testing.T) {
		_, err := b.store.AcceptDisbursement(ctx, newDisbursement("L-1", 2, "evt_1"))
		if !errors.Is(err, ErrMismatch) {
			t.Fatalf("got %v, want ErrMismatch", err)
		}
	})
	t.Run("TrancheTwoIsItsOwnDisbursement", func(t *testing.T) {
		d2, err := b.store.AcceptDisbursement(ctx, newDisbursement("L-1", 2, "evt_4"))
		if err != nil {
			t.Fatal(err)
		}
		if d2.IdempotencyKey != "disburse-L-1-2" || d2.ID == d.ID {
			t.Fatalf("tranche 2: %+v", d2)
		}
	})
	if n := b.count(t, "SELECT count(*) FROM disbursements WHERE loan_id = 'L-1'"); n != 2 {
		t.Fatalf("%d disbursements for L-1, want 2", n)
	}
	stored, err := b.store.Disbursement(ctx, "L-1", 1)
	if err != nil || stored.Amount != 500000 || stored.EventID != "evt_1" {
		t.Fatalf("stored %+v, %v", stored, err)
	}
	if _, err := b.store.Disbursement(ctx, "L-1", 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing tranche: %v, want ErrNotFound", err)
	}
}

func TestConcurrentEventsForOneTrancheCreateOneDisbursement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const replicas, events = 3, 30
	stores := []*Store{b.store}
	for range replicas - 1 {
		s, err := Open(ctx, Config{URL: b.url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		stores = append(stores, s)
	}
	errs := make([]error, events)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range events {
		wg.Go(func() {
			<-start
			// Half the events share ids: redeliveries racing new approvals.
			_, errs[i] = stores[i%replicas].AcceptDisbursement(ctx, newDisbursement("L-race", 1, fmt.Sprintf("evt_%d", i/2)))
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i, err := range errs {
		switch {
		case err == nil:
			created++
		case errors.Is(err, ErrDuplicate):
		default:
			t.Errorf("event %d: %v", i, err)
		}
	}
	if created != 1 {
		t.Fatalf("%d events created the disbursement, want 1", created)
	}
	if n := b.count(t, "SELECT count(*) FROM disbursements"); n != 1 {
		t.Fatalf("%d disbursements, want 1", n)
	}
	if n := b.count(t, "SELECT count(*) FROM webhook_events"); n != events/2 {
		t.Fatalf("%d events recorded, want %d", n, events/2)
	}
}

func TestNewDisbursementNotifiesListenersOnCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakes := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- b.store.ListenDisbursements(ctx, func() { wakes <- struct{}{} })
	}()
	select {
	case <-wakes: // listening has begun
	case <-time.After(5 * time.Second):
		t.Fatal("no wake once listening")
	}
	if _, err := b.store.AcceptDisbursement(context.Background(), newDisbursement("L-n", 1, "evt_n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wakes:
	case <-time.After(5 * time.Second):
		t.Fatal("no notification after the commit")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ListenDisbursements returned %v after cancel, want nil", err)
	}
}

func TestClaimsAreExclusiveAndExpire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d, err := b.store.AcceptDisbursement(ctx, newDisbursement("L-c", 1, "evt_c"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.store.ClaimDisbursements(ctx, "worker-a", 300*time.Millisecond, 10)
	if err != nil || len(a) != 1 || a[0].ID != d.ID || a[0].Attempts != 1 || a[0].FirstAttemptAt.IsZero() {
		t.Fatalf("worker a claimed %+v, %v", a, err)
	}
	if rows, err := b.store.ClaimDisbursements(ctx, "worker-b", time.Minute, 10); err != nil || len(rows) != 0 {
		t.Fatalf("worker b claimed %d rows of a's (%v)", len(rows), err)
	}
	if err := b.store.MarkSent(ctx, d.ID, "worker-b", "po_b", StatusSent); !errors.Is(err, ErrClaimLost) {
		t.Fatalf("b's update of a's claim: %v, want ErrClaimLost", err)
	}

	time.Sleep(400 * time.Millisecond) // a stalls past its lease
	rows, err := b.store.ClaimDisbursements(ctx, "worker-b", time.Minute, 10)
	if err != nil || len(rows) != 1 || rows[0].Attempts != 2 || !rows[0].FirstAttemptAt.Equal(a[0].FirstAttemptAt) {
		t.Fatalf("after a's lease, b claimed %+v, %v", rows, err)
	}
	if rows[0].SinceFirstAttempt < 300*time.Millisecond {
		t.Errorf("SinceFirstAttempt = %v, want at least the stall", rows[0].SinceFirstAttempt)
	}
	if err := b.store.MarkSent(ctx, d.ID, "worker-a", "po_a", StatusSent); !errors.Is(err, ErrClaimLost) {
		t.Fatalf("stale worker a's update: %v, want ErrClaimLost", err)
	}
	if err := b.store.MarkSent(ctx, d.ID, "worker-b", "po_b", StatusSent); err != nil {
		t.Fatal(err)
	}
	got, _ := b.store.Disbursement(ctx, "L-c", 1)
	if got.Status != StatusSent || got.ProviderRef != "po_b" {
		t.Fatalf("after b's update: %+v", got)
	}
	if rows, _ := b.store.ClaimDisbursements(ctx, "worker-c", time.Minute, 10); len(rows) != 0 {
		t.Fatalf("a sent row was claimed again")
	}
}

func TestRetryLaterAndReviewKeepTheRowOutOfClaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d1, _ := b.store.AcceptDisbursement(ctx, newDisbursement("L-r", 1, "evt_r1"))
	d2, _ := b.store.AcceptDisbursement(ctx, newDisbursement("L-r", 2, "evt_r2"))
	if _, err := b.store.ClaimDisbursements(ctx, "w", time.Minute, 10); err != nil {
		t.Fatal(err)
	}
	if err := b.store.RetryLater(ctx, d1.ID, "w", 300*time.Millisecond, "503"); err != nil {
		t.Fatal(err)
	}
	if err := b.store.FlagForReview(ctx, d2.ID, "w", "a person decides"); err != nil {
		t.Fatal(err)
	}
	if rows, _ := b.store.ClaimDisbursements(ctx, "w", time.Minute, 10); len(rows) != 0 {
		t.Fatalf("claimed %d rows before the retry is due", len(rows))
	}
	due, ok, err := b.store.NextDisbursementDue(ctx)
	if err != nil || !ok || due <= 0 || due > 300*time.Millisecond {
		t.Fatalf("next due in %v (%v, %v), want within 300ms", due, ok, err)
	}
	time.Sleep(due + 50*time.Millisecond)
	rows, err := b.store.ClaimDisbursements(ctx, "w", time.Minute, 10)
	if err != nil || len(rows) != 1 || rows[0].ID != d1.ID || rows[0].LastError != "503" {
		t.Fatalf("after the backoff claimed %+v, %v; want only the retried row", rows, err)
	}
	stuck, err := b.store.StuckDisbursements(ctx, time.Hour)
	if err != nil || len(stuck) != 1 || stuck[0].ID != d2.ID {
		t.Fatalf("stuck = %+v, %v; want the flagged row", stuck, err)
	}
	stuck, _ = b.store.StuckDisbursements(ctx, 0)
	if len(stuck) != 2 {
		t.Fatalf("stuck with no threshold = %d rows, want 2", len(stuck))
	}
}

func TestPayoutStatusMovesForwardOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sent := func(t *testing.T, loan, ref string) {
		t.Helper()
		d, err := b.store.AcceptDisbursement(ctx, newDisbursement(loan, 1, "evt_"+loan))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.ClaimDisbursements(ctx, "w", time.Minute, 10); err != nil {
			t.Fatal(err)
		}
		if err := b.store.MarkSent(ctx, d.ID, "w", ref, StatusSent); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("PaidThenLateFailedStaysPaid", func(t *testing.T) {
		sent(t, "L-p1", "po_1")
		d, applied, err := b.store.ApplyPayoutStatus(ctx, "pe_1", "po_1", StatusPaid, "")
		if err != nil || !applied || d.Status != StatusPaid {
			t.Fatalf("paid: %+v applied=%v %v", d, applied, err)
		}
		d, applied, err = b.store.ApplyPayoutStatus(ctx, "pe_2", "po_1", StatusFailed, "late")
		if err != nil || applied || d.Status != StatusPaid {
			t.Fatalf("late failed: %+v applied=%v %v", d, applied, err)
		}
		if n := b.events(t, SourcePayouts, "pe_2"); n != 1 {
			t.Fatalf("an ignored event is still received: %d rows", n)
		}
		if _, _, err := b.store.ApplyPayoutStatus(ctx, "pe_1", "po_1", StatusPaid, ""); !errors.Is(err, ErrEventSeen) {
			t.Fatalf("repeated event: %v, want ErrEventSeen", err)
		}
		if _, _, err := b.store.ApplyPayoutStatus(ctx, "pe_1", "po_other", StatusPaid, ""); !errors.Is(err, ErrMismatch) {
			t.Fatalf("event id reused for another payout: %v, want ErrMismatch", err)
		}
	})
	t.Run("FirstTerminalStatusWins", func(t *testing.T) {
		sent(t, "L-p2", "po_2")
		if _, applied, err := b.store.ApplyPayoutStatus(ctx, "pe_3", "po_2", StatusFailed, "account closed"); err != nil || !applied {
			t.Fatalf("failed: %v %v", applied, err)
		}
		d, applied, err := b.store.ApplyPayoutStatus(ctx, "pe_4", "po_2", StatusPaid, "")
		if err != nil || applied || d.Status != StatusFailed || d.LastError != "account closed" {
			t.Fatalf("paid after failed: %+v applied=%v %v", d, applied, err)
		}
	})
	t.Run("UnknownPayoutIsNotFoundAndNotRecorded", func(t *testing.T) {
		if _, _, err := b.store.ApplyPayoutStatus(ctx, "pe_5", "po_unknown", StatusPaid, ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
		if n := b.events(t, SourcePayouts, "pe_5"); n != 0 {
			t.Fatalf("the event of an unknown payout was recorded")
		}
	})
	t.Run("ConcurrentContradictingEventsApplyOnce", func(t *testing.T) {
		sent(t, "L-p3", "po_3")
		var wg sync.WaitGroup
		applied := make([]bool, 20)
		for i := range applied {
			wg.Go(func() {
				status := StatusPaid
				if i%2 == 1 {
					status = StatusFailed
				}
				var err error
				_, applied[i], err = b.store.ApplyPayoutStatus(ctx, fmt.Sprintf("pe_c%d", i), "po_3", status, "")
				if err != nil {
					t.Errorf("event %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		n := 0
		for _, a := range applied {
			if a {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d events applied, want exactly 1", n)
		}
	})
}
