package store

import (
	"context"
	"time"
)

// StuckDisbursements lists, oldest first, the rows still pending or sent
// for longer than olderThan, and the pending rows flagged for review.
func (s *Disbursements) StuckDisbursements(ctx context.Context, olderThan time.Duration) ([]Disbursement, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+disbursementColumns+` FROM disbursements
		WHERE (status IN ('pending', 'sent') AND status_since < now() - $1 * interval '1 millisecond')
			OR (status = 'pending' AND review_reason IS NOT NULL)
		ORDER BY status_since, id`, olderThan.Milliseconds())
	if err != nil {
		return nil, translate("stuck disbursements", err)
	}
	defer rows.Close()
	var out []Disbursement
	for rows.Next() {
		d, err := scanDisbursement(rows)
		if err != nil {
			return nil, translate("stuck disbursements: scan", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("stuck disbursements", err)
	}
	return out, nil
}

// RetriedFailures lists, oldest first, the failed rows without a
// provider_ref that were attempted more than once: an earlier attempt's
// outcome may have been unknown (a lost answer), so the provider may hold a
// payout for the key although the row says nothing was paid. Reconcile looks
// them up.
func (s *Disbursements) RetriedFailures(ctx context.Context) ([]Disbursement, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+disbursementColumns+` FROM disbursements
		WHERE status = 'failed' AND provider_ref IS NULL AND attempts > 1
		ORDER BY status_since, id`)
	if err != nil {
		return nil, translate("retried failures", err)
	}
	defer rows.Close()
	var out []Disbursement
	for rows.Next() {
		d, err := scanDisbursement(rows)
		if err != nil {
			return nil, translate("retried failures: scan", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("retried failures", err)
	}
	return out, nil
}

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
func (s *Disbursements) DisbursementStats(ctx context.Context) (DisbursementStats, error) {
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
