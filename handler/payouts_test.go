package handler_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/store"
)

func statusJSON(eventID, payoutID, status, reason string) []byte {
	b, _ := json.Marshal(map[string]string{"event_id": eventID, "payout_id": payoutID, "status": status, "failure_reason": reason})
	return b
}

func notify(t *testing.T, base, eventID, payoutID, status string) answer {
	t.Helper()
	return post(t, base, "/webhooks/payouts", "application/json", statusJSON(eventID, payoutID, status, ""))
}

// sentPayout approves a loan and waits until the worker has it sent; it
// returns the provider's payout id.
func (l *lending) sentPayout(t *testing.T, loanID string) string {
	t.Helper()
	wantResult(t, approve(t, l.reps[0].URL, "evt_"+loanID, loanID, 1, 500000), "accepted")
	return l.waitStatus(t, loanID, 1, "sent").str("provider_ref")
}

func TestPaidThenALateFailedStaysPaid(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{workers: true})
	po := l.sentPayout(t, "L-paid")
	base := l.reps[0].URL

	wantResult(t, notify(t, base, "pe_1", po, "paid"), "applied")
	wantResult(t, notify(t, base, "pe_2", po, "failed"), "ignored")
	wantResult(t, notify(t, base, "pe_1", po, "paid"), "duplicate")
	a := l.waitStatus(t, "L-paid", 1, "paid")
	if a.str("last_error") != "" {
		t.Fatalf("the ignored failure touched the row: %s", a.raw)
	}
}

func TestFirstTerminalStatusWins(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{workers: true})
	po := l.sentPayout(t, "L-failed")
	base := l.reps[0].URL
	a := post(t, base, "/webhooks/payouts", "application/json", statusJSON("pe_f", po, "failed", "account closed"))
	wantResult(t, a, "applied")
	wantResult(t, notify(t, base, "pe_p", po, "paid"), "ignored")
	got := l.waitStatus(t, "L-failed", 1, "failed")
	if got.str("last_error") != "account closed" {
		t.Fatalf("failure reason not kept: %s", got.raw)
	}
}

func TestStatusBeforeProviderRefIsSavedIs404ThenAppliedOnRetry(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{workers: true})
	// The provider creates the payout and notifies at once, before the
	// worker has its answer, let alone saved provider_ref.
	release := l.fake.Hold()
	defer release()
	wantResult(t, approve(t, l.reps[0].URL, "evt_early", "L-early", 1, 500000), "accepted")
	var po fakeprovider.Payout
	testkit.WaitFor(t, 10*time.Second, "the worker to reach the provider", func() bool {
		var ok bool
		po, ok = l.fake.PayoutByKey("disburse-L-early-1")
		return ok
	})

	a := notify(t, l.reps[0].URL, "pe_early", po.ID, "paid")
	wantProblem(t, a, http.StatusNotFound)
	if a.str("field") != "payout_id" {
		t.Fatalf("404 without the field: %s", a.raw)
	}
	if n := testkit.Count(t, l.admin.Pool(), "SELECT count(*) FROM webhook_events WHERE event_id = 'pe_early'"); n != 0 {
		t.Fatalf("the 404'd event was recorded; its retry would be a duplicate")
	}

	release()
	l.waitStatus(t, "L-early", 1, "sent")
	wantResult(t, notify(t, l.reps[0].URL, "pe_early", po.ID, "paid"), "applied")
	l.waitStatus(t, "L-early", 1, "paid")
}

func TestProviderWebhooksDuplicatedAndDroppedAnswersStillConverge(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{replicas: 2, workers: true, fake: fakeprovider.Config{
		SettleStatuses: []string{"paid"},
		Duplicates:     2,
		DropRate:       0.5,
	}})
	l.fake.DropNext(1) // the first answer is lost: the webhook may well come first
	// The fake calls back to replica 1's payout endpoint.
	l.fake.SetCallbackURL(l.reps[1].URL + "/webhooks/payouts")
	for _, loan := range []string{"L-e1", "L-e2", "L-e3"} {
		wantResult(t, approve(t, l.reps[0].URL, "evt_"+loan, loan, 1, 500000), "accepted")
	}
	for _, loan := range []string{"L-e1", "L-e2", "L-e3"} {
		l.waitStatus(t, loan, 1, "paid")
		if n := l.fake.Created(loan + "-1"); n != 1 {
			t.Fatalf("%s: %d payouts", loan, n)
		}
	}
	s := l.fake.Stats()
	t.Logf("webhook answers by status: %v", s.WebhookStatuses)
	if n := testkit.Count(t, l.admin.Pool(), "SELECT count(*) FROM webhook_events WHERE source = $1", store.SourcePayouts); n != 3 {
		t.Fatalf("%d payout events recorded, want 3 (one per payout, duplicates dropped)", n)
	}
}

func TestPayoutWebhookInputRules(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{})
	for _, tc := range []struct {
		name   string
		body   string
		status int
		field  string
	}{
		{"UnknownStatus", `{"event_id":"e","payout_id":"po_1","status":"sent"}`, 422, "status"},
		{"MissingPayoutID", `{"event_id":"e","status":"paid"}`, 422, "payout_id"},
		{"MissingEventID", `{"payout_id":"po_1","status":"paid"}`, 422, "event_id"},
		{"StatusNumber", `{"event_id":"e","payout_id":"po_1","status":2}`, 400, "status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, l.reps[0].URL, "/webhooks/payouts", "application/json", []byte(tc.body))
			wantProblem(t, a, tc.status)
			if a.str("field") != tc.field {
				t.Fatalf("field %q, want %q", a.str("field"), tc.field)
			}
		})
	}
	if n := testkit.Count(t, l.admin.Pool(), "SELECT count(*) FROM webhook_events"); n != 0 {
		t.Fatalf("bad input recorded %d events", n)
	}
}
