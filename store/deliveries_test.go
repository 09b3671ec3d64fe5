package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lifecycle"
)

func keptDelivery(source, body string, outcome DeliveryOutcome) Delivery {
	return Delivery{Source: source, EventID: "evt_" + body, Outcome: outcome, Status: 200, Body: []byte(body),
		Headers: map[string][]string{"Content-Type": {"application/json"}}, RequestID: "req-" + body}
}

func TestTheDeliveryLogKeepsEachBodyOnceWithItsCount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.store.Deliveries()
	first, err := d.Keep(ctx, keptDelivery("stripe", `{"a":1}`, DeliveryIgnored))
	if err != nil {
		t.Fatal(err)
	}
	refused := keptDelivery("stripe", `{"a":1}`, DeliveryRefused)
	refused.Status, refused.ProblemType, refused.ProblemDetail = 400, "https://x/#invalid", "amount: want a number"
	for range 3 {
		if id, err := d.Keep(ctx, refused); err != nil || id != first {
			t.Fatalf("a repeat = %d, %v; want row %d", id, err, first)
		}
	}
	other, err := d.Keep(ctx, keptDelivery("adyen", `{"a":1}`, DeliveryIgnored))
	if err != nil || other == first {
		t.Fatalf("the same body from another source = %d, %v; want a row of its own", other, err)
	}
	got, err := d.Delivery(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seen != 4 || got.Outcome != DeliveryRefused || got.Status != 400 || got.ProblemDetail != "amount: want a number" ||
		string(got.Body) != `{"a":1}` || got.EventID != `evt_{"a":1}` || got.Headers["Content-Type"][0] != "application/json" ||
		got.LastSeenAt.Before(got.ReceivedAt) {
		t.Fatalf("kept %+v; want seen 4, the latest outcome, the body and headers", got)
	}
	if _, err := d.Delivery(ctx, 1<<40); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown id: %v, want ErrNotFound", err)
	}
}

