package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// lending is a test's loan-disbursement world: paylock replicas serving the
// disbursement endpoints (each with its own pool and Redis client, and
// optionally its own payout worker, like serve with PAYLOCK_WORKER=true),
// and a fake payout provider over real HTTP.
type lending struct {
	reps  []*paylocktest.Replica
	dsn   string
	fake  *fakeprovider.Provider
	fakeU string
	admin *store.Store
	// adminURL is the admin listener of the first replica (GET
	// /disbursements/...), without a token.
	adminURL string
}

type lendingOptions struct {
	replicas int
	workers  bool // a payout worker beside each replica
	cfg      handler.Config
	fake     fakeprovider.Config
}

func startLending(t *testing.T, o lendingOptions) *lending {
	t.Helper()
	if o.replicas == 0 {
		o.replicas = 1
	}
	l := &lending{}
	l.dsn, l.admin = paylocktest.MigratedSchema(t)
	l.fake = fakeprovider.New(o.fake)
	fsrv := httptest.NewServer(l.fake)
	t.Cleanup(fsrv.Close)
	t.Cleanup(l.fake.Close)
	l.fakeU = fsrv.URL

	l.reps = startReplicas(t, o.replicas, paylocktest.Options{
		DSN:    l.dsn,
		Config: o.cfg,
		Configure: func(cfg *handler.Config, st *store.Store) {
			cfg.Disbursements = st.Disbursements()
			if cfg.Sources == nil {
				cfg.Sources = lendingSources(nil)
			}
		},
	})
	asrv := httptest.NewServer(admin.New(admin.Config{Disbursements: l.reps[0].Store.Disbursements(), Logger: l.reps[0].Config.Logger}))
	t.Cleanup(asrv.Close)
	l.adminURL = asrv.URL
	if o.workers {
		for _, r := range l.reps {
			l.startWorker(t, r.Store)
		}
	}
	return l
}

func (l *lending) startWorker(t *testing.T, st *store.Store) {
	t.Helper()
	w, err := payout.New(payout.Config{
		ProviderURL:    l.fakeU,
		Timeout:        2 * time.Second,
		PollInterval:   50 * time.Millisecond,
		BackoffInitial: 20 * time.Millisecond,
		BackoffCap:     200 * time.Millisecond,
		Logger:         testkit.Logger(),
	}, st.Disbursements())
	if err != nil {
		t.Fatal(err)
	}
	testkit.Run(t, "payout worker", func(ctx context.Context) error { return w.Run(ctx, st) })
}

// lendingSources are the payments, loans and payouts sources, all verified
// by v (nil: unsigned).
func lendingSources(v handler.Verifier) []handler.Source {
	return []handler.Source{
		handler.PaymentsSource(v),
		{Name: "loans", Provider: handler.ProviderLoans, Verifier: v},
		{Name: "payouts", Provider: handler.ProviderPayouts, Verifier: v},
	}
}

func loanJSON(eventID, loanID string, tranche int, amount int64, currency string) []byte {
	b, _ := json.Marshal(map[string]any{"event_id": eventID, "loan_id": loanID, "tranche": tranche, "amount": amount, "currency": currency})
	return b
}

func approve(t *testing.T, base, eventID, loanID string, tranche int, amount int64) answer {
	t.Helper()
	return post(t, base, "/webhooks/loans", "application/json", loanJSON(eventID, loanID, tranche, amount, "JPY"))
}

func (l *lending) disbursements(t *testing.T, loanID string) int {
	t.Helper()
	return testkit.Count(t, l.admin.Pool(), "SELECT count(*) FROM disbursements WHERE loan_id = $1", loanID)
}

// waitStatus polls GET /disbursements/{loan}/{tranche} until the status.
func (l *lending) waitStatus(t *testing.T, loanID string, tranche int, status string) answer {
	t.Helper()
	var a answer
	testkit.Eventually(t, 15*time.Second, fmt.Sprintf("%s-%d %s", loanID, tranche, status), func(context.Context) error {
		a = get(t, l.adminURL, fmt.Sprintf("/disbursements/%s/%d", loanID, tranche))
		if a.status != http.StatusOK || a.str("status") != status {
			return fmt.Errorf("%d %s", a.status, a.raw)
		}
		return nil
	})
	return a
}

