package handler_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/faultproxy"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func proxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func hostOf(t *testing.T, rawURL string) string {
	t.Helper()
	_, rest, _ := strings.Cut(rawURL, "://")
	rest, _, _ = strings.Cut(rest, "/")
	rest, _, _ = strings.Cut(rest, "?")
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	return rest
}

func TestPostgresUnreachableIs503AndReleasesTheLock(t *testing.T) {
	t.Parallel()
	dsn, check := paylocktest.MigratedSchema(t)
	pg := proxy(t, hostOf(t, dsn))
	r := startReplica(t, paylocktest.Options{DSN: testkit.WithHost(t, dsn, pg.Addr())})

	pg.Cut()
	a := pay(t, r.URL, "tx-pg-down", 100, "JPY")
	wantProblem(t, a, http.StatusServiceUnavailable)
	wantRetryAfter(t, a)
	if n, err := r.Redis.Exists(context.Background(), r.LockKey("tx-pg-down")).Result(); err != nil || n != 0 {
		t.Fatalf("lock left behind after a failed request (exists=%d, %v)", n, err)
	}
	if n := testkit.PaymentRows(t, check.Pool(), "tx-pg-down"); n != 0 {
		t.Fatalf("rows = %d while Postgres was unreachable", n)
	}

	pg.Restore()
	if a := deliverUntilAcknowledged(t, r.URL, "tx-pg-down", 100); a.str("result") != "processed" {
		t.Fatalf("after Postgres came back: %d %s", a.status, a.raw)
	}
	if n := testkit.PaymentRows(t, check.Pool(), "tx-pg-down"); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
}

func TestStatementTimeoutIs503AndRecordsNothing(t *testing.T) {
	t.Parallel()
	dsn, admin := paylocktest.MigratedSchema(t)
	testkit.SlowInsert{Sleep: 2 * time.Second}.Install(t, admin.Pool())
	r := startReplica(t, paylocktest.Options{DSN: dsn, Store: func(c *store.Config) { c.StatementTimeout = 200 * time.Millisecond }})
	a := pay(t, r.URL, "tx-slow", 100, "JPY")
	wantProblem(t, a, http.StatusServiceUnavailable)
	wantRetryAfter(t, a)
	if n := testkit.PaymentRows(t, admin.Pool(), "tx-slow"); n != 0 {
		t.Fatalf("rows = %d after a statement timeout", n)
	}
}

// TestUniqueViolationOnAnotherIndexIsNotSuccess: a unique index on another
// column of payments, named anyhow or like the arbiter
// (payments_transaction_id_key2), is no "already recorded": its violation
// is an error.
func TestUniqueViolationOnAnotherIndexIsNotSuccess(t *testing.T) {
	t.Parallel()
	for _, index := range []string{"payments_order_ref", "payments_transaction_id_key2"} {
		t.Run(index, func(t *testing.T) {
			t.Parallel()
			dsn, admin := paylocktest.MigratedSchema(t)
			testkit.Exec(t, admin.Pool(), `CREATE UNIQUE INDEX `+index+` ON payments ((payload->>'order_ref'))`)
			r := startReplica(t, paylocktest.Options{DSN: dsn})
			body := func(tx string) []byte {
				return []byte(`{"transaction_id":"` + tx + `","amount":100,"currency":"JPY","order_ref":"o-1"}`)
			}
			if a := post(t, r.URL, "/webhooks/payments", "application/json", body("tx-u1")); a.status != 200 {
				t.Fatalf("first: %d %s", a.status, a.raw)
			}
			a := post(t, r.URL, "/webhooks/payments", "application/json", body("tx-u2"))
			if a.status < 500 {
				t.Fatalf("a unique violation on another index answered %d: %s", a.status, a.raw)
			}
			wantProblem(t, a, a.status)
			if strings.Contains(a.raw, index) || strings.Contains(a.raw, "23505") {
				t.Fatalf("internal detail leaked to the client: %s", a.raw)
			}
			if n := testkit.PaymentRows(t, admin.Pool(), "tx-u2"); n != 0 {
				t.Fatalf("rows = %d", n)
			}
		})
	}
}

