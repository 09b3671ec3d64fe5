package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/paylock/paylock/internal/faultproxy"
	"github.com/paylock/paylock/internal/testkit"
)

// plainInsertSQL is insertPaymentSQL without ON CONFLICT: a duplicate then
// raises 23505 on payments_transaction_id_key, which drives RecordPayment
// down its unique-violation path (and, in a transaction, the aborted
// transaction that follows).
const plainInsertSQL = `
INSERT INTO payments (source, transaction_id, amount, currency, payload, event_id)
VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''))
RETURNING received_at`

// insertModes are the two ways the insert can report a conflict; tests of
// the duplicate rules run under both.
var insertModes = []struct {
	name string
	sql  string
}{
	{"OnConflictDoNothing", insertPaymentSQL},
	{"UniqueViolation", plainInsertSQL},
}

// recordPaths are the two ways to record a payment: one statement in
// autocommit (RecordPayment) and a transaction with work of the caller's
// (RecordPaymentFunc); tests of the outcome rules run under both.
var recordPaths = []struct {
	name   string
	record func(s *Store, ctx context.Context, p Payment) (Payment, error)
}{
	{"Autocommit", func(s *Store, ctx context.Context, p Payment) (Payment, error) {
		return s.Payments().RecordPayment(ctx, p)
	}},
	{"Transaction", recordInTx},
}

// recordInTx records p through the transactional path, with an fn that
// writes nothing.
func recordInTx(s *Store, ctx context.Context, p Payment) (Payment, error) {
	return s.Payments().RecordPaymentFunc(ctx, p, func(context.Context, pgx.Tx, Payment) error { return nil })
}

type bundle struct {
	store *Store
	url   string    // DATABASE_URL with search_path set to the test's schema
	admin *pgx.Conn // on the test's schema, without the pool's timeouts
}

