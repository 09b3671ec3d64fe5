package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

func TestDisbursementStatsOfAnEmptyTableReportEveryStatusAtZero(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, err := b.store.Disbursements().DisbursementStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []DisbursementStatus{StatusPending, StatusSent, StatusPaid, StatusFailed} {
		if n, ok := s.ByStatus[st]; !ok || n != 0 {
			t.Errorf("%s: %d (present %v), want 0", st, n, ok)
		}
	}
	if s.OldestPending != 0 || s.NeedingReview != 0 {
		t.Errorf("empty table: %+v", s)
	}
}

func TestDisbursementStatsCountStatusesAndFindTheOldestUnsettledRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i := range 9 {
		if _, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement(fmt.Sprintf("L-%d", i), 1, fmt.Sprintf("evt_%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// L-0, L-1: pending (L-1 for 2 hours); L-2: pending, flagged 5 hours ago;
	// L-3, L-4: sent (L-4 for 3 hours); L-5..L-7: paid, long ago; L-8: failed.
	testkit.Exec(t, b.admin, `UPDATE disbursements SET status_since = now() - interval '2 hours' WHERE loan_id = 'L-1'`)
	testkit.Exec(t, b.admin, `UPDATE disbursements SET review_reason = 'lookup found nothing', status_since = now() - interval '5 hours' WHERE loan_id = 'L-2'`)
	testkit.Exec(t, b.admin, `UPDATE disbursements SET status = 'sent', provider_ref = 'po_' || loan_id WHERE loan_id IN ('L-3', 'L-4')`)
	testkit.Exec(t, b.admin, `UPDATE disbursements SET status_since = now() - interval '3 hours' WHERE loan_id = 'L-4'`)
	testkit.Exec(t, b.admin, `UPDATE disbursements SET status = 'paid', provider_ref = 'po_' || loan_id, status_since = now() - interval '30 days'
		WHERE loan_id IN ('L-5', 'L-6', 'L-7')`)
	testkit.Exec(t, b.admin, `UPDATE disbursements SET status = 'failed', status_since = now() - interval '30 days' WHERE loan_id = 'L-8'`)

	s, err := b.store.Disbursements().DisbursementStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[DisbursementStatus]int64{StatusPending: 3, StatusSent: 2, StatusPaid: 3, StatusFailed: 1}
	for st, n := range want {
		if s.ByStatus[st] != n {
			t.Errorf("%s: %d, want %d", st, s.ByStatus[st], n)
		}
	}
	// The oldest unsettled row not awaiting review is L-4, sent 3 hours ago;
	// the flagged L-2 counts only as needing review.
	if s.OldestPending < 3*time.Hour || s.OldestPending > 3*time.Hour+time.Minute {
		t.Errorf("oldest pending %v, want 3h", s.OldestPending)
	}
	if s.NeedingReview != 1 {
		t.Errorf("needing review %d, want 1", s.NeedingReview)
	}
}

func TestDisbursementStatsHonourTheContextDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Hold an exclusive lock on the table: the stats query waits on it.
	tx, err := b.admin.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(context.Background(), "LOCK TABLE disbursements IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = b.store.Disbursements().DisbursementStats(ctx)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("stats behind a lock: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("stats took %v past a 200ms deadline", took)
	}
}
