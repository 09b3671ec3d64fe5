package handler_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/faultproxy"
	"github.com/paylock/paylock/internal/testenv"
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
	dsn := migratedSchema(t)
	pg := proxy(t, hostOf(t, dsn))
	r := startReplica(t, options{dsn: withHost(t, dsn, pg.Addr())})
	check := openStore(t, store.Config{URL: dsn})

	pg.Cut()
	a := pay(t, r.url, "tx-pg-down", 100, "JPY")
	wantProblem(t, a, http.StatusServiceUnavailable)
	wantRetryAfter(t, a)
	if n, err := r.rdb.Exists(context.Background(), lockKey(r, "tx-pg-down")).Result(); err != nil || n != 0 {
		t.Fatalf("lock left behind after a failed request (exists=%d, %v)", n, err)
	}
	if n := rows(t, check, "tx-pg-down"); n != 0 {
		t.Fatalf("rows = %d while Postgres was unreachable", n)
	}

	pg.Restore()
	if a := deliverUntilAcknowledged(t, r.url, "tx-pg-down", 100); a.str("result") != "processed" {
		t.Fatalf("after Postgres came back: %d %s", a.status, a.raw)
	}
	if n := rows(t, check, "tx-pg-down"); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
}

func TestStatementTimeoutIs503AndRecordsNothing(t *testing.T) {
	t.Parallel()
	dsn := migratedSchema(t)
	admin := openStore(t, store.Config{URL: dsn})
	_, err := admin.Pool().Exec(context.Background(), `
		CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(2); RETURN NEW; END $$;
		CREATE TRIGGER slow_insert BEFORE INSERT ON payments FOR EACH ROW EXECUTE FUNCTION slow_insert();`)
	if err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, options{dsn: dsn, storeCfg: func(c *store.Config) { c.StatementTimeout = 200 * time.Millisecond }})
	a := pay(t, r.url, "tx-slow", 100, "JPY")
	wantProblem(t, a, http.StatusServiceUnavailable)
	wantRetryAfter(t, a)
	if n := rows(t, admin, "tx-slow"); n != 0 {
		t.Fatalf("rows = %d after a statement timeout", n)
	}
}

func TestUniqueViolationOnAnotherIndexIsNotSuccess(t *testing.T) {
	t.Parallel()
	dsn := migratedSchema(t)
	admin := openStore(t, store.Config{URL: dsn})
	if _, err := admin.Pool().Exec(context.Background(),
		`CREATE UNIQUE INDEX payments_order_ref ON payments ((payload->>'order_ref'))`); err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, options{dsn: dsn})
	body := func(tx string) []byte {
		return []byte(`{"transaction_id":"` + tx + `","amount":100,"currency":"JPY","order_ref":"o-1"}`)
	}
	if a := post(t, r.url, "/webhooks/payments", "application/json", body("tx-u1")); a.status != 200 {
		t.Fatalf("first: %d %s", a.status, a.raw)
	}
	a := post(t, r.url, "/webhooks/payments", "application/json", body("tx-u2"))
	if a.status < 500 {
		t.Fatalf("a unique violation on another index answered %d: %s", a.status, a.raw)
	}
	wantProblem(t, a, a.status)
	if strings.Contains(a.raw, "payments_order_ref") || strings.Contains(a.raw, "23505") {
		t.Fatalf("internal detail leaked to the client: %s", a.raw)
	}
	if n := rows(t, admin, "tx-u2"); n != 0 {
		t.Fatalf("rows = %d", n)
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
			r := startReplica(t, options{
				redisURL: "redis://" + closedAddr(t) + "/0",
				cfg:      handler.Config{RedisUnavailable: c.policy},
			})
			a := pay(t, r.url, "tx-redis-down", 100, "JPY")
			if a.status != c.wantStatus {
				t.Fatalf("status %d, want %d: %s", a.status, c.wantStatus, a.raw)
			}
			if c.wantStatus == http.StatusOK {
				if a.str("result") != "processed" {
					t.Fatalf("result %q", a.str("result"))
				}
				// A replay is still settled by the database constraint alone.
				if b := pay(t, r.url, "tx-redis-down", 100, "JPY"); b.str("result") != "duplicate" {
					t.Fatalf("replay: %d %s", b.status, b.raw)
				}
			} else {
				wantProblem(t, a, c.wantStatus)
				wantRetryAfter(t, a)
			}
			if n := rows(t, r.store, "tx-redis-down"); n != c.wantRows {
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
	rp := proxy(t, hostOf(t, testenv.RedisURL(t)))
	reps := startReplicas(t, 3, options{redisURL: "redis://" + rp.Addr() + "/0"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(30 * time.Millisecond)
		rp.Cut()
		time.Sleep(200 * time.Millisecond)
		rp.Restore()
	}()
	const txs, deliveries = 20, 10
	results := make(chan answer, txs*deliveries)
	sem := make(chan struct{}, 32)
	for i := range txs * deliveries {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			results <- deliverUntilAcknowledged(t, reps[i%3].url, "tx-cut-"+string(rune('a'+i%txs)), 100)
		}()
	}
	processed := 0
	for range txs * deliveries {
		if a := <-results; a.str("result") == "processed" {
			processed++
		}
	}
	<-done
	if n := rows(t, reps[0].store, ""); n != txs {
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
	r := startReplica(t, options{
		cfg:  handler.Config{RequestTimeout: 300 * time.Millisecond},
		wrap: func(s handler.Recorder) handler.Recorder { return untilDone{s} },
	})
	a := pay(t, r.url, "tx-stalled-db", 100, "JPY")
	wantProblem(t, a, http.StatusServiceUnavailable)
	wantRetryAfter(t, a)
	if n, err := r.rdb.Exists(context.Background(), lockKey(r, "tx-stalled-db")).Result(); err != nil || n != 0 {
		t.Fatalf("lock left behind (exists=%d, %v)", n, err)
	}
}
