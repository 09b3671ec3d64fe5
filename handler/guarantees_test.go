package handler_test

// The guarantees of store/doc.go, tested where users meet them: a delivery
// over HTTP to a replica with a real store (Postgres) and a real lock
// (Redis), the database checked afterwards.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// appName is an application_name of the test's own, for its replica's
// sessions, so that testkit.Sleeping sees them and no other test's.
func appName(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("paylock-test-%d", time.Now().UnixNano())
}

// ledger makes the balances table an embedder's hook credits, and returns
// the hook (crediting each recorded payment's amount) and the balance.
func ledger(t *testing.T, st *store.Store) (hook func(context.Context, pgx.Tx, store.Payment) error, balance func() int) {
	t.Helper()
	testkit.Exec(t, st.Pool(), `CREATE TABLE balances (account text PRIMARY KEY, minor bigint NOT NULL)`)
	hook = func(ctx context.Context, tx pgx.Tx, p store.Payment) error {
		_, err := tx.Exec(ctx, `INSERT INTO balances (account, minor) VALUES ('merchant-1', $1)
			ON CONFLICT (account) DO UPDATE SET minor = balances.minor + EXCLUDED.minor`, p.Amount)
		return err
	}
	balance = func() int { return testkit.Count(t, st.Pool(), `SELECT coalesce(sum(minor), 0)::int FROM balances`) }
	return hook, balance
}

// TestACommitWhoseAnswerIsLostIs503AndTheRetryConvergesOnOneRow: the server
// commits the payment (and a hook's work with it) but its answer to COMMIT
// never reaches the replica (faultproxy drops it). The outcome is unknown,
// so the delivery is answered 503, never 2xx; the sender's retry finds the
// committed row and answers duplicate: one row, one credit.
func TestACommitWhoseAnswerIsLostIs503AndTheRetryConvergesOnOneRow(t *testing.T) {
	t.Parallel()
	for _, withHook := range []bool{false, true} {
		name := "autocommit"
		if withHook {
			name = "with a hook"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn, check := paylocktest.MigratedSchema(t)
			hook, balance := ledger(t, check)
			// COMMIT (the implicit one of the autocommit insert, or the
			// transaction's) sleeps on the server, long enough to drop its
			// answer while it runs.
			testkit.SlowInsert{Sleep: 500 * time.Millisecond, AtCommit: true}.Install(t, check.Pool())
			pg := proxy(t, hostOf(t, dsn))
			app := appName(t)
			cfg := handler.Config{RequestTimeout: 2 * time.Second}
			if withHook {
				cfg.OnPayment = hook
			}
			r := startReplica(t, paylocktest.Options{
				DSN:    testkit.WithHost(t, dsn, pg.Addr()) + "&application_name=" + app,
				Config: cfg,
				Store:  func(c *store.Config) { c.CommitTimeout = 2 * time.Second },
			})
			const tx = "tx-lost-commit"
			answered := make(chan answer, 1)
			go func() { answered <- pay(t, r.URL, tx, 100, "JPY") }()
			testkit.WaitFor(t, 10*time.Second, "the COMMIT under way on the server", func() bool { return testkit.Sleeping(t, check.Pool(), app) == 1 })
			pg.DropReplies(true)
			a := <-answered
			wantProblem(t, a, http.StatusServiceUnavailable)
			wantRetryAfter(t, a)
			// The server did commit: only its answer was lost.
			if n := testkit.PaymentRows(t, check.Pool(), tx); n != 1 {
				t.Fatalf("rows = %d after the lost answer, want 1 (the server committed)", n)
			}

			pg.Restore()
			wantResult(t, deliverUntilAcknowledged(t, r.URL, tx, 100), "duplicate")
			if n := testkit.PaymentRows(t, check.Pool(), tx); n != 1 {
				t.Fatalf("rows = %d after the retry, want 1", n)
			}
			if want := map[bool]int{false: 0, true: 100}[withHook]; balance() != want {
				t.Fatalf("balance %d, want %d: the hook's work commits with the payment, once", balance(), want)
			}
		})
	}
}

