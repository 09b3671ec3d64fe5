package testkit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what Count and Exec need of a database handle: a pool
// (store.Store's Pool), a connection or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// queryTimeout bounds each statement of Count, Exec and the row counters.
const queryTimeout = 30 * time.Second

// Count runs query, a SELECT of one integer (count(*) ...), and returns
// it, failing the test on error.
func Count(t testing.TB, db DB, query string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	var n int
	if err := db.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Exec runs sql, failing the test on error.
func Exec(t testing.TB, db DB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	if _, err := db.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// PaymentRows counts the payments recorded under transaction id tx, from
// any source ("" counts every payment).
func PaymentRows(t testing.TB, db DB, tx string) int {
	t.Helper()
	if tx == "" {
		return Count(t, db, "SELECT count(*) FROM payments")
	}
	return Count(t, db, "SELECT count(*) FROM payments WHERE transaction_id = $1", tx)
}

// PaymentRowsByTx returns, for every transaction id starting with prefix,
// how many payments are recorded under it.
func PaymentRowsByTx(t testing.TB, db DB, prefix string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	const q = `SELECT transaction_id, count(*) FROM payments WHERE starts_with(transaction_id, $1) GROUP BY 1`
	rows, err := db.Query(ctx, q, prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	var tx string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&tx, &n}, func() error {
		out[tx] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// SlowInsert is a trigger that makes inserts into a table sleep on the
// server, as a loaded database would: Sleep for every row, Slow instead for
// the rows that SlowWhere (an SQL condition on NEW) selects. AtCommit
// sleeps at COMMIT instead of before the insert (a deferred constraint
// trigger). A cancel request ends the sleep with an error that aborts the
// transaction, unless IgnoreCancel, which lets the transaction go on as if
// the cancel had arrived too late.
type SlowInsert struct {
	Name         string // of the trigger and its function; default "slow_insert"
	Table        string // default "payments"
	Sleep        time.Duration
	Slow         time.Duration
	SlowWhere    string // as "NEW.transaction_id LIKE '%7'"; "" none
	AtCommit     bool
	IgnoreCancel bool
}

// SQL returns the statements that create the trigger and its function.
func (s SlowInsert) SQL() string {
	name, table := s.Name, s.Table
	if name == "" {
		name = "slow_insert"
	}
	if table == "" {
		table = "payments"
	}
	secs := fmt.Sprintf("%g", s.Sleep.Seconds())
	if s.SlowWhere != "" {
		secs = fmt.Sprintf("CASE WHEN %s THEN %g ELSE %s END", s.SlowWhere, s.Slow.Seconds(), secs)
	}
	body := "PERFORM pg_sleep(" + secs + ");"
	if s.IgnoreCancel {
		body = "BEGIN " + body + " EXCEPTION WHEN query_canceled THEN NULL; END;"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN %s RETURN NEW; END $$;\n", name, body)
	if s.AtCommit {
		fmt.Fprintf(&b, "CREATE CONSTRAINT TRIGGER %s AFTER INSERT ON %s DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION %s()", name, table, name)
	} else {
		fmt.Fprintf(&b, "CREATE TRIGGER %s BEFORE INSERT ON %s FOR EACH ROW EXECUTE FUNCTION %s()", name, table, name)
	}
	return b.String()
}

// Sleeping counts the sessions of db's database that sleep in pg_sleep
// right now (inserts a SlowInsert holds), only those whose application_name
// is app unless app is "". A test waits on it (WaitFor) to know that the
// insert it slowed is under way on the server, instead of sleeping; app
// tells its sessions from those of tests running beside it on the same
// database (set it with application_name in the code under test's URL).
func Sleeping(t testing.TB, db DB, app string) int {
	t.Helper()
	return Count(t, db, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event = 'PgSleep' AND ($1 = '' OR application_name = $1)`, app)
}

// Install creates the trigger on db, failing the test on error.
func (s SlowInsert) Install(t testing.TB, db DB) {
	t.Helper()
	Exec(t, db, s.SQL())
}