func get(t *testing.T, base, path string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

func wantResult(t *testing.T, a answer, result string) {
	t.Helper()
	if a.status != http.StatusOK || a.str("result") != result {
		t.Fatalf("got %d %s, want 200 %q", a.status, a.raw, result)
	}
}

func TestTheSameLoanEventDeliveredTwiceIsOneDisbursement(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{})
	wantResult(t, approve(t, l.reps[0].URL, "evt_1", "L-1", 1, 500000), "accepted")
	wantResult(t, approve(t, l.reps[0].URL, "evt_1", "L-1", 1, 500000), "duplicate")
	if n := l.disbursements(t, "L-1"); n != 1 {
		t.Fatalf("%d disbursements, want 1", n)
	}
	if n := testkit.Count(t, l.admin.Pool(), "SELECT count(*) FROM webhook_events WHERE source = 'loans'"); n != 1 {
		t.Fatalf("%d events recorded, want 1", n)
	}
	a := get(t, l.adminURL, "/disbursements/L-1/1")
	if a.status != 200 || a.str("status") != "pending" || a.str("idempotency_key") != "disburse-L-1-1" || a.str("event_id") != "evt_1" {
		t.Fatalf("GET: %d %s", a.status, a.raw)
	}
}

func TestTenConcurrentDeliveriesOverThreeReplicasMakeOneDisbursementAndOnePayout(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{replicas: 3, workers: true})
	const deliveries = 10
	answers := make([]answer, deliveries)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range deliveries {
		wg.Go(func() {
			<-start
			answers[i] = approve(t, l.reps[i%3].URL, "evt_storm", "L-storm", 1, 500000)
		})
	}
	close(start)
	wg.Wait()
	byResult := map[string]int{}
	for i, a := range answers {
		switch {
		case a.status == http.StatusOK:
			byResult[a.str("result")]++
		case a.status == http.StatusConflict: // still in progress elsewhere: the sender retries
			wantRetryAfter(t, a)
			for a.status == http.StatusConflict {
				time.Sleep(20 * time.Millisecond)
				a = approve(t, l.reps[i%3].URL, "evt_storm", "L-storm", 1, 500000)
			}
			wantResult(t, a, "duplicate")
			byResult["409 then duplicate"]++
		default:
			t.Fatalf("delivery %d: %d %s", i, a.status, a.raw)
		}
	}
	t.Logf("answers: %v", byResult)
	if byResult["accepted"] != 1 {
		t.Fatalf("accepted %d times, want exactly once (%v)", byResult["accepted"], byResult)
	}
	if n := l.disbursements(t, "L-storm"); n != 1 {
		t.Fatalf("%d disbursements, want 1", n)
	}
	a := l.waitStatus(t, "L-storm", 1, "sent")
	time.Sleep(200 * time.Millisecond) // give the other workers every chance to pay twice
	s := l.fake.Stats()
	if s.Created["L-storm-1"] != 1 || s.Posts != 1 {
		t.Fatalf("provider created %d payouts from %d POSTs, want 1 from 1", s.Created["L-storm-1"], s.Posts)
	}
	if po, _ := l.fake.PayoutByKey("disburse-L-storm-1"); a.str("provider_ref") != po.ID {
		t.Fatalf("provider_ref %q, provider's payout %q", a.str("provider_ref"), po.ID)
	}
}

func TestANewEventIdForTheSameLoanMakesNoSecondDisbursement(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{workers: true})
	base := l.reps[0].URL
	wantResult(t, approve(t, base, "evt_a", "L-2", 1, 500000), "accepted")
	// The platform re-approves the same loan under a new event id.
	wantResult(t, approve(t, base, "evt_b", "L-2", 1, 500000), "duplicate")

	t.Run("WithAnotherAmountIsAMismatchThatChangesNothing", func(t *testing.T) {
		a := approve(t, base, "evt_c", "L-2", 1, 600000)
		wantProblem(t, a, http.StatusUnprocessableEntity)
		if n := testkit.Count(t, l.admin.Pool(), "SELECT count(*) FROM webhook_events WHERE event_id = 'evt_c'"); n != 0 {
			t.Fatalf("a mismatched event was recorded")
		}
		// and it stays a mismatch when redelivered
		wantProblem(t, approve(t, base, "evt_c", "L-2", 1, 600000), http.StatusUnprocessableEntity)
	})
	t.Run("AnEventIdReusedForAnotherLoanIsAMismatch", func(t *testing.T) {
		wantProblem(t, approve(t, base, "evt_a", "L-other", 1, 500000), http.StatusUnprocessableEntity)
	})

	if n := l.disbursements(t, "L-2"); n != 1 {
		t.Fatalf("%d disbursements, want 1", n)
	}
	a := l.waitStatus(t, "L-2", 1, "sent")
	if a.body["amount"].(float64) != 500000 {
		t.Fatalf("amount changed: %s", a.raw)
	}
	if n := l.fake.Created("L-2-1"); n != 1 {
		t.Fatalf("%d payouts, want 1", n)
	}
}