// TestALeaseLostInTheMiddleOfAnInsertCommitsNothing: the lock's key vanishes
// (a Redis failover without it, an eviction) while the payment's insert, or
// its hook's, runs on the server. The watchdog finds the lease lost and
// cancels the request's context, and so the statement on the server: it
// ends long before its sleep would have, nothing commits (neither the
// payment nor the hook's work), and the delivery is answered 503.
func TestALeaseLostInTheMiddleOfAnInsertCommitsNothing(t *testing.T) {
	t.Parallel()
	for _, slowTable := range []string{"payments", "balances"} {
		name := "the payment's insert"
		if slowTable == "balances" {
			name = "the hook's insert"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn, check := paylocktest.MigratedSchema(t)
			hook, balance := ledger(t, check)
			slow := testkit.SlowInsert{Table: slowTable, Sleep: 30 * time.Second}
			slow.Install(t, check.Pool())
			app := appName(t)
			r := startReplica(t, paylocktest.Options{
				DSN:    dsn + "&application_name=" + app,
				Config: handler.Config{LockTTL: 600 * time.Millisecond, OnPayment: hook},
			})
			const tx = "tx-lease-lost"
			start := time.Now()
			answered := make(chan answer, 1)
			go func() { answered <- pay(t, r.URL, tx, 100, "JPY") }()
			testkit.WaitFor(t, 10*time.Second, "the insert under way on the server", func() bool { return testkit.Sleeping(t, check.Pool(), app) == 1 })
			if err := r.Redis.Del(context.Background(), r.LockKey(tx)).Err(); err != nil {
				t.Fatal(err)
			}
			a := <-answered
			wantProblem(t, a, http.StatusServiceUnavailable)
			wantRetryAfter(t, a)
			// (A hook's error answers "unavailable" whatever its cause.)
			if slowTable == "payments" && !strings.HasSuffix(a.str("type"), "#lock-lost") {
				t.Errorf("type %q, want lock-lost", a.str("type"))
			}
			// Cancelled, not waited out: the statement ends on the server
			// long before its sleep would have.
			testkit.WaitFor(t, 5*time.Second, "the insert's end on the server", func() bool { return testkit.Sleeping(t, check.Pool(), app) == 0 })
			if took := time.Since(start); took >= slow.Sleep {
				t.Fatalf("the insert ran %v, its whole sleep: it was not cancelled", took)
			}
			if n, b := testkit.PaymentRows(t, check.Pool(), tx), balance(); n != 0 || b != 0 {
				t.Fatalf("after the lost lease: %d payments, balance %d; want neither committed", n, b)
			}
		})
	}
}

// otherSchema makes an empty schema of the test's own besides the one its
// replica works in, and returns its name.
func otherSchema(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(testkit.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("search_path")
}

// TestAUniqueViolationOfAHooksConstraintNamedLikeTheArbiterIsNotADuplicate:
// a hook writes to a table, in another schema, whose unique constraint
// bears the arbiter's very name, payments_transaction_id_key. Its
// violation (at the hook's insert, or deferred to COMMIT) is an error, 5xx:
// not "already recorded", and the delivery's payment is not recorded.
func TestAUniqueViolationOfAHooksConstraintNamedLikeTheArbiterIsNotADuplicate(t *testing.T) {
	t.Parallel()
	for _, deferred := range []bool{false, true} {
		name := "at the hook's insert"
		if deferred {
			name = "at COMMIT"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn, check := paylocktest.MigratedSchema(t)
			credits := pgx.Identifier{otherSchema(t), "credits"}.Sanitize()
			constraint := `CONSTRAINT payments_transaction_id_key UNIQUE (order_ref)`
			if deferred {
				constraint += ` DEFERRABLE INITIALLY DEFERRED`
			}
			testkit.Exec(t, check.Pool(), `CREATE TABLE `+credits+` (order_ref text NOT NULL, `+constraint+`)`)
			hook := func(ctx context.Context, tx pgx.Tx, p store.Payment) error {
				_, err := tx.Exec(ctx, `INSERT INTO `+credits+` (order_ref) VALUES ($1::jsonb->>'order_ref')`, string(p.Payload))
				return err
			}
			r := startReplica(t, paylocktest.Options{DSN: dsn, Config: handler.Config{OnPayment: hook}})
			body := func(tx string) []byte {
				return []byte(`{"transaction_id":"` + tx + `","amount":100,"currency":"JPY","order_ref":"o-1"}`)
			}
			wantResult(t, post(t, r.URL, "/webhooks/payments", "application/json", body("tx-h1")), "processed")
			for range 2 { // and its redelivery is no duplicate either
				a := post(t, r.URL, "/webhooks/payments", "application/json", body("tx-h2"))
				if a.status < 500 {
					t.Fatalf("a unique violation of the hook's payments_transaction_id_key answered %d: %s", a.status, a.raw)
				}
				wantProblem(t, a, a.status)
				if strings.Contains(a.raw, "payments_transaction_id_key") || strings.Contains(a.raw, "23505") {
					t.Fatalf("internal detail leaked to the client: %s", a.raw)
				}
			}
			if n := testkit.PaymentRows(t, check.Pool(), "tx-h2"); n != 0 {
				t.Fatalf("rows of tx-h2 = %d, want 0", n)
			}
			if n := testkit.Count(t, check.Pool(), `SELECT count(*) FROM `+credits); n != 1 {
				t.Fatalf("%d credits, want 1 (tx-h1's)", n)
			}
			wantResult(t, post(t, r.URL, "/webhooks/payments", "application/json", body("tx-h1")), "duplicate")
		})
	}
}

