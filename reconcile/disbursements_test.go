package reconcile_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/store"
)

func TestCompareJudgesLagAgainstTheGrace(t *testing.T) {
	now := time.Now()
	pending := store.Disbursement{Status: store.StatusPending, UpdatedAt: now.Add(-30 * time.Minute), StatusSince: now.Add(-2 * time.Hour)}
	sent := store.Disbursement{Status: store.StatusSent, ProviderRef: "po_1", UpdatedAt: now.Add(-30 * time.Minute), StatusSince: now.Add(-30 * time.Minute)}
	oldSent := sent
	oldSent.StatusSince = now.Add(-2 * time.Hour)
	flagged := pending
	flagged.ReviewReason = "lookup found nothing"
	found := func(id, status string) reconcile.Lookup {
		return reconcile.Lookup{Payout: payout.Payout{ID: id, Status: status}}
	}
	notFound := reconcile.Lookup{Err: fmt.Errorf("%w: 404", payout.ErrNotFound)}
	unavailable := reconcile.Lookup{Err: fmt.Errorf("%w: 503", payout.ErrTemporary)}

	for _, c := range []struct {
		name string
		d    store.Disbursement
		r    reconcile.Lookup
		want string // "" for none
	}{
		{"pending, no payout", pending, notFound, ""},
		{"pending, payout, worker touched it within the grace", pending, found("po_1", "pending"), ""},
		{"pending, payout, untouched past the grace", store.Disbursement{Status: store.StatusPending, UpdatedAt: now.Add(-2 * time.Hour)}, found("po_1", "paid"), reconcile.PendingHasPayout},
		{"flagged, payout", flagged, found("po_1", "pending"), reconcile.PendingHasPayout},
		{"flagged, no payout", flagged, notFound, ""},
		{"sent, same payout pending", oldSent, found("po_1", "pending"), ""},
		{"sent, no payout", sent, notFound, reconcile.SentMissing},
		{"sent, another payout", sent, found("po_2", "pending"), reconcile.SentOtherPayout},
		{"sent, paid within the grace", sent, found("po_1", "paid"), ""},
		{"sent, paid past the grace", oldSent, found("po_1", "paid"), reconcile.SettledUnrecorded},
		{"sent, failed past the grace", oldSent, found("po_1", "failed"), reconcile.SettledUnrecorded},
		{"lookup refused", sent, reconcile.Lookup{Err: fmt.Errorf("%w", payout.ErrRefused)}, reconcile.LookupRefused},
		{"lookup unavailable", pending, unavailable, reconcile.LookupFailed},
		{"retried failure, payout", store.Disbursement{Status: store.StatusFailed, Attempts: 2}, found("po_1", "pending"), reconcile.FailedHasPayout},
		{"retried failure, no payout", store.Disbursement{Status: store.StatusFailed, Attempts: 2}, notFound, ""},
	} {
		diff, ok := reconcile.Compare(c.d, c.r, time.Hour, now)
		if ok != (c.want != "") || diff.Kind != c.want {
			t.Errorf("%s: %q %v, want %q", c.name, diff.Kind, ok, c.want)
		}
	}
}