func TestTrancheTwoOfTheSameLoanIsItsOwnDisbursement(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{workers: true})
	base := l.reps[0].URL
	wantResult(t, approve(t, base, "evt_t1", "L-3", 1, 500000), "accepted")
	wantResult(t, approve(t, base, "evt_t2", "L-3", 2, 250000), "accepted")
	if n := l.disbursements(t, "L-3"); n != 2 {
		t.Fatalf("%d disbursements, want 2", n)
	}
	one := l.waitStatus(t, "L-3", 1, "sent")
	two := l.waitStatus(t, "L-3", 2, "sent")
	if one.str("provider_ref") == two.str("provider_ref") || two.str("idempotency_key") != "disburse-L-3-2" {
		t.Fatalf("tranches share a payout: %s / %s", one.raw, two.raw)
	}
	if l.fake.Created("L-3-1") != 1 || l.fake.Created("L-3-2") != 1 {
		t.Fatalf("created %v", l.fake.Stats().Created)
	}
}

func TestTrancheDefaultsToOne(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{})
	a := post(t, l.reps[0].URL, "/webhooks/loans", "application/json",
		[]byte(`{"event_id":"evt_d","loan_id":"L-4","amount":100,"currency":"JPY","note":"kept out"}`))
	wantResult(t, a, "accepted")
	if got, _ := a.body["tranche"].(float64); got != 1 {
		t.Fatalf("tranche %v, want 1", a.body["tranche"])
	}
}

func TestLoanWebhookInputRules(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{})
	for _, tc := range []struct {
		name   string
		body   string
		status int
		field  string
	}{
		{"MissingLoanID", `{"event_id":"e","amount":1,"currency":"JPY"}`, 422, "loan_id"},
		{"EmptyLoanID", `{"event_id":"e","loan_id":" ","amount":1,"currency":"JPY"}`, 422, "loan_id"},
		{"LoanIDWithSpace", `{"event_id":"e","loan_id":"L 1","amount":1,"currency":"JPY"}`, 422, "loan_id"},
		{"MissingEventID", `{"loan_id":"L","amount":1,"currency":"JPY"}`, 422, "event_id"},
		{"TrancheZero", `{"event_id":"e","loan_id":"L","tranche":0,"amount":1,"currency":"JPY"}`, 422, "tranche"},
		{"TrancheNegative", `{"event_id":"e","loan_id":"L","tranche":-1,"amount":1,"currency":"JPY"}`, 422, "tranche"},
		{"TrancheFraction", `{"event_id":"e","loan_id":"L","tranche":1.5,"amount":1,"currency":"JPY"}`, 422, "tranche"},
		{"TrancheTooLarge", `{"event_id":"e","loan_id":"L","tranche":2147483648,"amount":1,"currency":"JPY"}`, 422, "tranche"},
		{"TrancheString", `{"event_id":"e","loan_id":"L","tranche":"1","amount":1,"currency":"JPY"}`, 400, "tranche"},
		{"AmountString", `{"event_id":"e","loan_id":"L","amount":"1","currency":"JPY"}`, 400, "amount"},
		{"AmountZero", `{"event_id":"e","loan_id":"L","amount":0,"currency":"JPY"}`, 422, "amount"},
		{"NullLoanID", `{"event_id":"e","loan_id":null,"amount":1,"currency":"JPY"}`, 400, "loan_id"},
		{"RepeatedKey", `{"event_id":"e","loan_id":"L","loan_id":"M","amount":1,"currency":"JPY"}`, 400, "loan_id"},
		{"CaseVariantKey", `{"event_id":"e","Loan_ID":"L","amount":1,"currency":"JPY"}`, 400, "loan_id"},
		{"MissingCurrency", `{"event_id":"e","loan_id":"L","amount":1}`, 422, "currency"},
		{"TestCurrency", `{"event_id":"e","loan_id":"L","amount":1,"currency":"XTS"}`, 422, "currency"},
		{"TrailingData", `{"event_id":"e","loan_id":"L","amount":1,"currency":"JPY"} {}`, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, l.reps[0].URL, "/webhooks/loans", "application/json", []byte(tc.body))
			wantProblem(t, a, tc.status)
			if a.str("field") != tc.field {
				t.Fatalf("field %q, want %q: %s", a.str("field"), tc.field, a.raw)
			}
		})
	}
	t.Run("NotJSON", func(t *testing.T) {
		wantProblem(t, post(t, l.reps[0].URL, "/webhooks/loans", "text/plain", loanJSON("e", "L", 1, 1, "JPY")), http.StatusUnsupportedMediaType)
	})
	t.Run("WrongMethod", func(t *testing.T) {
		a := get(t, l.reps[0].URL, "/webhooks/loans")
		wantProblem(t, a, http.StatusMethodNotAllowed)
	})
	if n := testkit.Count(t, l.admin.Pool(), "SELECT count(*) FROM disbursements"); n != 0 {
		t.Fatalf("bad input wrote %d disbursements", n)
	}
	if n := testkit.Count(t, l.admin.Pool(), "SELECT count(*) FROM webhook_events"); n != 0 {
		t.Fatalf("bad input wrote %d events", n)
	}
}