// setup gives the test a schema of its own, migrated with the default
// Config, a Store on it with the options applied to its Config, and an admin
// connection for arranging faults.
func setup(t testing.TB, opts ...func(*Config)) *bundle {
	t.Helper()
	u := testkit.Schema(t)
	ctx := context.Background()
	migrator, err := Open(ctx, Config{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer migrator.Close()
	if err := migrator.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := Config{URL: u}
	for _, opt := range opts {
		opt(&cfg)
	}
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &bundle{store: s, url: u, admin: testkit.Connect(t, u)}
}

func newPayment(id string) Payment {
	return Payment{
		TransactionID: id,
		Amount:        1999,
		Currency:      "EUR",
		Payload:       []byte(`{"transaction_id":"` + id + `","amount":1999,"currency":"EUR","ref":"` + id + `"}`),
		EventID:       "evt_" + id,
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// isSuccessLike reports whether err is an outcome the handler would answer
// with 2xx.
func isSuccessLike(err error) bool {
	return err == nil || errors.Is(err, ErrDuplicate) || errors.Is(err, ErrMismatch)
}

func TestRecordPaymentRecordsOnceAndConfirmsDuplicates(t *testing.T) {
	t.Parallel()
	for _, path := range recordPaths {
		for _, mode := range insertModes {
			t.Run(path.name+"/"+mode.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				b.store.payments.insert = mode.sql
				ctx := context.Background()
				p := newPayment("tx_1")

				rec, err := path.record(b.store, ctx, p)
				if err != nil {
					t.Fatalf("first delivery: %v", err)
				}
				if rec.ReceivedAt.IsZero() {
					t.Error("first delivery: ReceivedAt not set")
				}
				stored, err := b.store.Payments().Payment(ctx, "", p.TransactionID)
				if err != nil {
					t.Fatal(err)
				}
				if stored.Amount != p.Amount || stored.Currency != p.Currency || stored.EventID != p.EventID ||
					!stored.ReceivedAt.Equal(rec.ReceivedAt) || !jsonEqual(t, stored.Payload, p.Payload) {
					t.Errorf("stored %+v, recorded %+v", stored, rec)
				}

				t.Run("SameAgainIsDuplicate", func(t *testing.T) {
					got, err := path.record(b.store, ctx, p)
					if !errors.Is(err, ErrDuplicate) || errors.Is(err, ErrMismatch) || errors.Is(err, ErrUnavailable) {
						t.Fatalf("got %v, want ErrDuplicate only", err)
					}
					if !got.ReceivedAt.Equal(rec.ReceivedAt) || got.Amount != p.Amount || got.EventID != p.EventID || got.Payload != nil {
						t.Errorf("returned %+v, want the stored row's summary (no payload) of %+v", got, stored)
					}
				})

				for name, change := range map[string]func(*Payment){
					"OtherAmountIsMismatch":   func(q *Payment) { q.Amount++ },
					"OtherCurrencyIsMismatch": func(q *Payment) { q.Currency = "USD" },
				} {
					t.Run(name, func(t *testing.T) {
						q := p
						q.Payload = []byte(`{"changed":true}`)
						change(&q)
						got, err := path.record(b.store, ctx, q)
						if !errors.Is(err, ErrMismatch) || errors.Is(err, ErrDuplicate) {
							t.Fatalf("got %v, want ErrMismatch", err)
						}
						if got.Amount != p.Amount || got.Currency != p.Currency {
							t.Errorf("returned %+v, want the stored row", got)
						}
						after, err := b.store.Payments().Payment(ctx, "", p.TransactionID)
						if err != nil {
							t.Fatal(err)
						}
						if !reflect.DeepEqual(after, stored) {
							t.Errorf("stored row changed: %+v, was %+v", after, stored)
						}
					})
				}

				if n := testkit.PaymentRows(t, b.admin, p.TransactionID); n != 1 {
					t.Errorf("%d rows, want 1", n)
				}
			})
		}
	}
}

func TestEmptyEventIDIsStoredAsNull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := newPayment("tx_no_event")
	p.EventID = ""
	if _, err := b.store.Payments().RecordPayment(ctx, p); err != nil {
		t.Fatal(err)
	}
	var isNull bool
	if err := b.admin.QueryRow(ctx, "SELECT event_id IS NULL FROM payments WHERE transaction_id = $1",
		p.TransactionID).Scan(&isNull); err != nil {
		t.Fatal(err)
	}
	if !isNull {
		t.Error("event_id is not NULL")
	}
	got, err := b.store.Payments().Payment(ctx, "", p.TransactionID)
	if err != nil || got.EventID != "" {
		t.Errorf("Payment: %+v, %v", got, err)
	}
}

func TestConcurrentDeliveriesRecordOnce(t *testing.T) {
	t.Parallel()
	for _, path := range recordPaths {
		for _, mode := range insertModes {
			t.Run(path.name+"/"+mode.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				b.store.payments.insert = mode.sql
				p := newPayment("tx_concurrent")

				const n = 50
				errs := make(chan error, n)
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() {
						_, err := path.record(b.store, context.Background(), p)
						errs <- err
					})
				}
				wg.Wait()
				close(errs)

				var recorded, duplicates int
				for err := range errs {
					switch {
					case err == nil:
						recorded++
					case errors.Is(err, ErrDuplicate):
						duplicates++
					default:
						t.Errorf("unexpected outcome: %v", err)
					}
				}
				if recorded != 1 || duplicates != n-1 {
					t.Errorf("%d recorded, %d duplicates; want 1 and %d", recorded, duplicates, n-1)
				}
				if got := testkit.PaymentRows(t, b.admin, p.TransactionID); got != 1 {
					t.Errorf("%d rows, want 1", got)
				}
			})
		}
	}
}

func TestUniqueViolationOnAnotherIndexIsNotADuplicate(t *testing.T) {
	t.Parallel()
	for _, path := range recordPaths {
		for _, mode := range insertModes {
			t.Run(path.name+"/"+mode.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				b.store.payments.insert = mode.sql
				testkit.Exec(t, b.admin, "CREATE UNIQUE INDEX payments_ref_key ON payments ((payload->>'ref'))")
				ctx := context.Background()

				first := newPayment("tx_a")
				first.Payload = []byte(`{"ref":"shared"}`)
				if _, err := path.record(b.store, ctx, first); err != nil {
					t.Fatal(err)
				}
				second := newPayment("tx_b")
				second.Payload = []byte(`{"ref":"shared"}`)
				_, err := path.record(b.store, ctx, second)
				if isSuccessLike(err) || errors.Is(err, ErrUnavailable) {
					t.Fatalf("got %v, want a plain error", err)
				}
				var pgErr *pgconn.PgError
				if !errors.As(err, &pgErr) || pgErr.Code != codeUniqueViolation || pgErr.ConstraintName != "payments_ref_key" {
					t.Errorf("got %v, want the driver's 23505 on payments_ref_key wrapped", err)
				}
				if n := testkit.PaymentRows(t, b.admin, second.TransactionID); n != 0 {
					t.Errorf("%d rows for %s, want 0", n, second.TransactionID)
				}
			})
		}
	}
}

func TestInvalidPaymentsAreErrorsNotRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name   string
		change func(*Payment)
	}{
		{"AmountNotPositive", func(p *Payment) { p.Amount = 0 }},
		{"CurrencyTooLong", func(p *Payment) { p.Currency = "EURO" }},
		{"PayloadNotJSON", func(p *Payment) { p.Payload = []byte("{not json") }},
		{"PayloadMissing", func(p *Payment) { p.Payload = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPayment("tx_" + tc.name)
			tc.change(&p)
			_, err := b.store.Payments().RecordPayment(context.Background(), p)
			if isSuccessLike(err) || errors.Is(err, ErrUnavailable) {
				t.Fatalf("got %v, want a plain error", err)
			}
			if n := testkit.PaymentRows(t, b.admin, p.TransactionID); n != 0 {
				t.Errorf("%d rows, want 0", n)
			}
		})
	}
}

// TestIsTxIDConflictClassifiesRealErrors feeds the classification errors
// that Postgres really raises.
func TestIsTxIDConflictClassifiesRealErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	testkit.Exec(t, b.admin, "CREATE UNIQUE INDEX payments_ref_key ON payments ((payload->>'ref'))")
	testkit.Exec(t, b.admin, `INSERT INTO payments (transaction_id, amount, currency, payload) VALUES ('tx_1', 1, 'EUR', '{"ref":"r1"}')`)

	insert := func(txID, ref string, amount int) error {
		_, err := b.admin.Exec(ctx,
			"INSERT INTO payments (transaction_id, amount, currency, payload) VALUES ($1, $2, 'EUR', jsonb_build_object('ref', $3::text))",
			txID, amount, ref)
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"DuplicateTransactionID", insert("tx_1", "r2", 1), true},
		{"WrappedDuplicateTransactionID", fmt.Errorf("insert: %w", insert("tx_1", "r2", 1)), true},
		{"DuplicateOnAnotherIndex", insert("tx_2", "r1", 1), false},
		{"CheckViolation", insert("tx_3", "r3", 0), false},
		{"NoError", nil, false},
		{"NotADriverError", errors.New("23505 payments_transaction_id_key"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isTxIDConflict(tc.err); got != tc.want {
				t.Errorf("isTxIDConflict(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestUniqueViolationAbortsTheTransaction shows the trap the store steps
// around: after a 23505 inside a transaction, every statement fails and
// COMMIT rolls back, so the stored row must be read outside it.
func TestUniqueViolationAbortsTheTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	testkit.Exec(t, b.admin, `INSERT INTO payments (transaction_id, amount, currency, payload) VALUES ('tx_1', 1, 'EUR', '{}')`)

	tx, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `INSERT INTO payments (transaction_id, amount, currency, payload) VALUES ('tx_1', 1, 'EUR', '{}')`)
	if !isTxIDConflict(err) {
		t.Fatalf("insert: %v, want 23505 on %s", err, txIDConstraint)
	}
	var n int
	err = tx.QueryRow(ctx, "SELECT count(*) FROM payments WHERE transaction_id = 'tx_1'").Scan(&n)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25P02" {
		t.Errorf("read in the aborted transaction: %v, want 25P02", err)
	}
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Errorf("commit: %v, want pgx.ErrTxCommitRollback", err)
	}

	// The store, driven down the same path, answers from a fresh read.
	b.store.payments.insert = plainInsertSQL
	p := Payment{TransactionID: "tx_1", Amount: 1, Currency: "EUR", Payload: []byte(`{}`)}
	if _, err := recordInTx(b.store, ctx, p); !errors.Is(err, ErrDuplicate) {
		t.Errorf("RecordPayment: %v, want ErrDuplicate", err)
	}
}

