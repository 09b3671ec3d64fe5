package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylock/paylock/internal/scaletest"
	"github.com/paylock/paylock/internal/testkit"
)

// The store behind PgBouncer in transaction pooling mode
// (scripts/pgbouncer.sh; make scale): the pooled exec modes, the
// migrations over a direct connection, session settings as database
// defaults, and the store's failure rules when the pooler or the server
// sessions behind it go away.

var pooledModes = []ExecMode{ExecExec, ExecSimpleProtocol}

// pooledTimeouts are the server-side timeouts a pooled store relies on,
// set as the database's defaults.
var pooledTimeouts = map[string]string{
	"statement_timeout":                   "5s",
	"lock_timeout":                        "2s",
	"idle_in_transaction_session_timeout": "10s",
}

// pooledSetup gives the test a database of its own, migrated over the
// direct URL, and a store reaching it through PgBouncer in mode.
func pooledSetup(t *testing.T, mode ExecMode, settings map[string]string, opts ...func(*Config)) (*Store, scaletest.Database) {
	t.Helper()
	pgb := scaletest.PgBouncerEnv(t)
	db := pgb.Database(t, settings)
	cfg := Config{URL: db.Pooled, ExecMode: mode, MigrateURL: db.Direct}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s, db
}

func TestPgBouncerRefusesTheDefaultModesSessionParameters(t *testing.T) {
	pgb := scaletest.PgBouncerEnv(t)
	db := pgb.Database(t, nil)
	s, err := Open(context.Background(), Config{URL: db.Pooled})
	if err == nil {
		s.Close()
		t.Fatal("Open through PgBouncer in the default exec mode succeeded; want PgBouncer to refuse the session timeouts")
	}
	if !strings.Contains(err.Error(), "unsupported startup parameter") {
		t.Fatalf("got %v, want PgBouncer's unsupported startup parameter", err)
	}
}

func TestRecordPaymentThroughPgBouncer(t *testing.T) {
	for _, mode := range pooledModes {
		for _, path := range recordPaths {
			for _, ins := range insertModes {
				t.Run(string(mode)+"/"+path.name+"/"+ins.name, func(t *testing.T) {
					s, _ := pooledSetup(t, mode, pooledTimeouts)
					s.payments.insert = ins.sql
					ctx := context.Background()
					p := newPayment("tx_pooled")
					rec, err := path.record(s, ctx, p)
					if err != nil {
						t.Fatalf("first: %v", err)
					}
					got, err := s.Payments().Payment(ctx, "", p.TransactionID)
					if err != nil || !jsonEqual(t, got.Payload, p.Payload) || got.Amount != p.Amount || rec.ReceivedAt.IsZero() {
						t.Fatalf("read back %+v, %v; want the payment with its JSON payload", got, err)
					}
					if _, err := path.record(s, ctx, p); !errors.Is(err, ErrDuplicate) {
						t.Fatalf("same again: %v, want ErrDuplicate", err)
					}
					q := p
					q.Amount++
					if _, err := path.record(s, ctx, q); !errors.Is(err, ErrMismatch) {
						t.Fatalf("other amount: %v, want ErrMismatch", err)
					}
					if _, err := s.Payments().Payment(ctx, "", "tx_absent"); !errors.Is(err, ErrNotFound) {
						t.Fatalf("absent: %v, want ErrNotFound", err)
					}

					// Many deliveries at once, over two pools sharing
					// PgBouncer's server connections.
					other, err := Open(ctx, Config{URL: s.cfg.URL, ExecMode: mode})
					if err != nil {
						t.Fatal(err)
					}
					defer other.Close()
					var (
						wg                   sync.WaitGroup
						mu                   sync.Mutex
						recorded, duplicates int
					)
					for i := range 40 {
						wg.Go(func() {
							st := s
							if i%2 == 1 {
								st = other
							}
							_, err := path.record(st, ctx, newPayment("tx_pooled_storm"))
							mu.Lock()
							defer mu.Unlock()
							switch {
							case err == nil:
								recorded++
							case errors.Is(err, ErrDuplicate):
								duplicates++
							default:
								t.Errorf("delivery %d: %v", i, err)
							}
						})
					}
					wg.Wait()
					if recorded != 1 || duplicates != 39 || testkit.PaymentRows(t, s.pool, "tx_pooled_storm") != 1 {
						t.Fatalf("recorded %d, duplicates %d, rows %d; want 1, 39, 1", recorded, duplicates, testkit.PaymentRows(t, s.pool, "tx_pooled_storm"))
					}
				})
			}
		}
	}
}

