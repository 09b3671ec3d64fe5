package review_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/review"
	"github.com/paylock/paylock/store"
)

type bundle struct {
	st     *store.Store
	client *payout.Client
	fake   *fakeprovider.Provider
}

func setup(t *testing.T) *bundle {
	t.Helper()
	_, st := paylocktest.MigratedSchema(t)
	fake := fakeprovider.New(fakeprovider.Config{})
	t.Cleanup(fake.Close)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return &bundle{st: st, client: payout.NewClient(srv.URL, nil), fake: fake}
}

func (b *bundle) flagged(t *testing.T, loan string) (store.Disbursement, string) {
	t.Helper()
	ctx := context.Background()
	d, err := b.st.Disbursements().AcceptDisbursement(ctx, store.Disbursement{LoanID: loan, Tranche: 1, Amount: 700, Currency: "EUR", EventID: "evt_" + loan})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.st.Disbursements().FlagForReview(ctx, d.ID, "key retention passed, no payout found"); err != nil {
		t.Fatal(err)
	}
	return d, "disbursement-" + strconv.FormatInt(d.ID, 10)
}

func TestAdoptTakesThePayoutAndTheStatusTheProviderHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d, id := b.flagged(t, "L-paid")
	p, err := b.client.Create(ctx, d.IdempotencyKey, payout.Request{Amount: d.Amount, Currency: d.Currency, Reference: d.Reference()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.fake.Settle(p.ID, "", "paid"); err != nil {
		t.Fatal(err)
	}
	q := review.New(b.st.Review(), b.client)
	it, err := q.Resolve(ctx, id, store.Resolve{Action: store.ActionAdopt, Note: "paid at the provider", Who: "ann"})
	if err != nil || it.Resolution == nil || it.Resolution.Who != "ann" {
		t.Fatalf("adopt: %+v, %v", it, err)
	}
	got, _ := b.st.Disbursements().Disbursement(ctx, "L-paid", 1)
	if got.Status != store.StatusPaid || got.ProviderRef != p.ID || got.ReviewReason != "" {
		t.Errorf("adopted row %+v, want paid with %s", got, p.ID)
	}
}

func TestAdoptAndFailAreRefusedWithoutAProviderAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, id := b.flagged(t, "L-none")
	for name, q := range map[string]*review.Queue{
		"no provider configured": review.New(b.st.Review(), nil),
		"provider unreachable":   review.New(b.st.Review(), payout.NewClient("http://127.0.0.1:1", nil)),
	} {
		for _, action := range []string{store.ActionAdopt, store.ActionFail} {
			_, err := q.Resolve(ctx, id, store.Resolve{Action: action, Note: "n", Who: "ann"})
			var rerr *store.ReviewError
			if !errors.Is(err, store.ErrReviewRefused) || !errors.As(err, &rerr) || rerr.Reason == "" {
				t.Errorf("%s, %s: %v, want a ReviewError wrapping ErrReviewRefused", name, action, err)
			}
		}
	}
	if got, _ := b.st.Disbursements().Disbursement(ctx, "L-none", 1); got.Status != store.StatusPending || got.ReviewReason == "" {
		t.Errorf("row changed: %+v", got)
	}
	// Other resolutions need no provider.
	if _, err := review.New(b.st.Review(), nil).Resolve(ctx, id, store.Resolve{Action: store.ActionRetry, Note: "n", Who: "ann"}); err != nil {
		t.Errorf("retry without a provider: %v", err)
	}
}
