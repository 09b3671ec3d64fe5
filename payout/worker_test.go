package payout_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/store"
)

// bundle is one test's world: a migrated schema, a store on it, and a fake
// provider over real HTTP.
type bundle struct {
	dsn   string
	store *store.Store
	fake  *fakeprovider.Provider
	url   string
}

func setup(t *testing.T, fcfg fakeprovider.Config) *bundle {
	t.Helper()
	dsn, st := paylocktest.MigratedSchema(t)
	fake := fakeprovider.New(fcfg)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	t.Cleanup(fake.Close)
	return &bundle{dsn: dsn, store: st, fake: fake, url: srv.URL}
}

// openStore opens a store of its own on dsn, as another process would.
func openStore(t *testing.T, dsn string) *store.Store {
	t.Helper()
	return paylocktest.OpenStore(t, store.Config{URL: dsn})
}

// events collects what workers report.
type events struct {
	mu  sync.Mutex
	all []payout.Event
}

func (e *events) observe(ev payout.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

// until waits for an attempt with outcome final to be reported (the worker
// reports an attempt just after its row is written, so a test that saw the
// row can be ahead of the report), then returns the outcomes and their
// events so far.
func (e *events) until(t *testing.T, final payout.Outcome) ([]payout.Outcome, []payout.Event) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, "an attempt reported "+string(final), func() bool {
		return slices.Contains(e.outcomes(), final)
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	all := slices.Clone(e.all)
	var out []payout.Outcome
	for _, ev := range all {
		out = append(out, ev.Outcome)
	}
	return out, all
}

func (e *events) outcomes() []payout.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []payout.Outcome
	for _, ev := range e.all {
		out = append(out, ev.Outcome)
	}
	return out
}