func TestRedisUnreachable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy     handler.RedisPolicy
		wantStatus int
		wantRows   int
	}{
		{handler.Backstop, http.StatusOK, 1},
		{handler.Reject, http.StatusServiceUnavailable, 0},
	} {
		t.Run(string(c.policy), func(t *testing.T) {
			t.Parallel()
			r := startReplica(t, paylocktest.Options{
				RedisURL: "redis://" + closedAddr(t) + "/0",
				Config:   handler.Config{RedisUnavailable: c.policy},
			})
			a := pay(t, r.URL, "tx-redis-down", 100, "JPY")
			if a.status != c.wantStatus {
				t.Fatalf("status %d, want %d: %s", a.status, c.wantStatus, a.raw)
			}
			if c.wantStatus == http.StatusOK {
				if a.str("result") != "processed" {
					t.Fatalf("result %q", a.str("result"))
				}
				// A replay is still settled by the database constraint alone.
				if b := pay(t, r.URL, "tx-redis-down", 100, "JPY"); b.str("result") != "duplicate" {
					t.Fatalf("replay: %d %s", b.status, b.raw)
				}
			} else {
				wantProblem(t, a, c.wantStatus)
				wantRetryAfter(t, a)
			}
			if n := testkit.PaymentRows(t, r.Store.Pool(), "tx-redis-down"); n != c.wantRows {
				t.Fatalf("rows = %d, want %d", n, c.wantRows)
			}
		})
	}
}

// TestRedisLostMidStormStillRecordsOnce cuts Redis while deliveries are in
// flight: some hold locks they can no longer release, others fall back to
// the database constraint. Every transaction is still recorded once.
func TestRedisLostMidStormStillRecordsOnce(t *testing.T) {
	t.Parallel()
	rp := proxy(t, hostOf(t, testkit.RedisURL(t)))
	reps := startReplicas(t, 3, paylocktest.Options{RedisURL: "redis://" + rp.Addr() + "/0"})
	const txs, deliveries = 20, 10
	results := make(chan answer, txs*deliveries)
	var answered atomic.Int32
	cut := make(chan struct{})
	releaseRest := sync.OnceFunc(func() { close(cut) })
	defer releaseRest()
	go func() {
		sem := make(chan struct{}, 32)
		for i := range txs * deliveries {
			if i == txs/2 {
				<-cut // the other half of the transactions meets the cut from their first delivery
			}
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				a := deliverUntilAcknowledged(t, reps[i%3].URL, "tx-cut-"+string(rune('a'+i%txs)), 100)
				answered.Add(1)
				results <- a
			}()
		}
	}()
	// The cut comes once the storm is under way: a first delivery is
	// answered, the others of the first half are still in flight.
	testkit.WaitFor(t, 30*time.Second, "the storm's first answer", func() bool { return answered.Load() > 0 })
	rp.Cut()
	releaseRest()
	time.Sleep(200 * time.Millisecond) // the outage lasts: deliveries meet it and retry through it
	rp.Restore()
	processed := 0
	for range txs * deliveries {
		if a := <-results; a.str("result") == "processed" {
			processed++
		}
	}
	if n := testkit.PaymentRows(t, reps[0].Store.Pool(), ""); n != txs {
		t.Fatalf("rows = %d, want %d", n, txs)
	}
	if processed != txs {
		t.Fatalf("processed answers = %d, want %d", processed, txs)
	}
}

// TestStalledDatabaseAnswers503BeforeThePSPGivesUp: PAYLOCK_REQUEST_TIMEOUT
// bounds a delivery, so a database that stops answering yields a 503 with
// Retry-After that the PSP still receives, and the lock is let go.
func TestStalledDatabaseAnswers503BeforeThePSPGivesUp(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{
		Config: handler.Config{RequestTimeout: 300 * time.Millisecond},
		Wrap:   func(s handler.Recorder) handler.Recorder { return untilDone{s} },
	})
	a := pay(t, r.URL, "tx-stalled-db", 100, "JPY")
	wantProblem(t, a, http.StatusServiceUnavailable)
	wantRetryAfter(t, a)
	if n, err := r.Redis.Exists(context.Background(), r.LockKey("tx-stalled-db")).Result(); err != nil || n != 0 {
		t.Fatalf("lock left behind (exists=%d, %v)", n, err)
	}
}