func TestTheDeliveryLogCapsNewBodiesPerSourceAndHour(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.DeliveryLogCap = 3 })
	ctx := context.Background()
	d := b.store.Deliveries()
	for i := range 3 {
		if _, err := d.Keep(ctx, keptDelivery("stripe", fmt.Sprint(i), DeliveryRefused)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Keep(ctx, keptDelivery("stripe", "3", DeliveryRefused)); !errors.Is(err, ErrDeliveryLogFull) {
		t.Fatalf("a 4th body within the hour: %v, want ErrDeliveryLogFull", err)
	}
	if _, err := d.Keep(ctx, keptDelivery("stripe", "0", DeliveryRefused)); err != nil {
		t.Fatalf("a repeat of a kept body past the cap: %v, want it counted", err)
	}
	if _, err := d.Keep(ctx, keptDelivery("adyen", "0", DeliveryRefused)); err != nil {
		t.Fatalf("another source past stripe's cap: %v", err)
	}
	testkit.Exec(t, b.admin, `UPDATE delivery_log_budget SET window_start = window_start - interval '1 hour'`)
	if _, err := d.Keep(ctx, keptDelivery("stripe", "3", DeliveryRefused)); err != nil {
		t.Fatalf("in the next hour, a new one is kept: %v", err)
	}
}

func TestDeliveriesFilterAndPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.store.Deliveries()
	for i := range 5 {
		outcome := DeliveryIgnored
		if i%2 == 1 {
			outcome = DeliveryRefused
		}
		if _, err := d.Keep(ctx, keptDelivery("stripe", fmt.Sprint(i), outcome)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Keep(ctx, keptDelivery("adyen", "x", DeliveryIgnored)); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, b.admin, `UPDATE delivery_log SET received_at = now() - interval '2 days' WHERE body = '0'`)
	count := func(f DeliveryFilter) int {
		t.Helper()
		l, err := d.Deliveries(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	for name, tc := range map[string]struct {
		f    DeliveryFilter
		want int
	}{
		"all":            {DeliveryFilter{}, 6},
		"source":         {DeliveryFilter{Source: "stripe"}, 5},
		"outcome":        {DeliveryFilter{Source: "stripe", Outcome: DeliveryRefused}, 2},
		"since":          {DeliveryFilter{Source: "stripe", Since: time.Now().Add(-24 * time.Hour)}, 4},
		"until":          {DeliveryFilter{Until: time.Now().Add(-24 * time.Hour)}, 1},
		"nothing":        {DeliveryFilter{Source: "paypal"}, 0},
		"a page":         {DeliveryFilter{Limit: 4}, 4},
		"outcome orphan": {DeliveryFilter{Outcome: DeliveryOrphan}, 0},
	} {
		if got := count(tc.f); got != tc.want {
			t.Errorf("%s: %d deliveries, want %d", name, got, tc.want)
		}
	}
	page, _ := d.Deliveries(ctx, DeliveryFilter{Limit: 4})
	rest, _ := d.Deliveries(ctx, DeliveryFilter{Limit: 4, Before: page[3].ID})
	if len(rest) != 2 || rest[0].ID >= page[3].ID {
		t.Fatalf("the next page after %d: %d deliveries, want the 2 older ones", page[3].ID, len(rest))
	}
}

func TestMarkReplayedKeepsTheFirstRecordingReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.store.Deliveries()
	id, err := d.Keep(ctx, keptDelivery("stripe", "r", DeliveryIgnored))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.MarkReplayed(ctx, id, "ignored", false); err != nil {
		t.Fatal(err)
	}
	got, _ := d.Delivery(ctx, id)
	if !got.ReplayedAt.IsZero() || got.ReplayResult != "ignored" {
		t.Fatalf("after a replay that recorded nothing: %+v", got)
	}
	if err := d.MarkReplayed(ctx, id, "processed", true); err != nil {
		t.Fatal(err)
	}
	first, _ := d.Delivery(ctx, id)
	if err := d.MarkReplayed(ctx, id, "duplicate", true); err != nil {
		t.Fatal(err)
	}
	again, _ := d.Delivery(ctx, id)
	if first.ReplayedAt.IsZero() || !again.ReplayedAt.Equal(first.ReplayedAt) || again.ReplayResult != "duplicate" {
		t.Fatalf("replayed at %v then %v (%s); want the first recording replay's time kept", first.ReplayedAt, again.ReplayedAt, again.ReplayResult)
	}
	if err := d.MarkReplayed(ctx, 1<<40, "processed", true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown id: %v, want ErrNotFound", err)
	}
}

func TestRetentionCountsFromFirstSeenAndPurgesNothingElse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.store.Deliveries()
	if _, err := b.store.Payments().RecordPayment(ctx, newPayment("tx-kept")); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"old-1", "old-2", "edge", "retried", "new"} {
		if _, err := d.Keep(ctx, keptDelivery("stripe", body, DeliveryIgnored)); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Exec(t, b.admin, `UPDATE delivery_log SET received_at = now() - interval '40 days', last_seen_at = now() - interval '40 days'
		WHERE body IN ('old-1', 'old-2', 'retried')`)
	testkit.Exec(t, b.admin, `UPDATE delivery_log SET received_at = now() - interval '29 days 23 hours', last_seen_at = now() - interval '29 days 23 hours' WHERE body = 'edge'`)
	testkit.Exec(t, b.admin, `UPDATE payments SET received_at = now() - interval '400 days'`)
	// A body first seen long ago and sent again since goes all the same:
	// re-sending it cannot keep it for ever.
	if _, err := d.Keep(ctx, keptDelivery("stripe", "retried", DeliveryIgnored)); err != nil {
		t.Fatal(err)
	}
	n, err := d.PurgeDeliveries(ctx, DefaultDeliveryLogRetention)
	if err != nil || n != 3 {
		t.Fatalf("purged %d, %v; want the 3 first seen over 30 days ago", n, err)
	}
	if left := testkit.Count(t, b.admin, `SELECT count(*) FROM delivery_log WHERE body IN ('edge', 'new')`); left != 2 {
		t.Errorf("%d of the 2 deliveries inside the window are left", left)
	}
	if left := testkit.Count(t, b.admin, `SELECT count(*) FROM payments`); left != 1 {
		t.Errorf("%d payments left, want 1: the delivery log purge touches only the log", left)
	}
	if _, err := d.PurgeDeliveries(ctx, 0); err == nil {
		t.Error("a purge without a retention ran")
	}
}

func TestOrphansPastTheirTimeAreKeptOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.OrphanAfter = time.Hour })
	ctx := context.Background()
	p := b.store.Payments()
	for _, tx := range []string{"tx_lost", "tx_young"} {
		if _, err := p.RecordEvent(ctx, PaymentEvent{Source: "stripe", TransactionID: tx, EventID: "evt_" + tx, Kind: lifecycle.Refund,
			RefundID: "re_" + tx, Amount: 100, Payload: []byte(`{"id":"evt_` + tx + `"}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Exec(t, b.admin, `UPDATE payment_attention SET since = now() - interval '2 hours' WHERE transaction_id = 'tx_lost'`)
	d := b.store.Deliveries()
	for i, want := range []int64{1, 0} {
		if n, err := d.SweepOrphans(ctx, DefaultDeliveryLogRetention); err != nil || n != want {
			t.Fatalf("sweep #%d kept %d, %v; want %d", i+1, n, err, want)
		}
	}
	l, err := d.Deliveries(ctx, DeliveryFilter{Outcome: DeliveryOrphan})
	if err != nil || len(l) != 1 || l[0].EventID != "evt_tx_lost" || l[0].Source != "stripe" {
		t.Fatalf("orphans in the log: %+v, %v; want evt_tx_lost alone", l, err)
	}
	counts, err := d.DeliveryCounts(ctx)
	if err != nil || len(counts) != 1 || counts[0] != (DeliveryCount{Source: "stripe", Outcome: DeliveryOrphan, Items: 1}) {
		t.Fatalf("counts %+v, %v", counts, err)
	}
}

func TestTheDeliveryLogJobKeepsOrphansAndPurgesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.OrphanAfter = time.Hour })
	ctx := context.Background()
	d := b.store.Deliveries()
	if _, err := b.store.Payments().RecordEvent(ctx, PaymentEvent{Source: "stripe", TransactionID: "tx_gone", EventID: "evt_gone",
		Kind: lifecycle.Refund, RefundID: "re_gone", Amount: 100, Payload: []byte(`{"id":"evt_gone"}`)}, nil); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, b.admin, `UPDATE payment_attention SET since = now() - interval '2 hours'`)
	for _, body := range []string{"stale", "fresh"} {
		if _, err := d.Keep(ctx, keptDelivery("adyen", body, DeliveryRefused)); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Exec(t, b.admin, `UPDATE delivery_log SET received_at = now() - interval '8 days' WHERE body = 'stale'`)
	w := &DeliveryLogWorker{Deliveries: d, Retention: 7 * 24 * time.Hour, Logger: testkit.Logger()}
	if err := w.Work(ctx, &river.Job[DeliveryLogArgs]{}); err != nil {
		t.Fatal(err)
	}
	left, err := d.Deliveries(ctx, DeliveryFilter{})
	if err != nil || len(left) != 2 {
		t.Fatalf("after the job: %+v, %v; want the fresh refusal and the orphan", left, err)
	}
	if left[0].Outcome != DeliveryOrphan || left[1].Outcome != DeliveryRefused || left[1].BodyBytes != len("fresh") || left[1].Body != nil {
		t.Fatalf("after the job: %+v", left)
	}
	rcfg := &river.Config{}
	if err := w.AddTo(rcfg); err != nil || len(rcfg.PeriodicJobs) != 1 || rcfg.Queues[DeliveryLogQueue].MaxWorkers != 1 {
		t.Fatalf("AddTo: %v, %d periodic jobs, queues %v", err, len(rcfg.PeriodicJobs), rcfg.Queues)
	}
	if err := w.AddTo(rcfg); err == nil {
		t.Fatal("a second AddTo to the same config was accepted")
	}
}
