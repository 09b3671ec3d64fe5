package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/riverqueue/river"
)

func newDisbursement(loanID string, tranche int, eventID string) Disbursement {
	return Disbursement{LoanID: loanID, Tranche: tranche, Amount: 500000, Currency: "JPY", EventID: eventID}
}

func (b *bundle) events(t *testing.T, source, eventID string) int {
	t.Helper()
	return testkit.Count(t, b.admin, "SELECT count(*) FROM webhook_events WHERE source = $1 AND event_id = $2", source, eventID)
}

func TestAcceptDisbursementRecordsEachTrancheOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	d, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-1", 1, "evt_1"))
	if err != nil {
		t.Fatalf("first event: %v", err)
	}
	if d.Status != StatusPending || d.IdempotencyKey != "disburse-L-1-1" || d.Attempts != 0 || d.ID == 0 {
		t.Fatalf("created %+v", d)
	}

	t.Run("TheSameEventAgainIsSeen", func(t *testing.T) {
		_, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-1", 1, "evt_1"))
		if !errors.Is(err, ErrEventSeen) || !errors.Is(err, ErrDuplicate) {
			t.Fatalf("got %v, want ErrEventSeen (and ErrDuplicate)", err)
		}
	})
	t.Run("ANewEventForTheSameTrancheIsADuplicateAndIsRecorded", func(t *testing.T) {
		_, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-1", 1, "evt_2"))
		if !errors.Is(err, ErrDuplicate) || errors.Is(err, ErrEventSeen) {
			t.Fatalf("got %v, want ErrDuplicate but not ErrEventSeen", err)
		}
		if n := b.events(t, SourceLoans, "evt_2"); n != 1 {
			t.Fatalf("evt_2 recorded %d times, want 1", n)
		}
	})
	t.Run("ANewEventWithAnotherAmountIsAMismatchAndIsNotRecorded", func(t *testing.T) {
		other := newDisbursement("L-1", 1, "evt_3")
		other.Amount = 400000
		_, err := b.store.Disbursements().AcceptDisbursement(ctx, other)
		if !errors.Is(err, ErrMismatch) {
			t.Fatalf("got %v, want ErrMismatch", err)
		}
		if n := b.events(t, SourceLoans, "evt_3"); n != 0 {
			t.Fatalf("a mismatched event was recorded (%d rows)", n)
		}
	})
	t.Run("AnEventIdReusedForAnotherTrancheIsAMismatch", func(t *testing.T) {
		_, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-1", 2, "evt_1"))
		if !errors.Is(err, ErrMismatch) {
			t.Fatalf("got %v, want ErrMismatch", err)
		}
	})
	t.Run("TrancheTwoIsItsOwnDisbursement", func(t *testing.T) {
		d2, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-1", 2, "evt_4"))
		if err != nil {
			t.Fatal(err)
		}
		if d2.IdempotencyKey != "disburse-L-1-2" || d2.ID == d.ID {
			t.Fatalf("tranche 2: %+v", d2)
		}
	})
	if n := testkit.Count(t, b.admin, "SELECT count(*) FROM disbursements WHERE loan_id = 'L-1'"); n != 2 {
		t.Fatalf("%d disbursements for L-1, want 2", n)
	}
	stored, err := b.store.Disbursements().Disbursement(ctx, "L-1", 1)
	if err != nil || stored.Amount != 500000 || stored.EventID != "evt_1" {
		t.Fatalf("stored %+v, %v", stored, err)
	}
	if _, err := b.store.Disbursements().Disbursement(ctx, "L-1", 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing tranche: %v, want ErrNotFound", err)
	}
}