func TestServerSideTimeoutsReachPooledSessions(t *testing.T) {
	settings := map[string]string{"statement_timeout": "100ms", "lock_timeout": "2s", "idle_in_transaction_session_timeout": "10s"}
	s, db := pooledSetup(t, ExecExec, settings)
	var got string
	if err := s.pool.QueryRow(context.Background(), "SELECT current_setting('statement_timeout')").Scan(&got); err != nil || got != "100ms" {
		t.Fatalf("statement_timeout through PgBouncer = %q, %v; want the database's 100ms", got, err)
	}
	db.Exec(t, testkit.SlowInsert{Sleep: 2 * time.Second}.SQL())
	p := newPayment("tx_slow")
	_, err := s.Payments().RecordPayment(context.Background(), p)
	var pgErr *pgconn.PgError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &pgErr) || pgErr.Code != codeQueryCanceled {
		t.Fatalf("got %v, want ErrUnavailable wrapping the server's 57014", err)
	}
	if n := testkit.PaymentRows(t, s.pool, p.TransactionID); n != 0 {
		t.Fatalf("%d rows, want 0", n)
	}
}

// TestInterruptedCommitThroughPgBouncerConverges: COMMIT (of
// RecordPaymentFunc's transaction) outlives CommitTimeout; pgx sends its
// cancel request to PgBouncer, which forwards it to the server session
// running the COMMIT. Either way the retry converges on one row.
func TestInterruptedCommitThroughPgBouncerConverges(t *testing.T) {
	for _, tc := range []struct {
		name      string
		committed bool
		retry     error
	}{
		{"ServerRollsBack", false, nil},
		{"ServerCommitsAnyway", true, ErrDuplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// CommitTimeout leaves the COMMIT time to reach the trigger
			// through PgBouncer on a loaded machine (at 100ms the cancel
			// once arrived first, so the server rolled back what the case
			// means to commit), and still ends long before its 3s sleep.
			s, db := pooledSetup(t, ExecExec, pooledTimeouts, func(c *Config) { c.CommitTimeout = time.Second })
			db.Exec(t, testkit.SlowInsert{Sleep: 3 * time.Second, AtCommit: true, IgnoreCancel: tc.committed}.SQL())
			p := newPayment("tx_commit")
			_, err := recordInTx(s, context.Background(), p)
			if !errors.Is(err, ErrCommitUnknown) || isSuccessLike(err) {
				t.Fatalf("got %v, want ErrCommitUnknown", err)
			}
			db.Exec(t, "DROP TRIGGER slow_insert ON payments") // waits for the COMMIT's outcome
			_, err = s.Payments().RecordPayment(context.Background(), p)
			if err != nil && !errors.Is(err, ErrDuplicate) || !errors.Is(err, tc.retry) {
				t.Fatalf("retry: %v, want %v", err, tc.retry)
			}
			if n := testkit.PaymentRows(t, s.pool, p.TransactionID); n != 1 {
				t.Fatalf("%d rows, want 1", n)
			}
		})
	}
}

