package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

func TestDestinationStatsCountBacklogFailuresAndLagPerDestination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	stats := func(t *testing.T) map[string]DestinationStats {
		t.Helper()
		got, err := b.store.Outbox().DestinationStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]DestinationStats{}
		for _, d := range got {
			m[d.Destination] = d
		}
		return m
	}
	if got := stats(t); len(got) != 0 {
		t.Fatalf("no jobs: %+v, want none", got)
	}

	for i, dest := range []string{"ledger", "ledger", "ledger", "analytics", "analytics"} {
		p := newPayment("dst-" + dest + "-" + string(rune('a'+i)))
		p.Source = "stripe"
		if _, err := b.store.Payments().RecordPaymentForwarded(ctx, p, dest); err != nil {
			t.Fatal(err)
		}
	}
	// ledger: one job failed twice (retryable, the older error first), one
	// discarded an hour ago, one discarded two days ago, created 10
	// minutes ago... and analytics: one done, one waiting.
	testkit.Exec(t, b.admin, `UPDATE river_job SET state = 'retryable', attempt = 2, created_at = now() - interval '10 minutes',
		errors = ARRAY['{"at":"2026-01-01T00:00:00Z","attempt":1,"error":"old"}',
			'{"at":"2026-01-02T00:00:00Z","attempt":2,"error":"forward: POST https://u:p@ledger.internal/hooks: refused\nsecond line"}']::jsonb[]
		WHERE args->>'transaction_id' = 'dst-ledger-a'`)
	testkit.Exec(t, b.admin, `UPDATE river_job SET state = 'discarded', finalized_at = now() - interval '1 hour', attempt = max_attempts,
		errors = ARRAY['{"at":"2025-12-31T00:00:00Z","attempt":1,"error":"older still"}']::jsonb[]
		WHERE args->>'transaction_id' = 'dst-ledger-b'`)
	testkit.Exec(t, b.admin, `UPDATE river_job SET state = 'discarded', finalized_at = now() - interval '2 days', attempt = max_attempts
		WHERE args->>'transaction_id' = 'dst-ledger-c'`)
	testkit.Exec(t, b.admin, `UPDATE river_job SET state = 'completed', finalized_at = now(), attempt = 1
		WHERE args->>'transaction_id' = 'dst-analytics-d'`)
	// A job whose destination no configuration names any more.
	testkit.Exec(t, b.admin, `INSERT INTO river_job (kind, args, state, max_attempts, queue, priority)
		VALUES ('forward', '{"id":"pay_x","type":"payment.recorded","destination":"gone"}', 'available', 5, 'forward', 1)`)

	got := stats(t)
	if len(got) != 3 {
		t.Fatalf("stats %+v: want ledger, analytics and gone", got)
	}
	l := got["ledger"]
	wantErr := "forward: POST https://xxxxx@ledger.internal/hooks: refused"
	if l.Backlog != 1 || l.Failing != 1 || l.Discarded != 1 || l.LastError != wantErr ||
		!l.LastErrorAt.Equal(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)) || l.Lag < 9*time.Minute || l.Lag > 11*time.Minute {
		t.Errorf("ledger %+v: want backlog 1, failing 1, 1 discarded in 24h, lag ~10m, last error %q", l, wantErr)
	}
	if a := got["analytics"]; a.Backlog != 1 || a.Failing != 0 || a.Discarded != 0 || a.LastError != "" || a.Lag > time.Minute {
		t.Errorf("analytics %+v: want backlog 1 (the completed one not counted), nothing failing, a short lag", a)
	}
	if g := got["gone"]; g.Backlog != 1 {
		t.Errorf("gone %+v: want its job counted", g)
	}

	t.Run("ADoneDestinationIsAbsent", func(t *testing.T) {
		testkit.Exec(t, b.admin, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE args->>'destination' = 'analytics'`)
		if _, ok := stats(t)["analytics"]; ok {
			t.Error("analytics has every job completed: want no row")
		}
	})
}

func TestLastErrorLineKeepsOneShortLineWithoutCredentials(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                                      "",
		"forward: the receiver answered 503":    "forward: the receiver answered 503",
		"boom\n  goroutine 1 [running]:":        "boom",
		"publish to nats://alice:s3cret@h:4222": "publish to nats://xxxxx@h:4222",
		strings.Repeat("é", 200):                strings.Repeat("é", 159) + "…",
	} {
		if got := LastErrorLine(in); got != want {
			t.Errorf("LastErrorLine(%.30q) = %.40q, want %.40q", in, got, want)
		}
	}
}
