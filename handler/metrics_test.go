package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// instrumented starts one replica whose metrics land in a fresh registry;
// the lock reports its events to the same metrics.
func instrumented(t *testing.T, o paylocktest.Options) (*paylocktest.Replica, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	ttl := o.Config.LockTTL
	if ttl == 0 {
		ttl = 5 * time.Second
	}
	o.Config.Metrics = handler.NewMetrics(reg, ttl)
	o.Lock = append(o.Lock, lock.WithObserver(o.Config.Metrics.LockObserver()))
	return startReplica(t, o), reg
}

func TestExpiredLockShowsAsExpiredReleaseAndBackstopDuplicate(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	stall := &stallFirst{entered: make(chan struct{}), resume: make(chan struct{})}
	// A long TTL in real time, so the watchdog does not tick during the
	// test; miniredis's clock and the lock's are moved past it instead, as
	// if the replica had been paused.
	const ttl = 30 * time.Second
	clk := testkit.NewClock(time.Now())
	r, reg := instrumented(t, paylocktest.Options{
		RedisURL: "redis://" + mr.Addr() + "/0",
		Config:   handler.Config{LockTTL: ttl, LockWait: -1},
		Wrap:     func(s handler.Recorder) handler.Recorder { stall.Recorder = s; return stall },
		Lock:     []lock.Option{lock.WithClock(clk.Now)},
	})
	first := make(chan answer, 1)
	go func() { first <- pay(t, r.URL, "tx-m-exp", 100, "JPY") }()
	<-stall.entered
	mr.FastForward(ttl + time.Second)
	clk.Add(ttl + time.Second)
	if a := pay(t, r.URL, "tx-m-exp", 100, "JPY"); a.str("result") != "processed" {
		t.Fatalf("second: %d %s", a.status, a.raw)
	}
	close(stall.resume)
	if a := <-first; a.str("result") != "duplicate" {
		t.Fatalf("stalled request: %d %s, want 200 duplicate", a.status, a.raw)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"paylock_lock_release_total", []string{`outcome="expired"`}, 1},
		{"paylock_lock_release_total", []string{`outcome="released"`}, 1},
		{"paylock_backstop_duplicates_total", nil, 1},
		{"paylock_lock_hold_seconds_count", nil, 2},
		{"paylock_lock_ttl_seconds", nil, 30},
		{"paylock_webhook_requests_total", []string{`result="duplicate"`, `code="200"`, `source="payments"`}, 1},
		{"paylock_webhook_requests_total", []string{`result="processed"`, `code="200"`, `source="payments"`}, 1},
		{"paylock_db_write_attempts_total", []string{`source="payments"`}, 2},
	} {
		if got := testkit.Gathered(t, reg).Sum(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// untilDone blocks RecordPayment until its context ends, like a request
// stuck behind a lock that the watchdog then finds lost.
type untilDone struct{ handler.Recorder }

func (untilDone) RecordPayment(ctx context.Context, p store.Payment) (store.Payment, error) {
	<-ctx.Done()
	return store.Payment{}, context.Cause(ctx)
}

func TestLostLeaseCancelsTheWorkAndIsCounted(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	r, reg := instrumented(t, paylocktest.Options{
		RedisURL: "redis://" + mr.Addr() + "/0",
		Config:   handler.Config{LockTTL: 300 * time.Millisecond},
		Wrap:     func(s handler.Recorder) handler.Recorder { return untilDone{s} },
	})
	done := make(chan answer, 1)
	go func() { done <- pay(t, r.URL, "tx-m-lost", 100, "JPY") }()
	key := r.LockKey("tx-m-lost")
	testkit.WaitFor(t, 5*time.Second, "the delivery's lock taken", func() bool { return mr.Exists(key) })
	mr.Del(key) // a failover that lost the lock
	a := <-done
	wantProblem(t, a, http.StatusServiceUnavailable)
	if !strings.HasSuffix(a.str("type"), "#lock-lost") {
		t.Fatalf("type %q, want lock-lost", a.str("type"))
	}
	if got := testkit.Gathered(t, reg).Sum("paylock_lock_lease_lost_total"); got != 1 {
		t.Errorf("lease lost = %v, want 1", got)
	}
	if got := testkit.Gathered(t, reg).Sum("paylock_lock_refresh_total", `outcome="not_held"`); got != 1 {
		t.Errorf("refresh not_held = %v, want 1", got)
	}
	if got := testkit.Gathered(t, reg).Sum("paylock_webhook_requests_total", `result="unavailable"`, `code="503"`); got != 1 {
		t.Errorf("503 requests = %v, want 1", got)
	}
}

func TestFaultMetrics(t *testing.T) {
	t.Parallel()
	t.Run("signature failures by reason", func(t *testing.T) {
		t.Parallel()
		v, _ := verifier(t, signature.SchemeStandard, testSecret)
		r, reg := instrumented(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{handler.PaymentsSource(v)}}})
		pay(t, r.URL, "tx-m-sig", 100, "JPY")
		if got := testkit.Gathered(t, reg).Sum("paylock_signature_failures_total", `reason="missing_header"`); got != 1 {
			t.Fatalf("signature failures = %v, want 1", got)
		}
		if got := testkit.Gathered(t, reg).Sum("paylock_webhook_requests_total", `result="unauthenticated"`, `code="401"`); got != 1 {
			t.Fatalf("401 requests = %v", got)
		}
	})
	t.Run("verified deliveries by secret", func(t *testing.T) {
		t.Parallel()
		v, secrets := verifier(t, signature.SchemeStandard, "whsec_c2VjcmV0LXRoYXQtaXMtbm90LW91cnMtMzJieXRlcw==,"+testSecret)
		r, reg := instrumented(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{handler.PaymentsSource(v)}}})
		body := payJSON("tx-m-rot", 100, "JPY")
		signedPost(t, r.URL, signature.Sign(signature.SchemeStandard, secrets[1], "msg_rot", time.Now(), body), body)
		if got := testkit.Gathered(t, reg).Sum("paylock_signature_verified_total", `secret_index="1"`); got != 1 {
			t.Fatalf("verified by the second secret = %v, want 1", got)
		}
	})
	t.Run("payload mismatch", func(t *testing.T) {
		t.Parallel()
		r, reg := instrumented(t, paylocktest.Options{})
		pay(t, r.URL, "tx-m-mis", 100, "JPY")
		pay(t, r.URL, "tx-m-mis", 200, "JPY")
		if got := testkit.Gathered(t, reg).Sum("paylock_payload_mismatch_total"); got != 1 {
			t.Fatalf("mismatches = %v, want 1", got)
		}
	})
	for _, policy := range []handler.RedisPolicy{handler.Backstop, handler.Reject} {
		t.Run("redis unavailable "+string(policy), func(t *testing.T) {
			t.Parallel()
			r, reg := instrumented(t, paylocktest.Options{
				RedisURL: "redis://" + closedAddr(t) + "/0",
				Config:   handler.Config{RedisUnavailable: policy},
				Redis:    noRetries,
			})
			pay(t, r.URL, "tx-m-redis", 100, "JPY")
			if got := testkit.Gathered(t, reg).Sum("paylock_redis_unavailable_total", fmt.Sprintf("policy=%q", policy)); got != 1 {
				t.Fatalf("redis unavailable{%s} = %v, want 1", policy, got)
			}
			if got := testkit.Gathered(t, reg).Sum("paylock_lock_obtain_total", `outcome="error"`); got != 1 {
				t.Fatalf("obtain errors = %v, want 1", got)
			}
		})
	}
	t.Run("busy lock wait", func(t *testing.T) {
		t.Parallel()
		r, reg := instrumented(t, paylocktest.Options{Config: handler.Config{LockWait: 100 * time.Millisecond}})
		held, err := lock.New(r.Redis).Obtain(context.Background(), r.LockKey("tx-m-busy"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(context.Background())
		a := pay(t, r.URL, "tx-m-busy", 100, "JPY")
		wantProblem(t, a, http.StatusConflict)
		wantRetryAfter(t, a)
		if got := testkit.Gathered(t, reg).Sum("paylock_lock_wait_seconds_count"); got != 1 {
			t.Fatalf("lock waits observed = %v, want 1", got)
		}
		if got := testkit.Gathered(t, reg).Sum("paylock_lock_obtain_total", `outcome="busy"`); got < 2 {
			t.Fatalf("busy obtains = %v, want the first try and at least one poll", got)
		}
	})
}

func TestReadinessFlipsWithPostgresAndRedis(t *testing.T) {
	t.Parallel()
	dsn, _ := paylocktest.MigratedSchema(t)
	pg := proxy(t, hostOf(t, dsn))
	rp := proxy(t, hostOf(t, testkit.RedisURL(t)))
	for _, policy := range []handler.RedisPolicy{handler.Backstop, handler.Reject} {
		t.Run(string(policy), func(t *testing.T) {
			// The checks ping the replica's own pool and client, set once
			// it has started (before any request).
			var r *paylocktest.Replica
			r = startReplica(t, paylocktest.Options{
				DSN:      testkit.WithHost(t, dsn, pg.Addr()),
				RedisURL: "redis://" + rp.Addr() + "/0",
				Redis:    noRetries,
				Config: handler.Config{Checks: []handler.Check{
					{Name: "postgres", Critical: true, Ping: func(ctx context.Context) error { return r.Store.Ping(ctx) }},
					{Name: "redis", Critical: policy == handler.Reject, Ping: func(ctx context.Context) error { return r.Redis.Ping(ctx).Err() }},
				}},
			})
			h := r.Handler
			ready := func() (int, string) {
				rec := httptestRecorder(h, "/readyz")
				var body struct{ Status string }
				json.Unmarshal(rec.Body.Bytes(), &body)
				return rec.Code, body.Status
			}
			if code, s := ready(); code != 200 || s != "ready" {
				t.Fatalf("all up: %d %s", code, s)
			}
			rp.Cut()
			wantCode, wantStatus := 200, "degraded"
			if policy == handler.Reject {
				wantCode, wantStatus = 503, "unready"
			}
			if code, s := ready(); code != wantCode || s != wantStatus {
				t.Fatalf("redis down: %d %s, want %d %s", code, s, wantCode, wantStatus)
			}
			rp.Restore()
			pg.Cut()
			if code, s := ready(); code != 503 || s != "unready" {
				t.Fatalf("postgres down: %d %s, want 503 unready", code, s)
			}
			pg.Restore()
			if code, s := ready(); code != 200 || s != "ready" {
				t.Fatalf("all back: %d %s", code, s)
			}
			if rec := httptestRecorder(h, "/healthz"); rec.Code != 200 {
				t.Fatalf("healthz %d", rec.Code)
			}
		})
	}
}

func TestRequestLogsCarryTheTransactionAndNeverASecret(t *testing.T) {
	t.Parallel()
	v, secrets := verifier(t, signature.SchemeStandard, testSecret)
	var logs testkit.LogBuffer
	logger := logs.Logger()
	r := startReplica(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{handler.PaymentsSource(v)}, Logger: logger}})
	body := []byte(`{"transaction_id":"tx-log-1","amount":100,"currency":"JPY","card":"4242424242424242"}`)
	a := signedPost(t, r.URL, signature.Sign(signature.SchemeStandard, secrets[0], "msg_log", time.Now(), body), body)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.raw)
	}
	signedPost(t, r.URL, http.Header{}, body) // refused: logged with its reason
	var line map[string]any
	found := false
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		if line["msg"] == "payment webhook" && line["transaction_id"] == "tx-log-1" {
			found = true
			for _, k := range []string{"request_id", "outcome", "status", "lock_wait", "lock_hold"} {
				if _, ok := line[k]; !ok {
					t.Errorf("log line lacks %q: %s", k, l)
				}
			}
		}
	}
	if !found {
		t.Fatalf("no request line with the transaction id:\n%s", logs.String())
	}
	out := logs.String()
	for _, secret := range []string{testSecret, strings.TrimPrefix(testSecret, "whsec_"), "4242424242424242"} {
		if strings.Contains(out, secret) {
			t.Fatalf("logs contain %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, `"signature_failure":"missing_header"`) {
		t.Fatalf("refused delivery logged without its reason:\n%s", out)
	}
}
