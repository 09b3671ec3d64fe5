package store

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DisbursementStatuses are the statuses a disbursement can have.
var DisbursementStatuses = []DisbursementStatus{StatusPending, StatusSent, StatusPaid, StatusFailed}

// DisbursementList selects a page of disbursements, newest first by id.
// Empty fields select everything.
type DisbursementList struct {
	LoanID string
	Status DisbursementStatus
	// Before, when positive, keeps only ids below it: the last id of the
	// previous page.
	Before int64
	// Limit is how many at most: 0 is DefaultListLimit, more than
	// MaxListLimit is MaxListLimit.
	Limit int
}

// ListDisbursements returns a page of the disbursements l selects, newest
// first (by id: the next page is Before = the last row's ID). It walks
// the primary key, or disbursements_loan_tranche_key for a loan.
// Transient failures wrap ErrUnavailable.
func (s *Disbursements) ListDisbursements(ctx context.Context, l DisbursementList) ([]Disbursement, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if l.LoanID != "" {
		where = append(where, "loan_id = "+arg(l.LoanID))
	}
	if l.Status != "" {
		where = append(where, "status = "+arg(string(l.Status)))
	}
	if l.Before > 0 {
		where = append(where, "id < "+arg(l.Before))
	}
	limit := l.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	q := `SELECT ` + disbursementColumns + ` FROM disbursements`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT " + arg(min(limit, MaxListLimit))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, translate("list disbursements", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Disbursement, error) { return scanDisbursement(r) })
	if err != nil {
		return nil, translate("list disbursements", err)
	}
	return out, nil
}