// TestLostServerSessionsAndACrashedPgBouncerAreUnavailable: an insert in
// flight when its server session is terminated (a Postgres restart behind
// the pooler), or when PgBouncer itself dies, is ErrUnavailable, never
// success; once PgBouncer is back the sender's retries converge on one row.
// In a transaction nothing is recorded: COMMIT was never sent. In autocommit
// the statement commits on its own: when only the client's side of the
// connection is lost (PgBouncer killed), the server goes on and commits, the
// answer is ErrCommitUnknown, and the retry finds a duplicate.
func TestLostServerSessionsAndACrashedPgBouncerAreUnavailable(t *testing.T) {
	pgb := scaletest.PgBouncerEnv(t)
	for _, path := range recordPaths {
		for _, fault := range []struct {
			name   string
			strike func(t *testing.T, db scaletest.Database)
		}{
			{"ServerSessionsTerminated", func(t *testing.T, db scaletest.Database) { db.TerminateBackends(t) }},
			{"PgBouncerKilled", func(t *testing.T, _ scaletest.Database) { pgb.Crash(t) }},
		} {
			t.Run(path.name+"/"+fault.name, func(t *testing.T) {
				s, db := pooledSetup(t, ExecExec, pooledTimeouts)
				db.Exec(t, testkit.SlowInsert{Sleep: 2 * time.Second}.SQL())
				p := newPayment("tx_fault")
				done := make(chan error, 1)
				go func() {
					_, err := path.record(s, context.Background(), p)
					done <- err
				}()
				direct := testkit.Connect(t, db.Direct)
				testkit.WaitFor(t, 10*time.Second, "the insert sleeping on the server", func() bool { return testkit.Sleeping(t, direct, "") > 0 })
				fault.strike(t, db)
				inFlight := <-done
				if !errors.Is(inFlight, ErrUnavailable) || isSuccessLike(inFlight) {
					t.Fatalf("insert in flight: %v, want ErrUnavailable", inFlight)
				}
				db.Exec(t, "DROP TRIGGER slow_insert ON payments") // waits for the insert's end
				recorded := testkit.PaymentRows(t, s.pool, p.TransactionID)
				switch {
				case recorded == 1 && !errors.Is(inFlight, ErrCommitUnknown):
					t.Fatalf("the insert in flight committed but was answered %v, want ErrCommitUnknown", inFlight)
				case recorded == 1 && path.name == "Transaction", recorded > 1:
					t.Fatalf("%d rows after the fault, want 0", recorded)
				}
				t.Logf("in flight: %v; %d rows after the fault", inFlight, recorded)
				var err error
				for i := 0; i < 20; i++ { // the PSP's retries
					if _, err = path.record(s, context.Background(), p); err == nil || errors.Is(err, ErrDuplicate) {
						break
					}
					if !errors.Is(err, ErrUnavailable) {
						t.Fatalf("retry %d: %v, want nil, ErrDuplicate or ErrUnavailable", i, err)
					}
					time.Sleep(100 * time.Millisecond)
				}
				if recorded == 1 && !errors.Is(err, ErrDuplicate) || recorded == 0 && err != nil {
					t.Fatalf("retries: %v; want ErrDuplicate if the insert in flight committed, else nil", err)
				}
				if n := testkit.PaymentRows(t, s.pool, p.TransactionID); n != 1 {
					t.Fatalf("%d rows, want 1", n)
				}
			})
		}
	}
}

func TestMigrateBehindPgBouncer(t *testing.T) {
	pgb := scaletest.PgBouncerEnv(t)
	db := pgb.Database(t, pooledTimeouts)
	ctx := context.Background()

	t.Run("PooledModeWithoutADirectURLRefuses", func(t *testing.T) {
		s, err := Open(ctx, Config{URL: db.Pooled, ExecMode: ExecExec})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Migrate(ctx); err == nil || !strings.Contains(err.Error(), "MigrateURL") {
			t.Fatalf("Migrate = %v, want a refusal naming MigrateURL", err)
		}
	})

	t.Run("ReplicasMigrateTogetherOverTheDirectURL", func(t *testing.T) {
		const replicas = 3
		errs := make([]error, replicas)
		var wg sync.WaitGroup
		for i := range replicas {
			wg.Go(func() {
				s, err := Open(ctx, Config{URL: db.Pooled, ExecMode: ExecExec, MigrateURL: db.Direct})
				if err != nil {
					errs[i] = err
					return
				}
				defer s.Close()
				errs[i] = s.Migrate(ctx)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
		}
		s, err := Open(ctx, Config{URL: db.Pooled, ExecMode: ExecExec})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var dup int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT version_id FROM goose_db_version
			WHERE is_applied GROUP BY version_id HAVING count(*) > 1) d`).Scan(&dup); err != nil || dup != 0 {
			t.Fatalf("migrations recorded twice: %d, %v", dup, err)
		}
		if _, err := s.Payments().RecordPayment(ctx, newPayment("tx_migrated")); err != nil {
			t.Fatalf("after migrating: %v", err)
		}
	})
}
