package admin

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// Disbursements is what the disbursements' routes read (the listing and
// one tranche); *store.Disbursements is one.
type Disbursements interface {
	ListDisbursements(ctx context.Context, l store.DisbursementList) ([]store.Disbursement, error)
	Disbursement(ctx context.Context, loanID string, tranche int) (store.Disbursement, error)
}

// disbursementView is the JSON of GET /admin/api/v1/disbursements/{loan_id}/{tranche}.
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

// trancheOf reads the {tranche} of r's path: an integer from 1 to
// 2147483647.
func trancheOf(r *http.Request) (int, error) {
	tranche, err := strconv.ParseInt(r.PathValue("tranche"), 10, 64)
	if err != nil || tranche < 1 || tranche > math.MaxInt32 {
		return 0, badParam("tranche", "tranche must be an integer from 1 to 2147483647")
	}
	return int(tranche), nil
}

// disbursement answers GET /admin/api/v1/disbursements/{loan_id}/{tranche}
// with the row, for operators and the lending platform's reconciliation.
func (a *Admin) disbursement(w http.ResponseWriter, r *http.Request) {
	tranche, err := trancheOf(r)
	if err != nil {
		problem.Write(w, err)
		return
	}
	d, err := a.cfg.Disbursements.Disbursement(r.Context(), r.PathValue("loan_id"), tranche)
	if err != nil {
		a.storeError(w, r, "reading a disbursement failed", "disbursement", err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(d))
}

// disbursementListOf reads the listing's query: loan_id, status, limit,
// before (the last id of the previous page).
func disbursementListOf(q url.Values) (store.DisbursementList, error) {
	l := store.DisbursementList{Limit: store.DefaultListLimit}
	if err := knownParams(q, "loan_id", "status", "limit", "before"); err != nil {
		return l, err
	}
	l.LoanID = q.Get("loan_id")
	if err := textParam("loan_id", l.LoanID); err != nil {
		return l, err
	}
	if v := q.Get("status"); v != "" {
		if !slices.Contains(store.DisbursementStatuses, store.DisbursementStatus(v)) {
			return l, badParam("status", "status must be pending, sent, paid or failed")
		}
		l.Status = store.DisbursementStatus(v)
	}
	var err error
	if l.Limit, err = limitParam(q); err != nil {
		return l, err
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return l, badParam("before", "before must be a number from 1 to 9223372036854775807")
		}
		l.Before = n
	}
	return l, nil
}

// nextDisbursements is the URL of the page after ds under q, on path
// ("" on the last page).
func nextDisbursements(path string, q url.Values, l store.DisbursementList, ds []store.Disbursement) string {
	if len(ds) == 0 || len(ds) < l.Limit {
		return ""
	}
	next := url.Values{}
	for k, v := range q {
		next[k] = v
	}
	next.Set("before", strconv.FormatInt(ds[len(ds)-1].ID, 10))
	return path + "?" + next.Encode()
}

// disbursementList answers GET /admin/api/v1/disbursements: newest
// first, a page at a time ("next" absent on the last page).
func (a *Admin) disbursementList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	l, err := disbursementListOf(q)
	if err != nil {
		problem.Write(w, err)
		return
	}
	ds, err := a.cfg.Disbursements.ListDisbursements(r.Context(), l)
	if err != nil {
		a.storeError(w, r, "listing disbursements failed", "disbursement", err)
		return
	}
	out := struct {
		Disbursements []disbursementView `json:"disbursements"`
		Next          string             `json:"next,omitempty"`
	}{Disbursements: make([]disbursementView, len(ds)), Next: nextDisbursements(APIBase+"/disbursements", q, l, ds)}
	for i, d := range ds {
		out.Disbursements[i] = viewOf(d)
	}
	writeJSON(w, http.StatusOK, out)
}

// The console's pages.

type disbursementListData struct {
	Form          url.Values
	Statuses      []store.DisbursementStatus
	Disbursements []store.Disbursement
	Next          string
}

func (c *console) disbursementList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := disbursementListData{Form: q, Statuses: store.DisbursementStatuses}
	page := consolePage{Title: "Disbursements", Nav: "disbursements", Data: &d}
	l, err := disbursementListOf(q)
	if err != nil {
		page.Error = problem.From(err).Detail + "."
		c.render(w, r, http.StatusBadRequest, "disbursement-list", page)
		return
	}
	if d.Disbursements, err = c.a.cfg.Disbursements.ListDisbursements(r.Context(), l); err != nil {
		c.storeFailed(w, r, "disbursements", err)
		return
	}
	d.Next = nextDisbursements("/admin/disbursements", q, l, d.Disbursements)
	c.render(w, r, http.StatusOK, "disbursement-list", page)
}

func (c *console) disbursement(w http.ResponseWriter, r *http.Request) {
	tranche, err := trancheOf(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, "Not a tranche: an integer from 1 to 2147483647.")
		return
	}
	d, err := c.a.cfg.Disbursements.Disbursement(r.Context(), r.PathValue("loan_id"), tranche)
	if err != nil {
		c.storeFailed(w, r, "disbursement", err)
		return
	}
	c.render(w, r, http.StatusOK, "disbursement", consolePage{Title: "Disbursement " + d.Reference(), Nav: "disbursements", Data: &d})
}