// crossSource is a source of one signature scheme in the cross-scheme
// isolation test: how its provider builds a delivery of a payment and
// signs it.
type crossSource struct {
	name    string
	scheme  signature.Scheme
	secrets string
	body    func(tx string) []byte
}

// sign returns body's delivery as the source's provider sends it, signed
// with secret: signature headers, or (Adyen) the body signed inside.
func (s crossSource) sign(t *testing.T, secret signature.Secret, id string, body []byte) (http.Header, []byte) {
	t.Helper()
	if s.scheme == signature.SchemeAdyen {
		signed, err := signature.SignAdyenNotification(secret, body)
		if err != nil {
			t.Fatal(err)
		}
		return http.Header{}, signed
	}
	return signature.Sign(s.scheme, secret, id, time.Now(), body), body
}

// adyenNotification is an unsigned notification of one successful
// authorisation, psp.
func adyenNotification(psp string) []byte {
	return []byte(`{"live":"false","notificationItems":[{"NotificationRequestItem":{` +
		`"amount":{"currency":"EUR","value":1000},"eventCode":"AUTHORISATION","eventDate":"2026-11-30T12:00:00+01:00",` +
		`"merchantAccountCode":"PaylockECOM","merchantReference":"order-1","originalReference":"","paymentMethod":"visa",` +
		`"pspReference":"` + psp + `","reason":"","success":"true"}}]}`)
}

// TestASecretOfOneSchemeVerifiesNoSourceOfAnother: three sources, each of
// another scheme (Standard Webhooks, Stripe, Adyen) and with its own
// secret. For every ordered pair, a delivery signed with one source's
// secret, as its provider signs, and sent to the other source (a Stripe
// secret on a Standard source, and every other pair) is refused 401 and
// writes nothing, takes no lock; each source's own deliveries are still
// accepted.
func TestASecretOfOneSchemeVerifiesNoSourceOfAnother(t *testing.T) {
	t.Parallel()
	sources := []crossSource{
		{"standard", signature.SchemeStandard, testSecret, func(tx string) []byte { return payJSON(tx, 100, "JPY") }},
		{"stripe", signature.SchemeStripe, "whsec_stripe_cross_scheme_secret", func(tx string) []byte { return stripeEvent(tx, "100") }},
		{"adyen", signature.SchemeAdyen, "0A1B2C3D4E5F60718293A4B5C6D7E8F90A1B2C3D4E5F60718293A4B5C6D7E8F9", adyenNotification},
	}
	providers := map[string]string{"standard": handler.PaymentsProvider, "stripe": "stripe", "adyen": "adyen"}
	secrets := map[string]signature.Secret{}
	var cfg handler.Config
	for _, s := range sources {
		v, sec := verifier(t, s.scheme, s.secrets)
		secrets[s.name] = sec[0]
		cfg.Sources = append(cfg.Sources, handler.Source{Name: s.name, Provider: providers[s.name], Verifier: v})
	}
	r := startReplica(t, paylocktest.Options{Config: cfg})

	for _, signer := range sources {
		for _, target := range sources {
			if signer.scheme == target.scheme {
				continue
			}
			t.Run(signer.name+" secret on a "+target.name+" source", func(t *testing.T) {
				tx := "forged-" + signer.name + "-" + target.name
				body := target.body(tx)
				if signer.scheme == signature.SchemeAdyen {
					body = signer.body(tx) // Adyen signs inside its own notifications only
				}
				h, signed := signer.sign(t, secrets[signer.name], "msg-"+tx, body)
				wantProblem(t, postRaw(t, r.URL+"/webhooks/"+target.name, h, signed), http.StatusUnauthorized)
			})
		}
	}
	if n := testkit.PaymentRows(t, r.Store.Pool(), ""); n != 0 {
		t.Fatalf("forged deliveries recorded %d payments", n)
	}
	if keys, err := r.Redis.Keys(context.Background(), r.Config.LockPrefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("forged deliveries left lock keys %v (%v)", keys, err)
	}
	// Each source's own secret still works.
	for _, s := range sources {
		tx := "own-" + s.name
		h, signed := s.sign(t, secrets[s.name], "msg-"+tx, s.body(tx))
		if a := postRaw(t, r.URL+"/webhooks/"+s.name, h, signed); a.status != http.StatusOK {
			t.Errorf("%s's own delivery: %d %s", s.name, a.status, a.raw)
		}
	}
	if n := testkit.PaymentRows(t, r.Store.Pool(), ""); n != len(sources) {
		t.Fatalf("%d payments recorded, want %d (one per source's own delivery)", n, len(sources))
	}
}

