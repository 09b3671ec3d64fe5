package admin

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// Disbursements is what GET /disbursements/{loan_id}/{tranche} reads;
// *store.Disbursements is one.
type Disbursements interface {
	Disbursement(ctx context.Context, loanID string, tranche int) (store.Disbursement, error)
}

// disbursementView is the JSON of GET /disbursements/{loan_id}/{tranche}.
type disbursementView struct {
	LoanID         string     `json:"loan_id"`
	Tranche        int        `json:"tranche"`
	Amount         int64      `json:"amount"`
	Currency       string     `json:"currency"`
	Status         string     `json:"status"`
	IdempotencyKey string     `json:"idempotency_key"`
	ProviderRef    string     `json:"provider_ref,omitempty"`
	Attempts       int        `json:"attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at,omitempty"` // pending rows only
	FirstAttemptAt *time.Time `json:"first_attempt_at,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	ReviewReason   string     `json:"review_reason,omitempty"`
	EventID        string     `json:"event_id"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	StatusSince    time.Time  `json:"status_since"`
}

func viewOf(d store.Disbursement) disbursementView {
	v := disbursementView{
		LoanID: d.LoanID, Tranche: d.Tranche, Amount: d.Amount, Currency: d.Currency, Status: string(d.Status),
		IdempotencyKey: d.IdempotencyKey, ProviderRef: d.ProviderRef, Attempts: d.Attempts,
		LastError: d.LastError, ReviewReason: d.ReviewReason, EventID: d.EventID,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt, StatusSince: d.StatusSince,
	}
	if d.Status == store.StatusPending {
		v.NextAttemptAt = &d.NextAttemptAt
	}
	if !d.FirstAttemptAt.IsZero() {
		v.FirstAttemptAt = &d.FirstAttemptAt
	}
	return v
}

// disbursement answers GET /disbursements/{loan_id}/{tranche} with the row,
// for operators and the lending platform's reconciliation.
func (a *Admin) disbursement(w http.ResponseWriter, r *http.Request) {
	loanID := r.PathValue("loan_id")
	tranche, err := strconv.ParseInt(r.PathValue("tranche"), 10, 64)
	if err != nil || tranche < 1 || tranche > math.MaxInt32 {
		problem.Write(w, problem.New(http.StatusBadRequest, "malformed", "Malformed request", "tranche",
			"tranche must be an integer from 1 to 2147483647"))
		return
	}
	d, err := a.cfg.Disbursements.Disbursement(r.Context(), loanID, int(tranche))
	if err != nil {
		p := problem.Write(w, err)
		if p.Status >= 500 || !errors.Is(err, store.ErrNotFound) {
			a.log.ErrorContext(r.Context(), "reading a disbursement failed", "loan_id", loanID, "tranche", tranche, "error", err)
		}
		return
	}
	writeJSON(w, http.StatusOK, viewOf(d))
}