// TestUniqueViolationAtCommitIsConfirmedAsDuplicate covers a conflict that
// surfaces only at COMMIT, as a deferrable constraint would raise it.
func TestUniqueViolationAtCommitIsConfirmedAsDuplicate(t *testing.T) {
	t.Parallel()
	for _, path := range recordPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			testkit.Exec(t, b.admin, `ALTER TABLE payments DROP CONSTRAINT payments_transaction_id_key,
				ADD CONSTRAINT payments_transaction_id_key UNIQUE (source, transaction_id) DEFERRABLE INITIALLY DEFERRED`)
			// ON CONFLICT cannot use a deferrable arbiter, so the plain insert runs.
			b.store.payments.insert = plainInsertSQL
			ctx := context.Background()
			p := newPayment("tx_deferred")
			if _, err := path.record(b.store, ctx, p); err != nil {
				t.Fatal(err)
			}
			if _, err := path.record(b.store, ctx, p); !errors.Is(err, ErrDuplicate) {
				t.Errorf("same again: %v, want ErrDuplicate", err)
			}
			q := p
			q.Amount++
			if _, err := path.record(b.store, ctx, q); !errors.Is(err, ErrMismatch) {
				t.Errorf("other amount: %v, want ErrMismatch", err)
			}
			if n := testkit.PaymentRows(t, b.admin, p.TransactionID); n != 1 {
				t.Errorf("%d rows, want 1", n)
			}
		})
	}
}

func TestConflictWithoutStoredRowIsUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// As if the conflicting transaction had gone by the time of the read.
	_, err := b.store.payments.confirmConflict(context.Background(), newPayment("tx_gone"))
	if !errors.Is(err, ErrUnavailable) || isSuccessLike(err) {
		t.Errorf("got %v, want ErrUnavailable", err)
	}
}

func TestUnreachableDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	base := testkit.DatabaseURL(t)

	t.Run("OpenOnAClosedPort", func(t *testing.T) {
		t.Parallel()
		ln := testkit.Listen(t)
		addr := ln.Addr().String()
		ln.Close()
		s, err := Open(context.Background(), Config{URL: testkit.WithHost(t, base, addr) + "&connect_timeout=2"})
		if err == nil {
			s.Close()
			t.Fatal("Open succeeded")
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("got %v, want ErrUnavailable", err)
		}
	})

	t.Run("ServerVanishes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		up, err := url.Parse(b.url)
		if err != nil {
			t.Fatal(err)
		}
		px, err := faultproxy.New(up.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { px.Close() })
		ctx := context.Background()
		s, err := Open(ctx, Config{URL: testkit.WithHost(t, b.url, px.Addr()) + "&connect_timeout=2"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Payments().RecordPayment(ctx, newPayment("tx_before")); err != nil {
			t.Fatalf("through the proxy: %v", err)
		}

		px.Close() // the server is gone: open connections drop, new ones are refused

		_, err = s.Payments().RecordPayment(ctx, newPayment("tx_after"))
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("RecordPayment: %v, want ErrUnavailable", err)
		}
		if _, err := s.Payments().Payment(ctx, "", "tx_before"); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Payment: %v, want ErrUnavailable", err)
		}
		if err := s.Ping(ctx); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Ping: %v, want ErrUnavailable", err)
		}
		if n := testkit.PaymentRows(t, b.admin, "tx_after"); n != 0 {
			t.Errorf("%d rows, want 0", n)
		}
	})
}

func TestStatementTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, path := range recordPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *Config) { c.StatementTimeout = 100 * time.Millisecond })
			testkit.SlowInsert{Sleep: 2 * time.Second}.Install(t, b.admin)
			ctx := context.Background()
			p := newPayment("tx_slow")

			_, err := path.record(b.store, ctx, p)
			if !errors.Is(err, ErrUnavailable) || isSuccessLike(err) {
				t.Fatalf("got %v, want ErrUnavailable", err)
			}
			// The context has no deadline: 57014 can only be the server's
			// statement_timeout, so the session parameter took effect. The
			// server answered, so the outcome is known: not recorded.
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != codeQueryCanceled || errors.Is(err, ErrCommitUnknown) {
				t.Errorf("got %v, want the server's 57014 wrapped, not ErrCommitUnknown", err)
			}
			if n := testkit.PaymentRows(t, b.admin, p.TransactionID); n != 0 {
				t.Errorf("%d rows, want 0", n)
			}
		})
	}
}

