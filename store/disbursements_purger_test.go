package store

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

// seedRetention puts in b's schema a payment, a disbursement and its loan
// event, all received 100 days ago, a payout event 10 days old and a loan
// event of today.
func seedRetention(t *testing.T, b *bundle) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.store.Payments().RecordPayment(ctx, Payment{TransactionID: "tx-old", Amount: 1, Currency: "JPY",
		Payload: []byte(`{"transaction_id":"tx-old","amount":1,"currency":"JPY"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Disbursements().AcceptDisbursement(ctx, Disbursement{LoanID: "L-old", Tranche: 1, Amount: 1, Currency: "JPY", EventID: "evt_old"}); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, b.admin, `UPDATE payments SET received_at = now() - interval '100 days'`)
	testkit.Exec(t, b.admin, `UPDATE disbursements SET created_at = now() - interval '100 days', status_since = now() - interval '100 days'`)
	testkit.Exec(t, b.admin, `UPDATE webhook_events SET received_at = now() - interval '100 days'`)
	testkit.Exec(t, b.admin, `INSERT INTO webhook_events (source, event_id, subject, received_at) VALUES
			('payouts', 'evt_po_10d', 'po_1', now() - interval '10 days'),
			('loans', 'evt_today', 'L-new-1', now())`)
}

func TestPeriodicPurgeDeletesOldEventsAndLogsWhatItDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedRetention(t, b)
	var logs testkit.LogBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	stop := b.store.Disbursements().StartPurger(context.Background(), 30*24*time.Hour, 20*time.Millisecond, logger)
	testkit.Eventually(t, 10*time.Second, "the periodic purge", func(context.Context) error {
		if n := testkit.Count(t, b.admin, "SELECT count(*) FROM webhook_events"); n != 2 {
			return fmt.Errorf("%d events left", n)
		}
		return nil
	})
	stop()
	var purged int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct {
			Msg       string
			Deleted   int64
			OlderThan string `json:"older_than"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Msg == "purged webhook events" {
			purged++
			if rec.Deleted != 1 || rec.OlderThan != "30d" {
				t.Errorf("logged %s", line)
			}
		}
	}
	if purged != 1 {
		t.Errorf("%d info lines for the purge, want 1 (empty purges log at debug):\n%s", purged, logs.String())
	}
	if testkit.Count(t, b.admin, "SELECT count(*) FROM payments") != 1 || testkit.Count(t, b.admin, "SELECT count(*) FROM disbursements") != 1 {
		t.Error("the periodic purge touched payments or disbursements")
	}
}

func TestJitterSpreadsWaitsAroundTheInterval(t *testing.T) {
	for range 1000 {
		if d := jitter(time.Hour); d < 30*time.Minute || d >= 90*time.Minute {
			t.Fatalf("jitter(1h) = %v, want [30m, 90m)", d)
		}
	}
}