func TestSignedLoanWebhookUsesTheWebhookIdAsEventId(t *testing.T) {
	t.Parallel()
	v, secrets := verifier(t, signature.SchemeStandard, testSecret)
	l := startLending(t, lendingOptions{cfg: handler.Config{Sources: lendingSources(v)}})
	body := []byte(`{"loan_id":"L-5","tranche":1,"amount":100,"currency":"JPY"}`)
	send := func(id string) answer {
		req, _ := http.NewRequest(http.MethodPost, l.reps[0].URL+"/webhooks/loans", bytes.NewReader(body))
		for k, vs := range signature.Sign(signature.SchemeStandard, secrets[0], id, time.Now(), body) {
			req.Header[k] = vs
		}
		req.Header.Set("Content-Type", "application/json")
		return do(t, req)
	}
	wantResult(t, send("msg_1"), "accepted")
	wantResult(t, send("msg_1"), "duplicate")
	if n := testkit.Count(t, l.admin.Pool(), "SELECT count(*) FROM webhook_events WHERE event_id = 'msg_1'"); n != 1 {
		t.Fatalf("webhook-id not recorded as the event id")
	}
	unsigned := post(t, l.reps[0].URL, "/webhooks/loans", "application/json", body)
	wantProblem(t, unsigned, http.StatusUnauthorized)
}

func TestReadingADisbursement(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{})
	wantResult(t, approve(t, l.reps[0].URL, "evt_r", "L/with/slashes", 7, 123), "accepted")
	a := get(t, l.adminURL, "/disbursements/L%2Fwith%2Fslashes/7")
	if a.status != 200 || a.str("loan_id") != "L/with/slashes" || a.str("currency") != "JPY" || a.str("status") != "pending" {
		t.Fatalf("GET an escaped loan id: %d %s", a.status, a.raw)
	}
	wantProblem(t, get(t, l.adminURL, "/disbursements/L-none/1"), http.StatusNotFound)
	wantProblem(t, get(t, l.adminURL, "/disbursements/L-1/first"), http.StatusBadRequest)
	wantProblem(t, get(t, l.adminURL, "/disbursements/L-1/0"), http.StatusBadRequest)
}

func TestWithoutDisbursementsTheEndpointsAreNotServed(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{})
	wantProblem(t, approve(t, r.URL, "evt", "L", 1, 1), http.StatusNotFound)
}

func TestLoanWebhooksWithoutTheLockStillMakeOneDisbursement(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{replicas: 2, cfg: handler.Config{NoLock: true}})
	answers := make([]answer, 8)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			answers[i] = approve(t, l.reps[i%2].URL, fmt.Sprintf("evt_nolock_%d", i%3), "L-nolock", 1, 700)
		})
	}
	wg.Wait()
	accepted := 0
	for _, a := range answers {
		if a.status != http.StatusOK {
			t.Fatalf("%d %s", a.status, a.raw)
		}
		if a.str("result") == "accepted" {
			accepted++
		}
	}
	if accepted != 1 || l.disbursements(t, "L-nolock") != 1 {
		t.Fatalf("accepted %d, rows %d; want 1 and 1", accepted, l.disbursements(t, "L-nolock"))
	}
}

func TestLoanEmptyCurrencyIsNeverDefaulted(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{cfg: handler.Config{DefaultCurrency: "EUR"}})
	a := post(t, l.reps[0].URL, "/webhooks/loans", "application/json", []byte(`{"event_id":"e-1","loan_id":"L-cur","amount":1,"currency":""}`))
	wantProblem(t, a, http.StatusUnprocessableEntity)
	if a.str("field") != "currency" {
		t.Fatalf("field %q: %s", a.str("field"), a.raw)
	}
	wantResult(t, post(t, l.reps[0].URL, "/webhooks/loans", "application/json", []byte(`{"event_id":"e-2","loan_id":"L-cur","amount":1}`)), "accepted")
}
