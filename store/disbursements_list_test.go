package store

import (
	"context"
	"slices"
	"testing"

	"github.com/paylock/paylock/internal/testkit"
)

func TestListDisbursementsPagesNewestFirstAndFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i, d := range []Disbursement{newDisbursement("L-1", 1, "e1"), newDisbursement("L-1", 2, "e2"), newDisbursement("L-2", 1, "e3")} {
		if _, err := b.store.Disbursements().AcceptDisbursement(ctx, d); err != nil {
			t.Fatal(i, err)
		}
	}
	testkit.Exec(t, b.admin, `UPDATE disbursements SET status = 'failed' WHERE loan_id = 'L-2'`)
	names := func(ds []Disbursement) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Reference())
		}
		return out
	}
	list := func(l DisbursementList) []Disbursement {
		t.Helper()
		ds, err := b.store.Disbursements().ListDisbursements(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	first := list(DisbursementList{Limit: 2})
	if got := names(first); !slices.Equal(got, []string{"L-2-1", "L-1-2"}) {
		t.Fatalf("first page %v", got)
	}
	if got := names(list(DisbursementList{Limit: 2, Before: first[1].ID})); !slices.Equal(got, []string{"L-1-1"}) {
		t.Fatalf("second page %v", got)
	}
	if got := names(list(DisbursementList{LoanID: "L-1"})); !slices.Equal(got, []string{"L-1-2", "L-1-1"}) {
		t.Fatalf("loan L-1: %v", got)
	}
	if got := names(list(DisbursementList{Status: StatusFailed})); !slices.Equal(got, []string{"L-2-1"}) {
		t.Fatalf("failed: %v", got)
	}
}
