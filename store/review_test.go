package store

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/paylock/paylock/internal/testkit"
)

func TestRecordMismatchKeepsOneItemPerDistinctDeliveryAndLeavesThePaymentAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.store.Payments().RecordPayment(ctx, newPayment("mm-1")); err != nil {
		t.Fatal(err)
	}
	wrong := func(amount int64) Mismatch {
		body := `{"transaction_id":"mm-1","amount":` + strconv.FormatInt(amount, 10) + `,"currency":"EUR"}`
		return Mismatch{TransactionID: "mm-1", Amount: amount, Currency: "EUR", RequestID: "req-" + body, Body: []byte(body)}
	}
	for range 10 { // a PSP retrying one wrong delivery
		if err := b.store.Payments().RecordMismatch(ctx, wrong(2000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.store.Payments().RecordMismatch(ctx, wrong(3000)); err != nil {
		t.Fatal(err)
	}
	items, err := b.store.Review().ReviewItems(ctx, ReviewFilter{Kind: ReviewMismatch})
	if err != nil || len(items) != 2 {
		t.Fatalf("items %+v, %v; want 2", items, err)
	}
	d := items[0].Details
	if items[0].Kind != ReviewMismatch || d["amount"] != int64(2000) || d["stored_amount"] != int64(1999) ||
		d["stored_currency"] != "EUR" || d["source"] != DefaultSource || d["payment_id"] == int64(0) {
		t.Errorf("first item %+v", items[0])
	}
	stored, err := b.store.Payments().Payment(ctx, "", "mm-1")
	if err != nil || stored.Amount != 1999 {
		t.Fatalf("stored payment %+v, %v; want it untouched", stored, err)
	}

	if _, err := b.store.Review().ResolveReview(ctx, items[0].ID, Resolve{Action: ActionRetry, Note: "n", Who: "ops"}); !errors.Is(err, ErrReviewAction) {
		t.Errorf("retry on a mismatch: %v, want ErrReviewAction", err)
	}
	if _, err := b.store.Review().ResolveReview(ctx, items[0].ID, Resolve{Action: ActionAcknowledge, Who: "ops"}); !errors.Is(err, ErrReviewAction) {
		t.Errorf("no note: %v, want ErrReviewAction", err)
	}
	it, err := b.store.Review().ResolveReview(ctx, items[0].ID, Resolve{Action: ActionAcknowledge, Note: "PSP bug, ticket 7", Who: "ops"})
	if err != nil || it.Resolution == nil || it.Resolution.Who != "ops" || it.Resolution.Note != "PSP bug, ticket 7" {
		t.Fatalf("acknowledge: %+v, %v", it, err)
	}
	if _, err := b.store.Review().ResolveReview(ctx, items[0].ID, Resolve{Action: ActionAcknowledge, Note: "again", Who: "ops"}); !errors.Is(err, ErrReviewRefused) {
		t.Errorf("a second acknowledge: %v, want ErrReviewRefused", err)
	}
	open, _ := b.store.Review().ReviewItems(ctx, ReviewFilter{})
	all, _ := b.store.Review().ReviewItems(ctx, ReviewFilter{All: true})
	if len(open) != 1 || open[0].ID != items[1].ID || len(all) != 2 {
		t.Errorf("open %d, all %d; want 1 and 2", len(open), len(all))
	}
	if _, err := b.store.Review().ReviewItem(ctx, "mismatch-999999"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := b.store.Review().ReviewItem(ctx, "bogus-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bogus id: %v", err)
	}
	stats, err := b.store.Review().ReviewQueueStats(ctx)
	if err != nil || stats[ReviewMismatch].Items != 1 || stats[ReviewMismatch].Oldest.IsZero() || stats[ReviewForward].Items != 0 {
		t.Errorf("stats %+v, %v", stats, err)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM review_resolutions`); n != 1 {
		t.Errorf("%d resolutions recorded, want 1", n)
	}
}

func TestReviewResolvesAFlaggedDisbursementOnlyWithTheProvidersWord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	flagged := func(loan string) string {
		d, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement(loan, 1, "evt_"+loan))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.store.Disbursements().FlagForReview(ctx, d.ID, "lookup refused"); err != nil {
			t.Fatal(err)
		}
		return "disbursement-" + strconv.FormatInt(d.ID, 10)
	}
	adopt, fail, retry := flagged("L-a"), flagged("L-f"), flagged("L-r")
	items, err := b.store.Review().ReviewItems(ctx, ReviewFilter{Kind: ReviewDisbursement})
	if err != nil || len(items) != 3 {
		t.Fatalf("items %+v, %v; want 3", items, err)
	}

	if _, err := b.store.Review().ResolveReview(ctx, adopt, Resolve{Action: ActionAdopt, Note: "n", Who: "ops"}); !errors.Is(err, ErrReviewRefused) {
		t.Errorf("adopt without a payout: %v, want ErrReviewRefused", err)
	}
	if _, err := b.store.Review().ResolveReview(ctx, fail, Resolve{Action: ActionFail, Note: "n", Who: "ops"}); !errors.Is(err, ErrReviewRefused) {
		t.Errorf("fail without the provider's word: %v, want ErrReviewRefused", err)
	}
	if _, err := b.store.Review().ResolveReview(ctx, adopt, Resolve{Action: ActionAdopt, Note: "found it", Who: "ops",
		Payout: ProviderPayout{Ref: "po_1", Status: StatusSent}}); err != nil {
		t.Fatal(err)
	}
	if d, _ := b.store.Disbursements().Disbursement(ctx, "L-a", 1); d.Status != StatusSent || d.ProviderRef != "po_1" || d.ReviewReason != "" {
		t.Errorf("adopted row %+v", d)
	}
	if _, err := b.store.Review().ResolveReview(ctx, fail, Resolve{Action: ActionFail, Note: "never paid", Who: "ops",
		Payout: ProviderPayout{NoneFound: true}}); err != nil {
		t.Fatal(err)
	}
	if d, _ := b.store.Disbursements().Disbursement(ctx, "L-f", 1); d.Status != StatusFailed || d.ReviewReason != "" {
		t.Errorf("failed row %+v", d)
	}
	testkit.Exec(t, b.admin, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE kind = 'payout'`)
	if _, err := b.store.Review().ResolveReview(ctx, retry, Resolve{Action: ActionRetry, Note: "provider back", Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	d, _ := b.store.Disbursements().Disbursement(ctx, "L-r", 1)
	if d.Status != StatusPending || d.ReviewReason != "" {
		t.Errorf("retried row %+v", d)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM river_job WHERE kind = 'payout' AND state = 'available' AND args->>'disbursement_id' = $1`,
		strconv.FormatInt(d.ID, 10)); n != 1 {
		t.Errorf("%d available payout jobs for the retried row, want 1", n)
	}
	if _, err := b.store.Review().ResolveReview(ctx, retry, Resolve{Action: ActionRetry, Note: "again", Who: "ops"}); !errors.Is(err, ErrReviewRefused) {
		t.Errorf("a second retry: %v, want ErrReviewRefused", err)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM review_resolutions WHERE who = 'ops'`); n != 3 {
		t.Errorf("%d resolutions, want 3", n)
	}
	if items, _ := b.store.Review().ReviewItems(ctx, ReviewFilter{}); len(items) != 0 {
		t.Errorf("queue %+v, want empty", items)
	}
}

func TestReviewRetriesOrAcknowledgesADiscardedForward(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, id := range []string{"fwd-r1", "fwd-r2", "fwd-r3"} {
		if _, err := b.store.Payments().RecordPaymentForwarded(ctx, newPayment(id), forwardDest); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Exec(t, b.admin, `UPDATE river_job SET state = 'discarded', finalized_at = now() - interval '2 hours', attempt = max_attempts WHERE kind = 'forward' AND args->>'transaction_id' <> 'fwd-r3'`)
	items, err := b.store.Review().ReviewItems(ctx, ReviewFilter{Kind: ReviewForward})
	if err != nil || len(items) != 2 {
		t.Fatalf("items %+v, %v; want 2", items, err)
	}
	stats, _ := b.store.Review().ReviewQueueStats(ctx)
	if st := stats[ReviewForward]; st.Items != 2 || st.Oldest.IsZero() {
		t.Errorf("forward stats %+v", st)
	}
	if _, err := b.store.Review().ResolveReview(ctx, items[0].ID, Resolve{Action: ActionRetry, Note: "receiver fixed", Who: "ann"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Review().ResolveReview(ctx, items[0].ID, Resolve{Action: ActionRetry, Note: "twice", Who: "ann"}); !errors.Is(err, ErrReviewRefused) {
		t.Errorf("retrying a job no longer discarded: %v, want ErrReviewRefused", err)
	}
	if _, err := b.store.Review().ResolveReview(ctx, items[1].ID, Resolve{Action: ActionAcknowledge, Note: "receiver retired", Who: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Review().ResolveReview(ctx, items[1].ID, Resolve{Action: ActionAcknowledge, Note: "twice", Who: "bob"}); !errors.Is(err, ErrReviewRefused) {
		t.Errorf("a second acknowledge: %v, want ErrReviewRefused", err)
	}
	if open, _ := b.store.Review().ReviewItems(ctx, ReviewFilter{}); len(open) != 0 {
		t.Errorf("open %+v, want none", open)
	}
	all, _ := b.store.Review().ReviewItems(ctx, ReviewFilter{All: true})
	if len(all) != 1 || all[0].Resolution == nil || all[0].Resolution.Who != "bob" {
		t.Errorf("all %+v, want the acknowledged job", all)
	}
	var state string
	_ = b.admin.QueryRow(ctx, `SELECT state::text FROM river_job WHERE id = $1`, items[0].Details["job_id"]).Scan(&state)
	if state != "available" {
		t.Errorf("retried job is %s, want available", state)
	}
}

func TestParseReviewIDAcceptsOnlyTheQueuesIDs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		id   string
		kind ReviewKind
		n    int64
	}{
		{"mismatch-12", ReviewMismatch, 12},
		{"disbursement-5", ReviewDisbursement, 5},
		{"forward-33", ReviewForward, 33},
		{"forward-0", "", 0},
		{"forward--1", "", 0},
		{"payment-1", "", 0},
		{"mismatch-", "", 0},
		{"mismatch-1x", "", 0},
		{"", "", 0},
	} {
		kind, n, err := ParseReviewID(c.id)
		if kind != c.kind || n != c.n || (c.kind == "") != errors.Is(err, ErrNotFound) {
			t.Errorf("%q: %q %d %v", c.id, kind, n, err)
		}
	}
}

func TestReviewRetryOfADisbursementWhosePayoutJobIsRunningIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-run", 1, "evt_run"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.Disbursements().FlagForReview(ctx, d.ID, "last attempt"); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, b.admin, `UPDATE river_job SET state = 'running', attempted_at = now(), attempt = 1 WHERE kind = 'payout'`)
	id := "disbursement-" + strconv.FormatInt(d.ID, 10)
	if _, err := b.store.Review().ResolveReview(ctx, id, Resolve{Action: ActionRetry, Note: "n", Who: "ops"}); !errors.Is(err, ErrReviewRefused) {
		t.Fatalf("retry while the job runs: %v, want ErrReviewRefused", err)
	}
	if cur, _ := b.store.Disbursements().Disbursement(ctx, "L-run", 1); cur.ReviewReason == "" {
		t.Errorf("the flag was cleared by a refused retry: %+v", cur)
	}
}