func TestCancelledInsertIsAnErrorAndRecordsNothing(t *testing.T) {
	t.Parallel()
	for _, path := range recordPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			testkit.SlowInsert{Sleep: time.Second}.Install(t, b.admin)
			p := newPayment("tx_cancelled")

			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			_, err := path.record(b.store, ctx, p)
			if isSuccessLike(err) {
				t.Fatalf("got %v, want an error", err)
			}
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("got %v, want ErrUnavailable", err)
			}

			// DROP TRIGGER waits for the abandoned insert's transaction to
			// end; then recording again must be new, not a duplicate.
			testkit.Exec(t, b.admin, "DROP TRIGGER slow_insert ON payments")
			if _, err := path.record(b.store, context.Background(), p); err != nil {
				t.Errorf("retry: %v, want nil (nothing was recorded before)", err)
			}
		})
	}
}

// TestInterruptedCommitIsUnknownAndRetryConverges stalls the commit: in a
// transaction, COMMIT past CommitTimeout; in autocommit, the statement (whose
// implicit transaction commits before the server answers) past the caller's
// deadline. The client cannot know the outcome: pgx sends a cancel request
// and drops the connection, and the server may roll back (the cancel landed)
// or commit (it came too late). Either way the answer is not success, it is
// ErrCommitUnknown whenever the server did commit, and the retry converges.
func TestInterruptedCommitIsUnknownAndRetryConverges(t *testing.T) {
	t.Parallel()
	for _, path := range recordPaths {
		for _, tc := range []struct {
			name      string
			committed bool // whether the server commits despite the cancel
			retry     error
		}{
			{"ServerRollsBack", false, nil},
			{"ServerCommitsAnyway", true, ErrDuplicate},
		} {
			t.Run(path.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				// The deadlines leave a loaded machine (the whole suite runs
				// in parallel) time to reach the COMMIT: a cancel that lands
				// before it is a known rollback, not the case under test.
				const deadline = 2 * time.Second
				b := setup(t, func(c *Config) { c.CommitTimeout = deadline })
				// A cancel that lands before the trigger's sleep began (the
				// machine stalled for the whole deadline) rolls back even
				// when the trigger ignores cancels; what the server did is
				// read back before the retry, and a case that wants a commit
				// tries again, with a new transaction, until it has one.
				for attempt := 1; ; attempt++ {
					committed := interruptCommit(t, b, path.record, path.name == "Autocommit", deadline, tc.committed, fmt.Sprintf("tx_commit_%d", attempt))
					if committed == tc.committed {
						break
					}
					if !tc.committed || attempt == 3 {
						t.Fatalf("attempt %d: server committed=%v, want %v", attempt, committed, tc.committed)
					}
					t.Logf("attempt %d: the cancel landed before the commit's sleep; again", attempt)
				}
			})
		}
	}
}

// interruptCommit records a payment under tx through record while a trigger
// stalls its commit past deadline, checks the first answer is not success
// (ErrCommitUnknown when the server may have committed), reads back whether
// the server committed, and checks that a retry from another replica
// converges to exactly one row: ErrDuplicate if it had committed, success
// otherwise.
func interruptCommit(t *testing.T, b *bundle, record func(*Store, context.Context, Payment) (Payment, error),
	autocommit bool, deadline time.Duration, ignoreCancel bool, tx string) (committed bool) {
	t.Helper()
	// Long enough that only the cancel request, not the sleep's end,
	// decides the outcome.
	testkit.SlowInsert{Sleep: 10 * time.Second, AtCommit: true, IgnoreCancel: ignoreCancel}.Install(t, b.admin)
	ctx := context.Background()
	p := newPayment(tx)

	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	if autocommit {
		rctx, cancel = context.WithTimeout(ctx, deadline)
	}
	_, err := record(b.store, rctx, p)
	cancel()
	if !errors.Is(err, ErrUnavailable) || isSuccessLike(err) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	// In a transaction COMMIT was sent and no answer came. In autocommit
	// the server may answer the cancel with an ERROR (rolled back, a known
	// outcome); when it commits anyway, no answer ever says so.
	if (ignoreCancel || !autocommit) && !errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("got %v, want ErrCommitUnknown", err)
	}

	// DROP TRIGGER waits until the sent commit has finished on the server,
	// whichever way it went; the sender's retry, which may reach another
	// replica, then sees its outcome.
	testkit.Exec(t, b.admin, "DROP TRIGGER slow_insert ON payments; DROP FUNCTION slow_insert()")
	committed = testkit.PaymentRows(t, b.admin, tx) == 1
	replica, err := Open(ctx, Config{URL: b.url})
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close()
	_, err = record(replica, ctx, p)
	want := error(nil)
	if committed {
		want = ErrDuplicate
	}
	if !errors.Is(err, want) || (want == nil && err != nil) {
		t.Errorf("retry: %v, want %v (server committed=%v)", err, want, committed)
	}
	if n := testkit.PaymentRows(t, b.admin, tx); n != 1 {
		t.Errorf("%d rows, want 1", n)
	}
	return committed
}

func TestPaymentNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.store.Payments().Payment(context.Background(), "", "tx_missing")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("got %v, want ErrNotFound", err)
	}
}

func TestReplicasMigrateTogether(t *testing.T) {
	t.Parallel()
	u := testkit.Schema(t)
	ctx := context.Background()

	const replicas = 3
	stores := make([]*Store, replicas)
	for i := range stores {
		s, err := Open(ctx, Config{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		stores[i] = s
	}
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}

	admin := testkit.Connect(t, u)
	migrations := func() (applied, versionOne int) {
		t.Helper()
		err := admin.QueryRow(ctx,
			"SELECT count(*), count(*) FILTER (WHERE version_id = 1) FROM goose_db_version WHERE is_applied").
			Scan(&applied, &versionOne)
		if err != nil {
			t.Fatal(err)
		}
		return applied, versionOne
	}
	if tables := testkit.Count(t, admin, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'payments'"); tables != 1 {
		t.Errorf("%d payments tables, want 1", tables)
	}
	applied, versionOne := migrations()
	if versionOne != 1 {
		t.Errorf("migration 1 recorded %d times, want once", versionOne)
	}

	if err := stores[0].Migrate(ctx); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	if again, _ := migrations(); again != applied {
		t.Errorf("Migrate again recorded %d migrations, had %d; want a no-op", again, applied)
	}
}

func TestOpenSetsSessionTimeoutsAndKeepsURLParameters(t *testing.T) {
	t.Parallel()
	u := testkit.Schema(t)
	ctx := context.Background()
	s, err := Open(ctx, Config{URL: u + "&application_name=paylock-test", LockTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var schema, searchPath, app, statement, lockWait, idleInTx string
	err = s.Pool().QueryRow(ctx, `SELECT current_schema(), current_setting('search_path'),
		current_setting('application_name'), current_setting('statement_timeout'),
		current_setting('lock_timeout'), current_setting('idle_in_transaction_session_timeout')`).
		Scan(&schema, &searchPath, &app, &statement, &lockWait, &idleInTx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{searchPath, "paylock-test", "5s", "1500ms", "10s"}
	got := []string{schema, app, statement, lockWait, idleInTx}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("current_schema, application_name, statement_timeout, lock_timeout, idle_in_transaction_session_timeout = %q, want %q", got, want)
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"EmptyURL", Config{}},
		{"NegativeMaxConns", Config{URL: "postgres://localhost", MaxConns: -1}},
		{"NegativeStatementTimeout", Config{URL: "postgres://localhost", StatementTimeout: -time.Second}},
		{"NegativeCommitTimeout", Config{URL: "postgres://localhost", CommitTimeout: -time.Second}},
		{"UnparsableURL", Config{URL: "postgres://localhost/?sslmode=sometimes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(context.Background(), tc.cfg)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if errors.Is(err, ErrUnavailable) {
				t.Errorf("got %v; a bad config is not a transient failure", err)
			}
		})
	}
}

func TestTransientClassification(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Severity: "ERROR", Code: code} }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"SerializationFailure", pg("40001"), true},
		{"DeadlockDetected", pg("40P01"), true},
		{"StatementTimeout", pg("57014"), true},
		{"LockTimeout", pg("55P03"), true},
		{"AdminShutdown", pg("57P01"), true},
		{"CannotConnectNow", pg("57P03"), true},
		{"TooManyConnections", pg("53300"), true},
		{"ConnectionFailure", pg("08006"), true},
		{"IdleInTransactionTimeout", pg("25P03"), true},
		{"ReadOnlyStandby", pg("25006"), true},
		{"UniqueViolation", pg("23505"), false},
		{"CheckViolation", pg("23514"), false},
		{"InvalidJSON", pg("22P02"), false},
		{"UndefinedTable", pg("42P01"), false},
		{"ContextCanceled", fmt.Errorf("query: %w", context.Canceled), true},
		{"ContextDeadline", fmt.Errorf("query: %w", context.DeadlineExceeded), true},
		{"UnexpectedEOF", fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), true},
		{"ConnectionRefused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
		{"TxCommitRollback", pgx.ErrTxCommitRollback, false},
		{"SomethingElse", errors.New("cannot encode"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := transient(tc.err); got != tc.want {
				t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
			wrapped := translate("op", tc.err)
			if got := errors.Is(wrapped, ErrUnavailable); got != tc.want {
				t.Errorf("translate: errors.Is(%v, ErrUnavailable) = %v, want %v", wrapped, got, tc.want)
			}
			if !errors.Is(wrapped, tc.err) {
				t.Errorf("translate dropped the cause: %v", wrapped)
			}
		})
	}
}