// startWorker runs a worker with a pool of its own, as a separate process
// would, with quick test timings, until the test ends.
func (b *bundle) startWorker(t *testing.T, tweak func(*payout.Config)) *payout.Worker {
	t.Helper()
	cfg := payout.Config{
		ProviderURL:    b.url,
		Timeout:        2 * time.Second,
		PollInterval:   50 * time.Millisecond,
		BackoffInitial: 20 * time.Millisecond,
		BackoffCap:     200 * time.Millisecond,
		Logger:         testkit.Logger(),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	st := openStore(t, b.dsn)
	w, err := payout.New(cfg, st.Disbursements())
	if err != nil {
		t.Fatal(err)
	}
	testkit.Run(t, "worker "+w.ID(), func(ctx context.Context) error { return w.Run(ctx, st) })
	return w
}

func (b *bundle) accept(t *testing.T, loanID string, tranche int) store.Disbursement {
	t.Helper()
	d, err := b.store.Disbursements().AcceptDisbursement(context.Background(), store.Disbursement{
		LoanID: loanID, Tranche: tranche, Amount: 500000, Currency: "JPY",
		EventID: fmt.Sprintf("evt-%s-%d", loanID, tranche),
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// waitFor polls the row until cond holds.
func (b *bundle) waitFor(t *testing.T, loanID string, tranche int, what string, cond func(store.Disbursement) bool) store.Disbursement {
	t.Helper()
	var d store.Disbursement
	testkit.Eventually(t, 15*time.Second, fmt.Sprintf("%s-%d %s", loanID, tranche, what), func(ctx context.Context) (err error) {
		if d, err = b.store.Disbursements().Disbursement(ctx, loanID, tranche); err != nil {
			return err
		}
		if !cond(d) {
			return fmt.Errorf("row %+v", d)
		}
		return nil
	})
	return d
}

func (b *bundle) waitSent(t *testing.T, loanID string, tranche int) store.Disbursement {
	t.Helper()
	return b.waitFor(t, loanID, tranche, "sent", func(d store.Disbursement) bool { return d.Status == store.StatusSent })
}

func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	testkit.Exec(t, b.store.Pool(), sql, args...)
}

// wantOnePayoutWithOneKey checks the provider created exactly one payout
// for the tranche, only ever under its fixed key, and that the row holds it.
func (b *bundle) wantOnePayoutWithOneKey(t *testing.T, d store.Disbursement) fakeprovider.Stats {
	t.Helper()
	s := b.fake.Stats()
	ref := d.Reference()
	if s.Created[ref] != 1 {
		t.Fatalf("provider created %d payouts for %s, want 1", s.Created[ref], ref)
	}
	if want := []string{d.IdempotencyKey}; !reflect.DeepEqual(s.KeysPerRef[ref], want) {
		t.Fatalf("keys sent for %s: %v, want only %v", ref, s.KeysPerRef[ref], want)
	}
	po, ok := b.fake.PayoutByKey(d.IdempotencyKey)
	if !ok || po.ID != d.ProviderRef {
		t.Fatalf("row's provider_ref %q, provider's payout %+v", d.ProviderRef, po)
	}
	return s
}

func TestPendingDisbursementIsPaidOutOnceWithItsFixedKey(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	b.startWorker(t, nil)
	b.accept(t, "L-1", 1)
	d := b.waitSent(t, "L-1", 1)
	s := b.wantOnePayoutWithOneKey(t, d)
	if s.Posts != 1 || d.Attempts != 1 || d.IdempotencyKey != "disburse-L-1-1" {
		t.Fatalf("posts %d, row %+v", s.Posts, d)
	}
}

func TestProviderTimeoutThenRetryWithTheSameKeyMakesOnePayout(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	// The provider creates the payout but answers after the worker gave up.
	b.fake.DelayNext(1, 800*time.Millisecond)
	var ev events
	b.startWorker(t, func(c *payout.Config) {
		c.Timeout = 200 * time.Millisecond
		c.Observe = ev.observe
	})
	b.accept(t, "L-timeout", 1)
	d := b.waitSent(t, "L-timeout", 1)
	s := b.wantOnePayoutWithOneKey(t, d)
	if s.Posts < 2 || d.Attempts < 2 {
		t.Fatalf("posts %d attempts %d: the timed-out call was not retried", s.Posts, d.Attempts)
	}
	if got, _ := ev.until(t, payout.OutcomeSent); got[0] != payout.OutcomeRetry || got[len(got)-1] != payout.OutcomeSent {
		t.Fatalf("outcomes %v, want retry first and sent last", got)
	}
	if d.LastError == "" {
		t.Errorf("last_error of the timed-out attempt was not kept")
	}
}

func TestAnswerDroppedAfterPayoutCreatedMakesOnePayout(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	b.fake.DropNext(1)
	b.startWorker(t, nil)
	b.accept(t, "L-drop", 1)
	d := b.waitSent(t, "L-drop", 1)
	s := b.wantOnePayoutWithOneKey(t, d)
	if s.Dropped != 1 || s.Posts != 2 || s.Replays != 1 {
		t.Fatalf("dropped %d posts %d replays %d; want the retry answered by a replay", s.Dropped, s.Posts, s.Replays)
	}
}

func TestRetryableAnswersKeepTheRowPendingAndTheKeyFixed(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	b.fake.FailNext(1, http.StatusServiceUnavailable)
	b.fake.FailNext(1, http.StatusTooManyRequests)
	b.fake.FailNext(1, http.StatusConflict)
	b.startWorker(t, nil)
	b.accept(t, "L-retry", 1)
	d := b.waitSent(t, "L-retry", 1)
	b.wantOnePayoutWithOneKey(t, d)
	if d.Attempts != 4 {
		t.Fatalf("attempts %d, want 4 (three refusals to retry, then success)", d.Attempts)
	}
}

func TestProviderRefusalFailsTheDisbursementWithoutRetrying(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	b.fake.FailNext(1, http.StatusBadRequest)
	b.startWorker(t, nil)
	b.accept(t, "L-refused", 1)
	d := b.waitFor(t, "L-refused", 1, "failed", func(d store.Disbursement) bool { return d.Status == store.StatusFailed })
	if d.LastError == "" || d.ProviderRef != "" || d.Attempts != 1 {
		t.Fatalf("failed row %+v", d)
	}
	b.waitJobState(t, d.ID, 5*time.Second, "completed") // River retries it no more
	if s := b.fake.Stats(); s.Posts != 1 || s.Created["L-refused-1"] != 0 {
		t.Fatalf("posts %d created %d after a refusal", s.Posts, s.Created["L-refused-1"])
	}
}

func TestTwoWorkersRacingCallTheProviderOncePerRowAtATime(t *testing.T) {
	t.Parallel()
	// A slow provider keeps calls in flight while the other worker looks
	// for work.
	b := setup(t, fakeprovider.Config{Delay: 30 * time.Millisecond})
	var ev [2]events
	for i := range ev {
		b.startWorker(t, func(c *payout.Config) { c.Concurrency = 4; c.Observe = ev[i].observe })
	}
	const rows = 24
	for i := range rows {
		b.accept(t, fmt.Sprintf("L-race-%d", i), 1+i%2)
	}
	for i := range rows {
		b.wantOnePayoutWithOneKey(t, b.waitSent(t, fmt.Sprintf("L-race-%d", i), 1+i%2))
	}
	s := b.fake.Stats()
	for key, n := range s.MaxInFlight {
		if n != 1 {
			t.Errorf("key %s had %d calls in flight at once", key, n)
		}
	}
	for key, n := range s.PostsPerKey {
		if n != 1 {
			t.Errorf("key %s was posted %d times, want once", key, n)
		}
	}
	// Every row is sent; the last reports may still be on their way.
	testkit.WaitFor(t, 10*time.Second, "every attempt reported", func() bool {
		return len(ev[0].outcomes())+len(ev[1].outcomes()) >= rows
	})
	a, b2 := ev[0].outcomes(), ev[1].outcomes()
	for _, o := range append(a, b2...) {
		if o != payout.OutcomeSent {
			t.Errorf("outcome %s, want only sent", o)
		}
	}
	if len(a)+len(b2) != rows {
		t.Errorf("%d rows processed, want %d", len(a)+len(b2), rows)
	}
	t.Logf("rows paid out by worker 1: %d, by worker 2: %d", len(a), len(b2))
}

func TestAnAttemptAfterACrashedOneUsesTheSameKey(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	d := b.accept(t, "L-crash", 1)
	// An attempt begins, reaches the provider, and its worker dies before
	// saving the answer.
	if _, err := b.store.Disbursements().BeginAttempt(context.Background(), d.ID); err != nil {
		t.Fatal(err)
	}
	first, err := payout.NewClient(b.url, nil).Create(context.Background(), d.IdempotencyKey,
		payout.Request{Amount: d.Amount, Currency: d.Currency, Reference: d.Reference()})
	if err != nil {
		t.Fatal(err)
	}
	b.startWorker(t, nil)
	got := b.waitSent(t, "L-crash", 1)
	if got.ProviderRef != first.ID || got.Attempts != 2 {
		t.Fatalf("row %+v, want the crashed attempt's payout %s adopted on attempt 2", got, first.ID)
	}
	b.wantOnePayoutWithOneKey(t, got)
}

// ageFirstAttempt makes a pending row look as if its first attempt was long
// ago.
func (b *bundle) ageFirstAttempt(t *testing.T, d store.Disbursement, ago time.Duration) {
	t.Helper()
	b.exec(t, `UPDATE disbursements SET first_attempt_at = now() - $2 * interval '1 millisecond' WHERE id = $1`,
		d.ID, ago.Milliseconds())
}

// waitJobState waits until disbursement id's payout job is in one of
// states (within timeout).
func (b *bundle) waitJobState(t *testing.T, id int64, timeout time.Duration, states ...string) {
	t.Helper()
	testkit.Eventually(t, timeout, fmt.Sprintf("the payout job of %d %v", id, states), func(ctx context.Context) error {
		var state string
		err := b.store.Pool().QueryRow(ctx, `SELECT state::text FROM river_job WHERE kind = $1 AND (args->>'disbursement_id')::bigint = $2`,
			store.PayoutKind, id).Scan(&state)
		if err != nil {
			return err
		}
		if !slices.Contains(states, state) {
			return fmt.Errorf("the job is %s", state)
		}
		return nil
	})
}

// makeJobDue waits until disbursement id's payout job waits for a retry,
// then makes it due now.
func (b *bundle) makeJobDue(t *testing.T, id int64) {
	t.Helper()
	b.waitJobState(t, id, 10*time.Second, "retryable", "available")
	b.exec(t, `UPDATE river_job SET state = 'available', scheduled_at = now()
		WHERE kind = $1 AND (args->>'disbursement_id')::bigint = $2`, store.PayoutKind, id)
}

func TestAfterKeyRetentionTheWorkerLooksThePayoutUpAndAdoptsIt(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{KeyRetention: time.Hour})
	d := b.accept(t, "L-adopt", 1)
	// Attempt 1, a day ago: the payout was created, the answer never saved.
	if _, err := b.store.Disbursements().BeginAttempt(context.Background(), d.ID); err != nil {
		t.Fatal(err)
	}
	po, err := payout.NewClient(b.url, nil).Create(context.Background(), d.IdempotencyKey,
		payout.Request{Amount: d.Amount, Currency: d.Currency, Reference: d.Reference()})
	if err != nil {
		t.Fatal(err)
	}
	b.ageFirstAttempt(t, d, 25*time.Hour)

	var ev events
	b.startWorker(t, func(c *payout.Config) { c.KeyRetention = 24 * time.Hour; c.Observe = ev.observe })
	got := b.waitSent(t, "L-adopt", 1)
	if got.ProviderRef != po.ID {
		t.Fatalf("provider_ref %q, want the looked-up %s", got.ProviderRef, po.ID)
	}
	s := b.fake.Stats()
	if s.Posts != 1 || s.Lookups != 1 {
		t.Fatalf("posts %d lookups %d: want the one original POST and one lookup, never a second POST", s.Posts, s.Lookups)
	}
	if o, all := ev.until(t, payout.OutcomeAdopted); len(o) != 1 || o[0] != payout.OutcomeAdopted || !all[0].Lookup {
		t.Fatalf("outcomes %v, want [adopted] by lookup", o)
	}
}

func TestAfterKeyRetentionWithoutAPayoutTheRowAwaitsReviewAndIsNeverPostedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	b.fake.FailNext(1, http.StatusServiceUnavailable)
	var ev events
	b.startWorker(t, func(c *payout.Config) {
		c.BackoffInitial = time.Hour // the retry would come much later...
		c.BackoffCap = time.Hour
		c.Observe = ev.observe
	})
	d := b.accept(t, "L-review", 1)
	b.waitFor(t, "L-review", 1, "retried", func(d store.Disbursement) bool { return d.LastError != "" })
	// ...and by then the provider has forgotten the key.
	b.ageFirstAttempt(t, d, 25*time.Hour)
	b.makeJobDue(t, d.ID)

	got := b.waitFor(t, "L-review", 1, "flagged for review", func(d store.Disbursement) bool { return d.ReviewReason != "" })
	if got.Status != store.StatusPending || got.Attempts != 2 {
		t.Fatalf("flagged row %+v", got)
	}
	time.Sleep(300 * time.Millisecond) // several polls
	b.waitJobState(t, d.ID, 5*time.Second, "completed")
	s := b.fake.Stats()
	if s.Posts != 1 || s.Lookups != 1 || s.Created["L-review-1"] != 0 {
		t.Fatalf("posts %d lookups %d created %d: want the one failed POST, one lookup, no payout",
			s.Posts, s.Lookups, s.Created["L-review-1"])
	}
	if again, _ := b.store.Disbursements().Disbursement(context.Background(), "L-review", 1); again.Attempts != 2 {
		t.Fatalf("a flagged row was attempted again: %+v", again)
	}
	stuck, err := b.store.Disbursements().StuckDisbursements(context.Background(), time.Hour)
	if err != nil || len(stuck) != 1 || stuck[0].LoanID != "L-review" {
		t.Fatalf("stuck = %+v, %v; want the flagged row", stuck, err)
	}
}

func TestNotificationWakesTheWorkerWithoutWaitingForThePoll(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	var logs testkit.LogBuffer
	b.startWorker(t, func(c *payout.Config) { c.PollInterval = time.Hour; c.Logger = logs.Logger() })
	// Started: River has fetched once and listens; the worker is idle.
	testkit.WaitFor(t, 10*time.Second, "the worker started", func() bool { return logs.Contains(`"msg":"payout worker started"`) })
	start := time.Now()
	b.accept(t, "L-notify", 1)
	b.waitSent(t, "L-notify", 1)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("paid out after %v", took)
	}
}