func TestConcurrentEventsForOneTrancheCreateOneDisbursement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const replicas, events = 3, 30
	stores := []*Store{b.store}
	for range replicas - 1 {
		s, err := Open(ctx, Config{URL: b.url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		stores = append(stores, s)
	}
	errs := make([]error, events)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range events {
		wg.Go(func() {
			<-start
			// Half the events share ids: redeliveries racing new approvals.
			_, errs[i] = stores[i%replicas].Disbursements().AcceptDisbursement(ctx, newDisbursement("L-race", 1, fmt.Sprintf("evt_%d", i/2)))
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i, err := range errs {
		switch {
		case err == nil:
			created++
		case errors.Is(err, ErrDuplicate):
		default:
			t.Errorf("event %d: %v", i, err)
		}
	}
	if created != 1 {
		t.Fatalf("%d events created the disbursement, want 1", created)
	}
	if n := testkit.Count(t, b.admin, "SELECT count(*) FROM disbursements"); n != 1 {
		t.Fatalf("%d disbursements, want 1", n)
	}
	if n := testkit.Count(t, b.admin, "SELECT count(*) FROM river_job WHERE kind = $1", PayoutKind); n != 1 {
		t.Fatalf("%d payout jobs, want 1", n)
	}
	if n := testkit.Count(t, b.admin, "SELECT count(*) FROM webhook_events"); n != events/2 {
		t.Fatalf("%d events recorded, want %d", n, events/2)
	}
}

// payoutJobs counts the payout jobs of disbursement id in the test's schema.
func (b *bundle) payoutJobs(t *testing.T, id int64) int {
	t.Helper()
	return testkit.Count(t, b.admin, `SELECT count(*) FROM river_job
		WHERE kind = $1 AND queue = $2 AND (args->>'disbursement_id')::bigint = $3`, PayoutKind, PayoutQueue, id)
}

func TestMigrateCreatesRiversTablesInTheCurrentSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, table := range []string{"river_job", "river_leader", "river_queue", "river_migration"} {
		if n := testkit.Count(t, b.admin, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1", table); n != 1 {
			t.Errorf("%s: %d in the test's schema, want 1", table, n)
		}
	}
	applied := testkit.Count(t, b.admin, "SELECT count(*) FROM river_migration")
	if applied == 0 {
		t.Fatal("no River migration recorded")
	}
	if err := b.store.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	if again := testkit.Count(t, b.admin, "SELECT count(*) FROM river_migration"); again != applied {
		t.Errorf("Migrate again: %d River migrations recorded, had %d; want a no-op", again, applied)
	}
}

func TestOnlyANewDisbursementGetsAPayoutJobInItsTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-j", 1, "evt_j1"))
	if err != nil {
		t.Fatal(err)
	}
	if n := b.payoutJobs(t, d.ID); n != 1 {
		t.Fatalf("%d payout jobs for a new disbursement, want 1", n)
	}
	// A redelivery, a re-approval and a mismatch add no job.
	_, _ = b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-j", 1, "evt_j1"))
	_, _ = b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-j", 1, "evt_j2"))
	other := newDisbursement("L-j", 1, "evt_j3")
	other.Amount++
	if _, err := b.store.Disbursements().AcceptDisbursement(ctx, other); !errors.Is(err, ErrMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	if n := testkit.Count(t, b.admin, "SELECT count(*) FROM river_job"); n != 1 {
		t.Fatalf("%d jobs after redeliveries, want the one", n)
	}
	// And the job is unique per disbursement even if inserted again.
	res, err := b.store.jobs.Insert(ctx, PayoutArgs{DisbursementID: d.ID}, nil)
	if err != nil || !res.UniqueSkippedAsDuplicate {
		t.Fatalf("a second payout job for disbursement %d: %+v, %v; want it skipped as a duplicate", d.ID, res, err)
	}
	if n := b.payoutJobs(t, d.ID); n != 1 {
		t.Fatalf("%d payout jobs after a second insert, want 1", n)
	}

	// A transaction that fails after the insert leaves neither row nor job.
	s, err := Open(ctx, Config{URL: b.url})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := b.admin.Exec(ctx, `CREATE FUNCTION refuse_job() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'no jobs today'; END$$`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, `CREATE TRIGGER refuse_job BEFORE INSERT ON river_job FOR EACH ROW EXECUTE FUNCTION refuse_job()`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-j", 2, "evt_j4")); err == nil {
		t.Fatal("accepted without its job")
	}
	if _, err := s.Disbursements().Disbursement(ctx, "L-j", 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the row of a failed job insert: %v, want ErrNotFound", err)
	}
	if n := b.events(t, SourceLoans, "evt_j4"); n != 0 {
		t.Fatalf("the event of a failed job insert was recorded")
	}
}

func TestWorkerUpdatesApplyToPendingRowsOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-c", 1, "evt_c"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := b.store.Disbursements().BeginAttempt(ctx, d.ID)
	if err != nil || first.Attempts != 1 || first.FirstAttemptAt.IsZero() {
		t.Fatalf("first attempt %+v, %v", first, err)
	}
	time.Sleep(50 * time.Millisecond)
	second, err := b.store.Disbursements().BeginAttempt(ctx, d.ID)
	if err != nil || second.Attempts != 2 || !second.FirstAttemptAt.Equal(first.FirstAttemptAt) {
		t.Fatalf("second attempt %+v, %v", second, err)
	}
	if second.SinceFirstAttempt < 50*time.Millisecond {
		t.Errorf("SinceFirstAttempt = %v, want at least the pause", second.SinceFirstAttempt)
	}
	if err := b.store.Disbursements().MarkSent(ctx, d.ID, "po_1", StatusSent); err != nil {
		t.Fatal(err)
	}
	for name, update := range map[string]func() error{
		"MarkSent":      func() error { return b.store.Disbursements().MarkSent(ctx, d.ID, "po_2", StatusSent) },
		"MarkFailed":    func() error { return b.store.Disbursements().MarkFailed(ctx, d.ID, "late refusal") },
		"NoteRetry":     func() error { return b.store.Disbursements().NoteRetry(ctx, d.ID, time.Second, "late 503") },
		"FlagForReview": func() error { return b.store.Disbursements().FlagForReview(ctx, d.ID, "late") },
		"BeginAttempt":  func() error { _, err := b.store.Disbursements().BeginAttempt(ctx, d.ID); return err },
	} {
		if err := update(); !errors.Is(err, ErrNotPending) {
			t.Errorf("%s on a sent row: %v, want ErrNotPending", name, err)
		}
	}
	got, _ := b.store.Disbursements().Disbursement(ctx, "L-c", 1)
	if got.Status != StatusSent || got.ProviderRef != "po_1" || got.Attempts != 2 || got.LastError != "" || got.ReviewReason != "" {
		t.Fatalf("a sent row changed: %+v", got)
	}
	if _, err := b.store.Disbursements().BeginAttempt(ctx, 1<<40); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v, want ErrNotFound", err)
	}
}

func TestNoteRetryAndReview(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d1, _ := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-r", 1, "evt_r1"))
	d2, _ := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-r", 2, "evt_r2"))
	if err := b.store.Disbursements().NoteRetry(ctx, d1.ID, time.Minute, "503"); err != nil {
		t.Fatal(err)
	}
	got, _ := b.store.Disbursements().Disbursement(ctx, "L-r", 1)
	if got.Status != StatusPending || got.LastError != "503" || time.Until(got.NextAttemptAt) < 50*time.Second {
		t.Fatalf("after NoteRetry: %+v", got)
	}
	if err := b.store.Disbursements().FlagForReview(ctx, d2.ID, "a person decides"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Disbursements().BeginAttempt(ctx, d2.ID); !errors.Is(err, ErrNotPending) {
		t.Fatalf("an attempt began on a flagged row: %v", err)
	}
	stuck, err := b.store.Disbursements().StuckDisbursements(ctx, time.Hour)
	if err != nil || len(stuck) != 1 || stuck[0].ID != d2.ID {
		t.Fatalf("stuck = %+v, %v; want the flagged row", stuck, err)
	}
	stuck, _ = b.store.Disbursements().StuckDisbursements(ctx, 0)
	if len(stuck) != 2 {
		t.Fatalf("stuck with no threshold = %d rows, want 2", len(stuck))
	}
}

func TestRetriedFailuresListsFailedRowsWithoutARefAttemptedTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	fail := func(loan string, attempts int) {
		t.Helper()
		d, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement(loan, 1, "evt_"+loan))
		if err != nil {
			t.Fatal(err)
		}
		for range attempts {
			if _, err := b.store.Disbursements().BeginAttempt(ctx, d.ID); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.store.Disbursements().MarkFailed(ctx, d.ID, "403"); err != nil {
			t.Fatal(err)
		}
	}
	fail("L-once", 1)
	fail("L-twice", 2)
	got, err := b.store.Disbursements().RetriedFailures(ctx)
	if err != nil || len(got) != 1 || got[0].LoanID != "L-twice" {
		t.Fatalf("RetriedFailures = %+v, %v; want only L-twice", got, err)
	}
}

func TestStatusHookRunsInTheTransactionThatChangesTheStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s, err := Open(ctx, Config{URL: b.url})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var (
		mu      sync.Mutex
		changes []StatusChange
		refuse  error
	)
	s.Disbursements().OnStatusChange(func(ctx context.Context, tx pgx.Tx, c StatusChange) error {
		// The hook sees the change from inside its transaction.
		var status string
		if err := tx.QueryRow(ctx, "SELECT status FROM disbursements WHERE id = $1", c.Disbursement.ID).Scan(&status); err != nil {
			return err
		}
		if status != string(c.Disbursement.Status) {
			return fmt.Errorf("the hook read %s, the change says %s", status, c.Disbursement.Status)
		}
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, c)
		return refuse
	})
	d1, _ := s.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-h", 1, "evt_h1"))
	d2, _ := s.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-h", 2, "evt_h2"))
	if err := s.Disbursements().MarkSent(ctx, d1.ID, "po_h1", StatusSent); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Disbursements().ApplyPayoutStatus(ctx, "pe_h1", "po_h1", StatusPaid, ""); err != nil {
		t.Fatal(err)
	}
	refuse = errors.New("forwarding unavailable")
	if err := s.Disbursements().MarkFailed(ctx, d2.ID, "refused"); !errors.Is(err, refuse) {
		t.Fatalf("MarkFailed with a failing hook: %v, want the hook's error", err)
	}
	if got, _ := s.Disbursements().Disbursement(ctx, "L-h", 2); got.Status != StatusPending {
		t.Fatalf("a change whose hook failed was kept: %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"pending→sent", "sent→paid", "pending→failed"}
	if len(changes) != len(want) {
		t.Fatalf("%d changes seen, want %v", len(changes), want)
	}
	for i, c := range changes {
		if got := string(c.From) + "→" + string(c.Disbursement.Status); got != want[i] {
			t.Errorf("change %d: %s, want %s", i, got, want[i])
		}
	}
}

func TestPayoutStatusMovesForwardOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sent := func(t *testing.T, loan, ref string) {
		t.Helper()
		d, err := b.store.Disbursements().AcceptDisbursement(ctx, newDisbursement(loan, 1, "evt_"+loan))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.Disbursements().BeginAttempt(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		if err := b.store.Disbursements().MarkSent(ctx, d.ID, ref, StatusSent); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("PaidThenLateFailedStaysPaid", func(t *testing.T) {
		sent(t, "L-p1", "po_1")
		d, applied, err := b.store.Disbursements().ApplyPayoutStatus(ctx, "pe_1", "po_1", StatusPaid, "")
		if err != nil || !applied || d.Status != StatusPaid {
			t.Fatalf("paid: %+v applied=%v %v", d, applied, err)
		}
		d, applied, err = b.store.Disbursements().ApplyPayoutStatus(ctx, "pe_2", "po_1", StatusFailed, "late")
		if err != nil || applied || d.Status != StatusPaid {
			t.Fatalf("late failed: %+v applied=%v %v", d, applied, err)
		}
		if n := b.events(t, SourcePayouts, "pe_2"); n != 1 {
			t.Fatalf("an ignored event is still received: %d rows", n)
		}
		if _, _, err := b.store.Disbursements().ApplyPayoutStatus(ctx, "pe_1", "po_1", StatusPaid, ""); !errors.Is(err, ErrEventSeen) {
			t.Fatalf("repeated event: %v, want ErrEventSeen", err)
		}
		if _, _, err := b.store.Disbursements().ApplyPayoutStatus(ctx, "pe_1", "po_other", StatusPaid, ""); !errors.Is(err, ErrMismatch) {
			t.Fatalf("event id reused for another payout: %v, want ErrMismatch", err)
		}
	})
	t.Run("FirstTerminalStatusWins", func(t *testing.T) {
		sent(t, "L-p2", "po_2")
		if _, applied, err := b.store.Disbursements().ApplyPayoutStatus(ctx, "pe_3", "po_2", StatusFailed, "account closed"); err != nil || !applied {
			t.Fatalf("failed: %v %v", applied, err)
		}
		d, applied, err := b.store.Disbursements().ApplyPayoutStatus(ctx, "pe_4", "po_2", StatusPaid, "")
		if err != nil || applied || d.Status != StatusFailed || d.LastError != "account closed" {
			t.Fatalf("paid after failed: %+v applied=%v %v", d, applied, err)
		}
	})
	t.Run("UnknownPayoutIsNotFoundAndNotRecorded", func(t *testing.T) {
		if _, _, err := b.store.Disbursements().ApplyPayoutStatus(ctx, "pe_5", "po_unknown", StatusPaid, ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
		if n := b.events(t, SourcePayouts, "pe_5"); n != 0 {
			t.Fatalf("the event of an unknown payout was recorded")
		}
	})
	t.Run("ConcurrentContradictingEventsApplyOnce", func(t *testing.T) {
		sent(t, "L-p3", "po_3")
		var wg sync.WaitGroup
		applied := make([]bool, 20)
		for i := range applied {
			wg.Go(func() {
				status := StatusPaid
				if i%2 == 1 {
					status = StatusFailed
				}
				var err error
				_, applied[i], err = b.store.Disbursements().ApplyPayoutStatus(ctx, fmt.Sprintf("pe_c%d", i), "po_3", status, "")
				if err != nil {
					t.Errorf("event %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		n := 0
		for _, a := range applied {
			if a {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d events applied, want exactly 1", n)
		}
	})
}

// recordingWorker works payout jobs by noting their disbursement ids.
type recordingWorker struct {
	river.WorkerDefaults[PayoutArgs]
	ids chan int64
}

func (w *recordingWorker) Work(ctx context.Context, job *river.Job[PayoutArgs]) error {
	w.ids <- job.Args.DisbursementID
	return nil
}

func TestPayoutJobsAreInsertedAndWorkedThroughPgBouncer(t *testing.T) {
	t.Parallel()
	for _, mode := range pooledModes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			s, _ := pooledSetup(t, mode, pooledTimeouts)
			ctx := context.Background()
			d, err := s.Disbursements().AcceptDisbursement(ctx, newDisbursement("L-pgb", 1, "evt_pgb"))
			if err != nil {
				t.Fatal(err)
			}
			w := &recordingWorker{ids: make(chan int64, 1)}
			workers := river.NewWorkers()
			river.AddWorker(workers, w)
			cfg := &river.Config{
				Queues:            map[string]river.QueueConfig{PayoutQueue: {MaxWorkers: 1}},
				Workers:           workers,
				FetchCooldown:     50 * time.Millisecond,
				FetchPollInterval: 50 * time.Millisecond,
				Logger:            discardLogger,
			}
			stop, err := s.StartJobs(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer stop(ctx)
			if !cfg.PollOnly {
				t.Error("a pooled store's job client LISTENs; want PollOnly")
			}
			select {
			case id := <-w.ids:
				if id != d.ID {
					t.Fatalf("worked disbursement %d, want %d", id, d.ID)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the payout job was never worked through PgBouncer")
			}
		})
	}
}
