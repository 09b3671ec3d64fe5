package store

import (
	"context"
	"strings"
	"testing"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lifecycle"
)

// TestEveryReviewItemNamesItsSubject: each kind of item carries the
// payment it is about (source, transaction id, version and type where
// they apply), a disbursement its loan and tranche; a discarded forward
// names its payment, not only its webhook-id.
func TestEveryReviewItemNamesItsSubject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.store.Payments()
	if _, err := p.RecordPaymentForwarded(ctx, newPayment("subj-rec"), forwardDest); err != nil {
		t.Fatal(err)
	}
	if _, err := p.RecordPayment(ctx, newPayment("subj-over")); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"re_1", "re_2"} { // 2000 refunded of 1999: over-refunded, forwarded as payment.refunded
		if _, err := p.RecordEvent(ctx, PaymentEvent{Source: DefaultSource, TransactionID: "subj-over", EventID: "evt_" + r,
			Kind: lifecycle.Refund, RefundID: r, Amount: 1000, Currency: "EUR"}, b.store.Outbox().ForwardChangeHook(forwardDest)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.RecordMismatch(ctx, Mismatch{TransactionID: "subj-rec", Amount: 5, Currency: "EUR", RequestID: "r", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	d, err := b.store.Disbursements().AcceptDisbursement(ctx, Disbursement{LoanID: "loan-subj", Tranche: 2, Amount: 500, Currency: "JPY", EventID: "evt_loan"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.Disbursements().FlagForReview(ctx, d.ID, "lookup refused"); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, b.admin, `UPDATE river_job SET state = 'discarded', finalized_at = now(), attempt = max_attempts WHERE kind = 'forward'`)

	items, err := b.store.Review().ReviewItems(ctx, ReviewFilter{})
	if err != nil {
		t.Fatal(err)
	}
	type subject struct {
		source, tx string
		version    int
		typ, loan  string
		tranche    int
	}
	got := map[subject]ReviewKind{}
	for _, it := range items {
		got[subject{it.Source, it.TransactionID, it.Version, it.Type, it.LoanID, it.Tranche}] = it.Kind
		if it.Kind == ReviewForward && it.Source != "" && !containsAll(it.Summary, it.Source, it.TransactionID) {
			t.Errorf("a discarded forward's summary does not name its payment: %s", it.Summary)
		}
		// The show path reads the same subject as the listing.
		one, err := b.store.Review().ReviewItem(ctx, it.ID)
		if err != nil || one.Source != it.Source || one.TransactionID != it.TransactionID || one.Version != it.Version ||
			one.Type != it.Type || one.LoanID != it.LoanID || one.Tranche != it.Tranche {
			t.Errorf("ReviewItem(%s) = %+v, %v; the listing says %+v", it.ID, one, err, it)
		}
	}
	for want, kind := range map[subject]ReviewKind{
		{DefaultSource, "subj-rec", 1, "", "", 0}:                     ReviewMismatch,
		{DefaultSource, "subj-rec", 1, ForwardPaymentRecorded, "", 0}: ReviewForward,
		{DefaultSource, "subj-over", 2, "payment.refunded", "", 0}:    ReviewForward,
		{DefaultSource, "subj-over", 3, "payment.refunded", "", 0}:    ReviewForward,
		{DefaultSource, "subj-over", 3, "over_refunded", "", 0}:       ReviewLifecycle,
		{"", "", 0, "", "loan-subj", 2}:                               ReviewDisbursement,
	} {
		if got[want] != kind {
			t.Errorf("no %s item with subject %+v among %+v", kind, want, got)
		}
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
