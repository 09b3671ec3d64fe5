package testkit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylock/paylock/internal/testkit"
)

// payments makes a payments table, as paylock's has it for what the kit
// reads, in a schema of the test's own.
func payments(t *testing.T) testkit.DB {
	t.Helper()
	db := testkit.Connect(t, testkit.Schema(t))
	testkit.Exec(t, db, `CREATE TABLE payments (source text NOT NULL, transaction_id text NOT NULL)`)
	return db
}

func TestSchemasAreTheTestsOwn(t *testing.T) {
	t.Parallel()
	a, b := payments(t), payments(t)
	testkit.Exec(t, a, `INSERT INTO payments VALUES ('payments', 'tx-1')`)
	if n := testkit.PaymentRows(t, b, ""); n != 0 {
		t.Fatalf("another schema sees %d rows", n)
	}
	if n := testkit.PaymentRows(t, a, ""); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

func TestRowCounters(t *testing.T) {
	t.Parallel()
	db := payments(t)
	testkit.Exec(t, db, `INSERT INTO payments VALUES
		('payments', 'st-0001'), ('stripe', 'st-0001'), ('payments', 'st-0002'), ('payments', 'st_0003'), ('payments', 'other')`)
	if n := testkit.PaymentRows(t, db, "st-0001"); n != 2 {
		t.Errorf("PaymentRows(st-0001) = %d, want 2 (both sources)", n)
	}
	if n := testkit.PaymentRows(t, db, ""); n != 5 {
		t.Errorf("PaymentRows(\"\") = %d, want 5", n)
	}
	got := testkit.PaymentRowsByTx(t, db, "st-")
	if len(got) != 2 || got["st-0001"] != 2 || got["st-0002"] != 1 {
		t.Errorf("PaymentRowsByTx(st-) = %v; want st-0001:2 st-0002:1 (a prefix, not a LIKE pattern)", got)
	}
	if n := testkit.Count(t, db, "SELECT count(*) FROM payments WHERE source = $1", "stripe"); n != 1 {
		t.Errorf("Count = %d, want 1", n)
	}
}

// insertTakes inserts tx and returns how long the insert and its COMMIT
// took.
func insertTakes(t *testing.T, db testkit.DB, tx string) (insert, commit time.Duration) {
	t.Helper()
	start := time.Now()
	testkit.Exec(t, db, "BEGIN")
	testkit.Exec(t, db, "INSERT INTO payments VALUES ('payments', $1)", tx)
	mid := time.Now()
	testkit.Exec(t, db, "COMMIT")
	return mid.Sub(start), time.Since(mid)
}

func TestSlowInsertSleepsOnTheServer(t *testing.T) {
	t.Parallel()
	const fast, slow = 50 * time.Millisecond, 400 * time.Millisecond
	t.Run("BeforeTheInsert", func(t *testing.T) {
		t.Parallel()
		db := payments(t)
		testkit.SlowInsert{Sleep: fast, Slow: slow, SlowWhere: "NEW.transaction_id LIKE '%7'"}.Install(t, db)
		if took, _ := insertTakes(t, db, "tx-1"); took < fast || took >= slow {
			t.Errorf("a fast insert took %v, want [%v, %v)", took, fast, slow)
		}
		if took, _ := insertTakes(t, db, "tx-7"); took < slow {
			t.Errorf("a slow insert took %v, want %v or more", took, slow)
		}
	})
	t.Run("AtCommit", func(t *testing.T) {
		t.Parallel()
		db := payments(t)
		testkit.SlowInsert{Name: "slow_commit", Sleep: slow, AtCommit: true}.Install(t, db)
		if insert, commit := insertTakes(t, db, "tx-1"); insert >= slow || commit < slow {
			t.Errorf("insert %v, commit %v; want the sleep at COMMIT", insert, commit)
		}
	})
	t.Run("IgnoreCancel", func(t *testing.T) {
		t.Parallel()
		for _, ignore := range []bool{false, true} {
			db := payments(t)
			testkit.SlowInsert{Sleep: slow, IgnoreCancel: ignore}.Install(t, db)
			testkit.Exec(t, db, "SET statement_timeout = '100ms'")
			_, err := db.Exec(context.Background(), "INSERT INTO payments VALUES ('payments', 'tx-1')")
			var pgErr *pgconn.PgError
			if cancelled := errors.As(err, &pgErr) && pgErr.Code == "57014"; cancelled == ignore {
				t.Errorf("IgnoreCancel %v: %v", ignore, err)
			}
		}
	})
}

func TestWithSearchPathAndWithHostKeepTheRestOfTheURL(t *testing.T) {
	t.Parallel()
	const dsn = "postgres://u:p@127.0.0.1:5432/db?sslmode=disable"
	if got := testkit.WithHost(t, testkit.WithSearchPath(t, dsn, "t_1"), "127.0.0.1:6543"); got != "postgres://u:p@127.0.0.1:6543/db?search_path=t_1&sslmode=disable" {
		t.Fatalf("got %s", got)
	}
}

func TestSleepingSeesTheSlowedInsertOfItsApplicationOnly(t *testing.T) {
	t.Parallel()
	dsn := testkit.Schema(t)
	db := testkit.Connect(t, dsn)
	testkit.Exec(t, db, `CREATE TABLE payments (source text NOT NULL, transaction_id text NOT NULL)`)
	testkit.SlowInsert{Sleep: 30 * time.Second}.Install(t, db)
	app := "testkit-" + t.Name()
	slowed := testkit.Connect(t, dsn+"&application_name="+app)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := slowed.Exec(ctx, "INSERT INTO payments VALUES ('payments', 'tx-1')")
		done <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "the insert sleeping", func() bool { return testkit.Sleeping(t, db, app) == 1 })
	if n := testkit.Sleeping(t, db, app+"-other"); n != 0 {
		t.Errorf("%d sessions of another application sleeping, want 0", n)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled insert succeeded")
	}
}
