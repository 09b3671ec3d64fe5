package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paylock/paylock/internal/testkit"
)

// Migrations 00004-00006 (payments.source, UNIQUE (source, transaction_id)
// under the old constraint's name) on a table that holds payments and keeps
// receiving them from replicas of the previous version during a rolling
// upgrade.

// v3InsertSQL is the previous version's insert: it names no source.
const v3InsertSQL = `
INSERT INTO payments (transaction_id, amount, currency, payload, event_id)
VALUES ($1, $2, $3, $4, NULLIF($5, ''))
ON CONFLICT ON CONSTRAINT payments_transaction_id_key DO NOTHING
RETURNING received_at`

// atVersion3 gives the test a schema migrated to version 3 (before
// sources), a store on it, and an admin connection.
func atVersion3(t *testing.T) (*Store, *pgx.Conn, string) {
	t.Helper()
	u := testkit.Schema(t)
	ctx := context.Background()
	s, err := Open(ctx, Config{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.migrate(ctx, 3); err != nil {
		t.Fatal(err)
	}
	return s, testkit.Connect(t, u), u
}

func queryString(t *testing.T, c *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	var v string
	if err := c.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// txIDConstraintDef is payments_transaction_id_key's definition.
func txIDConstraintDef(t *testing.T, c *pgx.Conn) string {
	t.Helper()
	return queryString(t, c, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = 'payments'::regclass AND conname = $1`, txIDConstraint)
}

// insertSample is one insert of an inserter: when it started, how long it
// took.
type insertSample struct {
	start time.Time
	took  time.Duration
}

func TestSourceMigrationRunsUnderConcurrentInsertsOfThePreviousVersion(t *testing.T) {
	t.Parallel()
	s, admin, u := atVersion3(t)
	ctx := context.Background()
	const oldRows = 50_000
	if _, err := admin.Exec(ctx, `INSERT INTO payments (transaction_id, amount, currency, payload, event_id)
		SELECT 'old_' || i, 100, 'EUR', jsonb_build_object('transaction_id', 'old_' || i), 'evt_' || i
		FROM generate_series(1, $1) i`, oldRows); err != nil {
		t.Fatal(err)
	}

	// Replicas of the previous version: prepared statements (pgx's default
	// mode), planned against the old constraint, kept through the swap.
	const inserters = 4
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var (
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		mu      sync.Mutex
		samples []insertSample
		newIDs  int
		errs    []error
	)
	warm := make(chan struct{}, inserters)
	for w := range inserters {
		wg.Go(func() {
			warmed := false
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Every fifth insert repeats an old payment: the arbiter,
				// named, must keep answering "already there" throughout.
				id, dup := fmt.Sprintf("new_%d_%d", w, i), i%5 == 4
				if dup {
					id = fmt.Sprintf("old_%d", 1+(w*10_000+i)%oldRows)
				}
				start := time.Now()
				var at time.Time
				err := pool.QueryRow(ctx, v3InsertSQL, id, 100, "EUR", `{}`, "").Scan(&at)
				took := time.Since(start)
				mu.Lock()
				samples = append(samples, insertSample{start, took})
				switch {
				case dup && errors.Is(err, pgx.ErrNoRows):
				case dup:
					errs = append(errs, fmt.Errorf("old %s again: %v, want no row", id, err))
				case err != nil:
					errs = append(errs, fmt.Errorf("new %s: %w", id, err))
				default:
					newIDs++
				}
				mu.Unlock()
				if !warmed && i == 50 {
					warmed = true
					warm <- struct{}{}
				}
			}
		})
	}
	for range inserters {
		<-warm
	}

	migStart := time.Now()
	err = s.Migrate(ctx)
	migEnd := time.Now()
	// Inserts go on after the swap: every inserter makes a few more.
	testkit.WaitFor(t, 30*time.Second, "inserts after the swap", func() bool {
		mu.Lock()
		defer mu.Unlock()
		after := 0
		for _, smp := range samples {
			if smp.start.After(migEnd) {
				after++
			}
		}
		return after >= 10*inserters
	})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("Migrate under load: %v", err)
	}
	for _, err := range errs {
		t.Error(err)
	}

	// How long the inserters waited: the slowest insert before the
	// migration (the floor, same run) and during it.
	var before, during []time.Duration
	for _, smp := range samples {
		switch {
		case smp.start.Before(migStart) && smp.start.Add(smp.took).Before(migStart):
			before = append(before, smp.took)
		case smp.start.Before(migEnd) && smp.start.Add(smp.took).After(migStart):
			during = append(during, smp.took)
		}
	}
	if len(during) == 0 {
		t.Fatal("no insert ran during the migration")
	}
	slices.Sort(before)
	slices.Sort(during)
	t.Logf("migration on %d rows took %v; %d inserts during it, slowest %v, p99 %v; before it: %d inserts, slowest %v",
		oldRows, migEnd.Sub(migStart).Round(time.Millisecond), len(during), during[len(during)-1].Round(time.Microsecond),
		during[len(during)*99/100].Round(time.Microsecond), len(before), before[len(before)-1].Round(time.Microsecond))

	// The swap's window: from the start of 00006's transaction (its
	// goose_db_version.tstamp is now(), the transaction's start) to the
	// end of Migrate.
	var swapStart time.Time
	if err := admin.QueryRow(ctx, "SELECT tstamp FROM goose_db_version WHERE version_id = 6").Scan(&swapStart); err != nil {
		t.Fatal(err)
	}
	var swapWorst time.Duration
	var inSwap int
	for _, smp := range samples {
		if smp.start.Before(migEnd) && smp.start.Add(smp.took).After(swapStart) {
			inSwap++
			swapWorst = max(swapWorst, smp.took)
		}
	}
	t.Logf("the swap (00006) ran %v before Migrate returned; %d inserts overlapped it, slowest %v",
		migEnd.Sub(swapStart).Round(time.Millisecond), inSwap, swapWorst.Round(time.Microsecond))

	if def := txIDConstraintDef(t, admin); def != "UNIQUE (source, transaction_id)" {
		t.Errorf("%s is %q, want UNIQUE (source, transaction_id)", txIDConstraint, def)
	}
	if n := testkit.Count(t, admin, `SELECT count(*) FROM pg_index WHERE indrelid = 'payments'::regclass`); n != 9 {
		t.Errorf("%d indexes on payments, want 9 (the primary key, %s, 00009's two remaining search indexes, 00014's four listing indexes and 00016's changed-at index)", n, txIDConstraint)
	}
	if n := testkit.Count(t, admin, `SELECT count(*) FROM payments`); n != oldRows+newIDs {
		t.Errorf("%d rows, want %d old and %d new", n, oldRows, newIDs)
	}
	if n := testkit.Count(t, admin, `SELECT count(DISTINCT transaction_id) FROM payments`); n != oldRows+newIDs {
		t.Errorf("%d distinct transaction ids, want %d", n, oldRows+newIDs)
	}
	if n := testkit.Count(t, admin, `SELECT count(*) FROM payments WHERE source <> 'payments'`); n != 0 {
		t.Errorf("%d rows of another source than 'payments', want 0", n)
	}

	// Now a transaction id is unique per source.
	old := Payment{TransactionID: "old_7", Amount: 100, Currency: "EUR", Payload: []byte(`{}`)}
	if _, err := s.Payments().RecordPayment(ctx, old); !errors.Is(err, ErrDuplicate) {
		t.Errorf("old_7 again (no source): %v, want ErrDuplicate", err)
	}
	old.Source = DefaultSource
	if _, err := recordInTx(s, ctx, old); !errors.Is(err, ErrDuplicate) {
		t.Errorf("old_7 again (source payments, in a transaction): %v, want ErrDuplicate", err)
	}
	for _, src := range []string{"stripe", "adyen"} {
		other := old
		other.Source = src
		if _, err := s.Payments().Confirm(ctx, other); !errors.Is(err, ErrNotFound) {
			t.Errorf("Confirm old_7 of %s: %v, want ErrNotFound", src, err)
		}
		rec, err := s.Payments().RecordPayment(ctx, other)
		if err != nil || rec.Source != src {
			t.Fatalf("old_7 from %s: %+v, %v; want a new payment of that source", src, rec, err)
		}
		if _, err := s.Payments().Confirm(ctx, other); !errors.Is(err, ErrDuplicate) {
			t.Errorf("Confirm old_7 of %s after recording it: %v, want ErrDuplicate", src, err)
		}
	}
	if n := testkit.Count(t, admin, `SELECT count(*) FROM payments WHERE transaction_id = 'old_7'`); n != 3 {
		t.Errorf("%d rows for old_7, want 3 (payments, stripe, adyen)", n)
	}
}

func TestSourceMigrationReplacesAnIndexLeftByAFailedBuild(t *testing.T) {
	t.Parallel()
	s, admin, _ := atVersion3(t)
	ctx := context.Background()
	if err := s.migrate(ctx, 4); err != nil {
		t.Fatal(err)
	}
	// A build that failed (here on duplicates) leaves an INVALID index of the
	// name 00005 builds.
	if _, err := admin.Exec(ctx, `INSERT INTO payments (transaction_id, amount, currency, payload)
		VALUES ('tx_1', 1, 'EUR', '{}'), ('tx_2', 1, 'EUR', '{}')`); err != nil {
		t.Fatal(err)
	}
	_, err := admin.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY payments_source_transaction_id_idx ON payments (currency)`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != codeUniqueViolation {
		t.Fatalf("the failing build: %v, want 23505", err)
	}
	if n := testkit.Count(t, admin, `SELECT count(*) FROM pg_index WHERE indexrelid = 'payments_source_transaction_id_idx'::regclass AND NOT indisvalid`); n != 1 {
		t.Fatal("no INVALID index left")
	}

	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate after the failed build: %v", err)
	}
	if def := txIDConstraintDef(t, admin); def != "UNIQUE (source, transaction_id)" {
		t.Errorf("%s is %q, want UNIQUE (source, transaction_id)", txIDConstraint, def)
	}
	if n := testkit.Count(t, admin, `SELECT count(*) FROM pg_index WHERE indrelid = 'payments'::regclass AND indisvalid`); n != 9 {
		t.Errorf("%d valid indexes on payments, want 9 (with 00009's two remaining, 00014's four and 00016's one)", n)
	}
}

// TestSourceMigrationWaitsBrieflyForTheSwapAndFailsToRetry: the swap needs
// an ACCESS EXCLUSIVE lock. Behind a transaction that holds payments, it
// retries in short waits (inserts go through between them); if the
// transaction outlasts the retries, Migrate fails with ErrUnavailable,
// having changed nothing, and the next Migrate finishes.
func TestSourceMigrationWaitsBrieflyForTheSwapAndFailsToRetry(t *testing.T) {
	t.Parallel()
	s, admin, u := atVersion3(t)
	ctx := context.Background()
	if err := s.migrate(ctx, 5); err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	hold := func() pgx.Tx {
		tx, err := holder.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "LOCK TABLE payments IN ACCESS SHARE MODE"); err != nil {
			t.Fatal(err)
		}
		return tx
	}

	t.Run("HeldThroughEveryAttempt", func(t *testing.T) {
		tx := hold()
		defer tx.Rollback(ctx)
		// Inserts are held up at most one attempt's wait at a time.
		migrated := make(chan error, 1)
		go func() { migrated <- s.Migrate(ctx) }()
		testkit.WaitFor(t, 10*time.Second, "the swap waiting for its lock", func() bool {
			return testkit.Count(t, admin, `SELECT count(*) FROM pg_locks WHERE relation = 'payments'::regclass AND NOT granted`) > 0
		})
		start := time.Now()
		if _, err := s.Payments().RecordPayment(ctx, newPayment("tx_during_retries")); err != nil {
			t.Errorf("insert during the retries: %v", err)
		}
		took := time.Since(start)
		err := <-migrated
		var pgErr *pgconn.PgError
		if !errors.Is(err, ErrUnavailable) || !errors.As(err, &pgErr) || pgErr.Code != codeLockNotAvailable {
			t.Fatalf("Migrate behind a held lock: %v, want ErrUnavailable wrapping 55P03", err)
		}
		t.Logf("an insert during the swap's retries took %v", took.Round(time.Microsecond))
		if def := txIDConstraintDef(t, admin); def != "UNIQUE (transaction_id)" {
			t.Errorf("%s is %q after the failed swap, want it unchanged", txIDConstraint, def)
		}
	})

	t.Run("ReleasedDuringTheRetries", func(t *testing.T) {
		tx := hold()
		released := make(chan struct{})
		time.AfterFunc(500*time.Millisecond, func() {
			defer close(released)
			tx.Rollback(context.Background())
		})
		err := s.Migrate(ctx)
		<-released
		if err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		if def := txIDConstraintDef(t, admin); def != "UNIQUE (source, transaction_id)" {
			t.Errorf("%s is %q, want UNIQUE (source, transaction_id)", txIDConstraint, def)
		}
	})
}