func TestCommitFailedOnlyWhenTheServerSaysSo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"ErrorAtCommit", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "40001"}, true},
		{"TxAlreadyAborted", pgx.ErrTxCommitRollback, true},
		{"FatalAtCommit", &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}, false},
		{"CompletionUnknown", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "40003"}, false},
		{"Timeout", fmt.Errorf("commit: %w", context.DeadlineExceeded), false},
		{"ConnectionLost", fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := commitFailed(tc.err); got != tc.want {
				t.Errorf("commitFailed(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	if !errors.Is(ErrCommitUnknown, ErrUnavailable) {
		t.Error("ErrCommitUnknown does not wrap ErrUnavailable")
	}
}

func TestMigrateWithoutSchemaFails(t *testing.T) {
	t.Parallel()
	u := testkit.WithSearchPath(t, testkit.DatabaseURL(t), "no_such_schema_for_paylock")
	s, err := Open(context.Background(), Config{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(context.Background()); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("got %v, want a plain error", err)
	}
}

func TestValuesTheDatabaseRefusesAreInvalidPayloadNotUnavailable(t *testing.T) {
	t.Parallel()
	st := setup(t).store
	for name, payload := range map[string]string{
		"number beyond numeric's range": `{"n":1e200000}`,
		"number below numeric's scale":  `{"n":1e-20000}`,
	} {
		_, err := st.Payments().RecordPayment(context.Background(), Payment{
			TransactionID: "tx-" + strings.ReplaceAll(name, " ", "-"), Amount: 1, Currency: "JPY", Payload: []byte(payload)})
		if !errors.Is(err, ErrInvalidPayload) || errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: %v, want ErrInvalidPayload", name, err)
		}
	}
}

func TestConfirmComparesWithoutReadingThePayload(t *testing.T) {
	t.Parallel()
	st := setup(t).store
	ctx := context.Background()
	p := Payment{TransactionID: "tx-confirm", Amount: 10, Currency: "EUR", Payload: []byte(`{"big":"` + strings.Repeat("x", 1000) + `"}`)}
	if _, err := st.Payments().Confirm(ctx, p); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before recording: %v, want ErrNotFound", err)
	}
	if _, err := st.Payments().RecordPayment(ctx, p); err != nil {
		t.Fatal(err)
	}
	stored, err := st.Payments().Confirm(ctx, p)
	if !errors.Is(err, ErrDuplicate) || stored.Amount != 10 || stored.Payload != nil {
		t.Fatalf("same payment: %+v, %v; want ErrDuplicate without payload", stored, err)
	}
	p.Amount = 11
	if _, err := st.Payments().Confirm(ctx, p); !errors.Is(err, ErrMismatch) {
		t.Fatalf("other amount: %v, want ErrMismatch", err)
	}
}

func TestCancelledContextAfterTheInsertDoesNotCommit(t *testing.T) {
	t.Parallel()
	st := setup(t).store
	ctx, cancel := context.WithCancelCause(context.Background())
	lost := errors.New("lease lost")
	// Cancel from inside the transaction, after the INSERT: the lease was
	// lost while the statement ran.
	_, err := st.Payments().RecordPaymentFunc(ctx, Payment{TransactionID: "tx-lost", Amount: 1, Currency: "JPY", Payload: []byte(`{}`)},
		func(context.Context, pgx.Tx, Payment) error { cancel(lost); return nil })
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, lost) {
		t.Fatalf("err = %v, want ErrUnavailable wrapping the cause", err)
	}
	if _, err := st.Payments().Payment(context.Background(), "", "tx-lost"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("committed anyway: %v", err)
	}
}