func TestStoppingWorkerFinishesTheRowInHand(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	release := b.fake.Hold()
	defer release()
	st := openStore(t, b.dsn)
	w, err := payout.New(payout.Config{ProviderURL: b.url, PollInterval: 20 * time.Millisecond, Logger: testkit.Logger()}, st.Disbursements())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, st) }()
	b.accept(t, "L-stop", 1)
	testkit.WaitFor(t, 10*time.Second, "the worker's call to the provider", func() bool { return b.fake.Created("L-stop-1") > 0 })
	cancel() // SIGTERM while the call is in flight
	select {
	case err := <-done:
		t.Fatalf("Run returned %v with a call in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	d, _ := b.store.Disbursements().Disbursement(context.Background(), "L-stop", 1)
	if d.Status != store.StatusSent {
		t.Fatalf("after shutdown the row is %+v, want sent", d)
	}
}

func TestNewRejectsUnsafeConfigurations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  payout.Config
	}{
		{"NoURL", payout.Config{}},
		{"NotHTTP", payout.Config{ProviderURL: "ftp://provider"}},
		{"RescueWithinAnAttempt", payout.Config{ProviderURL: "http://p", Timeout: 10 * time.Second, RescueAfter: 20 * time.Second}},
		{"RetentionWithinTwoRescues", payout.Config{ProviderURL: "http://p", Timeout: time.Second, RescueAfter: time.Minute, KeyRetention: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := payout.New(tc.cfg, nil); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
}

func TestWorkerKeepsTryingToStartWhileTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	// A store whose pool is closed cannot start River, as with an
	// unreachable database.
	st := openStore(t, testkit.Schema(t))
	st.Close()
	w, err := payout.New(payout.Config{ProviderURL: "http://127.0.0.1:1", PollInterval: 10 * time.Millisecond, Logger: testkit.Logger()}, st.Disbursements())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := w.Run(ctx, st); err != nil {
		t.Fatalf("Run: %v, want nil after ctx ends", err)
	}
}

func TestRefusedRetryAfterALostAnswerAdoptsThePayout(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	// The payout is created and its answer lost; the retry, with the same
	// key, meets a 403 (the API key was rotated in between).
	b.fake.DropNext(1)
	b.fake.RefuseRetries(http.StatusForbidden)
	var ev events
	b.startWorker(t, func(c *payout.Config) { c.Observe = ev.observe })
	b.accept(t, "L-403", 1)
	d := b.waitSent(t, "L-403", 1)
	b.wantOnePayoutWithOneKey(t, d)
	if d.Attempts != 2 || d.ReviewReason != "" {
		t.Fatalf("row %+v, want sent on attempt 2 with nothing to review", d)
	}
	s := b.fake.Stats()
	if s.Posts != 2 || s.Lookups != 1 || s.Dropped != 1 {
		t.Fatalf("posts %d lookups %d dropped %d; want the dropped POST, the refused retry and one lookup", s.Posts, s.Lookups, s.Dropped)
	}
	if o, _ := ev.until(t, payout.OutcomeAdopted); len(o) != 2 || o[0] != payout.OutcomeRetry || o[1] != payout.OutcomeAdopted {
		t.Fatalf("outcomes %v, want [retry adopted]", o)
	}
}

func TestRefusedRetryIsAFailureOnlyWhenTheLookupFindsNoPayout(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	// The first attempt's outcome is unknown to the worker (a 503 could
	// have been a gateway's, after the provider acted); the retry is refused.
	b.fake.FailNext(1, http.StatusServiceUnavailable)
	b.fake.FailNext(1, http.StatusNotFound)
	b.startWorker(t, nil)
	b.accept(t, "L-404", 1)
	d := b.waitFor(t, "L-404", 1, "failed", func(d store.Disbursement) bool { return d.Status == store.StatusFailed })
	if d.ProviderRef != "" || d.Attempts != 2 || !strings.Contains(d.LastError, "found no payout") {
		t.Fatalf("failed row %+v", d)
	}
	if s := b.fake.Stats(); s.Lookups != 1 || s.Created["L-404-1"] != 0 {
		t.Fatalf("lookups %d created %d", s.Lookups, s.Created["L-404-1"])
	}
}

func TestTheLastAttemptFlagsTheRowInsteadOfLettingRiverDiscardIt(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	b.fake.FailNext(10, http.StatusServiceUnavailable)
	d := b.accept(t, "L-last", 1)
	b.exec(t, `UPDATE river_job SET max_attempts = 2 WHERE kind = $1 AND (args->>'disbursement_id')::bigint = $2`, store.PayoutKind, d.ID)
	b.startWorker(t, func(c *payout.Config) { c.BackoffInitial, c.BackoffCap = time.Millisecond, time.Millisecond })
	got := b.waitFor(t, "L-last", 1, "flagged for review", func(d store.Disbursement) bool { return d.ReviewReason != "" })
	if got.Status != store.StatusPending || got.Attempts != 2 || !strings.Contains(got.ReviewReason, "after 2 attempts") {
		t.Fatalf("flagged row %+v", got)
	}
	b.waitJobState(t, d.ID, 5*time.Second, "completed")
}

func TestRefusedRetryWhoseLookupIsRefusedTooAwaitsReview(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Config{})
	// A gateway in front of the provider refuses every lookup.
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.Error(w, `{"error":"forbidden"}`, http.StatusForbidden)
			return
		}
		b.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(gw.Close)
	b.fake.DropNext(1)
	b.fake.RefuseRetries(http.StatusForbidden)
	b.startWorker(t, func(c *payout.Config) { c.ProviderURL = gw.URL })
	d := b.accept(t, "L-blind", 1)
	got := b.waitFor(t, "L-blind", 1, "flagged for review", func(d store.Disbursement) bool { return d.ReviewReason != "" })
	if got.Status != store.StatusPending || got.ProviderRef != "" || got.Attempts != 2 || !strings.Contains(got.ReviewReason, "may hold the payout") {
		t.Fatalf("row %+v, want pending and flagged after attempt 2", got)
	}
	b.waitJobState(t, d.ID, 5*time.Second, "completed") // River retries it no more
	if s := b.fake.Stats(); s.Posts != 2 || s.Created["L-blind-1"] != 1 {
		t.Fatalf("posts %d created %d: want the dropped POST and the refused retry, one payout", s.Posts, s.Created["L-blind-1"])
	}
}