// TestAStormAgainstADeadRedis: three replicas whose Redis is a port nothing
// listens on, and concurrent deliveries of many payments. With the backstop
// policy each payment is recorded exactly once, by the database constraint
// alone: one processed answer per payment, duplicates for the rest, never
// an error. With reject every delivery is answered 503 with Retry-After and
// nothing is recorded.
func TestAStormAgainstADeadRedis(t *testing.T) {
	t.Parallel()
	for _, policy := range []handler.RedisPolicy{handler.Backstop, handler.Reject} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			reps := startReplicas(t, 3, paylocktest.Options{
				RedisURL: "redis://" + closedAddr(t) + "/0",
				Redis:    noRetries,
				Config:   handler.Config{RedisUnavailable: policy},
			})
			const txs, deliveries = 20, 10
			answers := make([]answer, txs*deliveries)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range answers {
				wg.Go(func() {
					<-start
					answers[i] = pay(t, reps[i%3].URL, fmt.Sprintf("tx-dead-%d", i%txs), 100, "JPY")
				})
			}
			close(start)
			wg.Wait()

			processed := map[string]int{}
			for i, a := range answers {
				tx := fmt.Sprintf("tx-dead-%d", i%txs)
				switch {
				case policy == handler.Reject:
					wantProblem(t, a, http.StatusServiceUnavailable)
					wantRetryAfter(t, a)
				case a.status != http.StatusOK:
					t.Fatalf("%s: %d %s, want 200", tx, a.status, a.raw)
				case a.str("result") == "processed":
					processed[tx]++
				case a.str("result") != "duplicate":
					t.Fatalf("%s: result %q", tx, a.str("result"))
				}
			}
			rows := testkit.PaymentRowsByTx(t, reps[0].Store.Pool(), "tx-dead-")
			if policy == handler.Reject {
				if len(rows) != 0 {
					t.Fatalf("reject recorded %v", rows)
				}
				return
			}
			for i := range txs {
				tx := fmt.Sprintf("tx-dead-%d", i)
				if rows[tx] != 1 || processed[tx] != 1 {
					t.Errorf("%s: %d rows, %d processed answers; want 1 and 1", tx, rows[tx], processed[tx])
				}
			}
		})
	}
}

// TestWithRedisDownADeliveryWaitingOnAnotherWriterHoldsUpNoOther: with
// Redis unreachable (backstop) nothing keeps a payment's deliveries apart,
// so one of them may wait on another's uncommitted row. The handler records
// such deliveries with store.Alone, each on a statement of its own: on a
// replica with a single batch writer and no stall rule, where a batched
// delivery would take that writer and queue the next one behind its wait,
// another payment's delivery is recorded and answered at once (within the
// 8s request timeout), and the waiting one is recorded once the row lock is
// gone.
func TestWithRedisDownADeliveryWaitingOnAnotherWriterHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	r := startReplicas(t, 1, paylocktest.Options{
		RedisURL: "redis://" + closedAddr(t) + "/0",
		Redis:    noRetries,
		Config:   handler.Config{RedisUnavailable: handler.Backstop},
		Store: func(c *store.Config) {
			c.BatchMax, c.BatchWriters, c.BatchStall = 64, 1, -1
			c.LockTimeout = time.Minute
		},
	})[0]
	ctx := context.Background()
	other := testkit.Connect(t, r.DSN)
	if _, err := other.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, `INSERT INTO payments (source, transaction_id, amount, currency, payload)
		VALUES ($1, 'tx-held', 100, 'JPY', '{}')`, store.DefaultSource); err != nil {
		t.Fatal(err)
	}
	held := make(chan answer, 1)
	go func() { held <- pay(t, r.URL, "tx-held", 100, "JPY") }()
	var pid, waiting int
	if err := other.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	for i := 0; waiting == 0; i++ {
		if i == 500 {
			t.Fatal("the delivery of tx-held never waited on the uncommitted row")
		}
		time.Sleep(10 * time.Millisecond)
		if err := r.Store.Pool().QueryRow(ctx,
			"SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}

	if a := pay(t, r.URL, "tx-free", 100, "JPY"); a.status != http.StatusOK || a.str("result") != "processed" {
		t.Fatalf("tx-free while tx-held waits: %d %s; want 200 processed", a.status, a.raw)
	}
	select {
	case a := <-held:
		t.Fatalf("tx-held answered %d %s before the row lock was released", a.status, a.raw)
	default:
	}
	if _, err := other.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if a := <-held; a.status != http.StatusOK || a.str("result") != "processed" {
		t.Fatalf("tx-held once the row lock is gone: %d %s; want 200 processed", a.status, a.raw)
	}
}
