package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

func TestPurgeDeletesOnlyWebhookEventsPastTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// Old loan and payout events with the payment and disbursements they
	// brought, all received long ago; and recent events.
	if _, err := b.store.Payments().RecordPayment(ctx, newPayment("tx-old")); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement(fmt.Sprintf("L-old-%d", i), 1, fmt.Sprintf("evt_old_%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Exec(t, b.admin, `INSERT INTO webhook_events (source, event_id, subject, received_at) VALUES
		('payouts', 'evt_po_old', 'po_1', now() - interval '200 days'),
		('payouts', 'evt_po_edge', 'po_2', now() - interval '89 days 23 hours'),
		('loans', 'evt_new', 'L-new-1', now() - interval '1 day')`)
	testkit.Exec(t, b.admin, `UPDATE webhook_events SET received_at = now() - interval '91 days' WHERE event_id LIKE 'evt_old_%'`)
	testkit.Exec(t, b.admin, `UPDATE payments SET received_at = now() - interval '400 days'`)
	testkit.Exec(t, b.admin, `UPDATE disbursements SET created_at = now() - interval '400 days', status_since = now() - interval '400 days'`)

	// A batch of 2 makes the 6 old rows take several statements.
	p, err := b.store.Disbursements().PurgeWebhookEvents(ctx, 90*24*time.Hour, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.Deleted != 6 {
		t.Errorf("deleted %d events, want the 6 older than 90 days", p.Deleted)
	}
	if age := time.Since(p.Before); age < 90*24*time.Hour-time.Minute || age > 90*24*time.Hour+time.Minute {
		t.Errorf("cutoff %v is %v ago, want 90 days", p.Before, age)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM webhook_events WHERE event_id IN ('evt_po_edge', 'evt_new')`); n != 2 {
		t.Errorf("%d of the 2 events inside the window are left", n)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM webhook_events`); n != 2 {
		t.Errorf("%d events left, want 2", n)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM payments`); n != 1 {
		t.Errorf("%d payments left, want 1: payments are never purged", n)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM disbursements`); n != 5 {
		t.Errorf("%d disbursements left, want 5: disbursements are never purged", n)
	}

	again, err := b.store.Disbursements().PurgeWebhookEvents(ctx, 90*24*time.Hour, 0)
	if err != nil || again.Deleted != 0 {
		t.Errorf("a second purge deleted %d (%v), want 0", again.Deleted, err)
	}

	// A redelivery of a purged loan event is a new event for the store, and
	// still no second disbursement.
	_, err = b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-old-0", 1, "evt_old_0"))
	if !errors.Is(err, ErrDuplicate) || errors.Is(err, ErrEventSeen) {
		t.Errorf("redelivered purged event: %v, want a duplicate of the tranche (not of the event)", err)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM disbursements WHERE loan_id = 'L-old-0'`); n != 1 {
		t.Errorf("%d disbursements for L-old-0 after the redelivery", n)
	}
}

func TestPurgeRefusesAWindowUnderSevenDays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	testkit.Exec(t, b.admin, `INSERT INTO webhook_events (source, event_id, subject, received_at) VALUES
		('loans', 'evt_a', 'L-a-1', now() - interval '6 days 12 hours'),
		('loans', 'evt_b', 'L-b-1', now() - interval '8 days')`)

	for _, d := range []time.Duration{0, time.Hour, 6*24*time.Hour + 23*time.Hour} {
		if p, err := b.store.Disbursements().PurgeWebhookEvents(ctx, d, 0); !errors.Is(err, ErrRetentionTooShort) || p.Deleted != 0 {
			t.Errorf("purge older than %v: deleted %d, %v; want ErrRetentionTooShort", d, p.Deleted, err)
		}
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM webhook_events`); n != 2 {
		t.Fatalf("a refused purge deleted rows: %d left", n)
	}
	p, err := b.store.Disbursements().PurgeWebhookEvents(ctx, MinEventRetention, 0)
	if err != nil || p.Deleted != 1 {
		t.Fatalf("purge older than 7 days: deleted %d, %v; want 1", p.Deleted, err)
	}
}

func TestPurgeUsesTheReceivedAtIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testkit.Exec(t, b.admin, `SET enable_seqscan = off`)
	var plan string
	rows, err := b.admin.Query(context.Background(), "EXPLAIN "+purgeBatchSQL, time.Now(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan += line + "\n"
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "webhook_events_received_at_idx") {
		t.Fatalf("a purge batch does not use webhook_events_received_at_idx:\n%s", plan)
	}
}
