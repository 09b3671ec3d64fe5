package store

import (
	"context"
	"time"
)

// DisbursementStats is a snapshot of the disbursements table, for metrics.
type DisbursementStats struct {
	// ByStatus counts the rows of every status; each status is present,
	// with 0 when no row has it.
	ByStatus map[DisbursementStatus]int64
	// OldestPending is how long the oldest row still pending or sent has
	// been in that status (since status_since, as StuckDisbursements
	// measures it), by the database's clock; 0 when there is none. Rows
	// flagged for review are left out: NeedingReview counts them.
	OldestPending time.Duration
	// NeedingReview counts the pending rows flagged for review, which the
	// worker leaves alone until a person decides.
	NeedingReview int64
}

// disbursementStatsSQL reads every figure in one pass over the table.
const disbursementStatsSQL = `
SELECT
	count(*) FILTER (WHERE status = 'pending'),
	count(*) FILTER (WHERE status = 'sent'),
	count(*) FILTER (WHERE status = 'paid'),
	count(*) FILTER (WHERE status = 'failed'),
	coalesce(extract(epoch FROM now() - min(status_since)
		FILTER (WHERE status IN ('pending', 'sent') AND review_reason IS NULL)), 0)::float8,
	count(*) FILTER (WHERE status = 'pending' AND review_reason IS NOT NULL)
FROM disbursements`

// DisbursementStats counts the disbursements by status, finds the oldest
// one still pending or sent, and counts those awaiting review, in one
// query. It scans the whole table: bound it with ctx. Transient failures
// (including ctx's deadline) wrap ErrUnavailable.
func (s *Store) DisbursementStats(ctx context.Context) (DisbursementStats, error) {
	var (
		pending, sent, paid, failed, review int64
		oldest                              float64
	)
	err := s.pool.QueryRow(ctx, disbursementStatsSQL).Scan(&pending, &sent, &paid, &failed, &oldest, &review)
	if err != nil {
		return DisbursementStats{}, translate("disbursement stats", err)
	}
	return DisbursementStats{
		ByStatus: map[DisbursementStatus]int64{
			StatusPending: pending, StatusSent: sent, StatusPaid: paid, StatusFailed: failed,
		},
		OldestPending: time.Duration(max(oldest, 0) * float64(time.Second)),
		NeedingReview: review,
	}, nil
}
