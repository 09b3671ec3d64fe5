package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// metricValue returns the value of the series name{labels} in reg (0 when
// absent).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

// instrumented starts one replica whose metrics land in a fresh registry;
// the lock reports its events to the same metrics.
func instrumented(t *testing.T, o options) (*replica, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	ttl := o.cfg.LockTTL
	if ttl == 0 {
		ttl = 5 * time.Second
	}
	o.cfg.Metrics = handler.NewMetrics(reg, ttl)
	o.lockOpts = append(o.lockOpts, lock.WithObserver(o.cfg.Metrics.LockObserver()))
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
	clk := &fakeClock{now: time.Now()}
	r, reg := instrumented(t, options{
		redisURL: "redis://" + mr.Addr() + "/0",
		cfg:      handler.Config{LockTTL: ttl, LockWait: -1},
		wrap:     func(s handler.Recorder) handler.Recorder { stall.Recorder = s; return stall },
		lockOpts: []lock.Option{lock.WithClock(clk.Now)},
	})
	first := make(chan answer, 1)
	go func() { first <- pay(t, r.url, "tx-m-exp", 100, "JPY") }()
	<-stall.entered
	mr.FastForward(ttl + time.Second)
	clk.Add(ttl + time.Second)
	if a := pay(t, r.url, "tx-m-exp", 100, "JPY"); a.str("result") != "processed" {
		t.Fatalf("second: %d %s", a.status, a.raw)
	}
	close(stall.resume)
	if a := <-first; a.str("result") != "duplicate" {
		t.Fatalf("stalled request: %d %s, want 200 duplicate", a.status, a.raw)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"paylock_lock_release_total", map[string]string{"outcome": "expired"}, 1},
		{"paylock_lock_release_total", map[string]string{"outcome": "released"}, 1},
		{"paylock_backstop_duplicates_total", nil, 1},
		{"paylock_lock_hold_seconds", nil, 2},
		{"paylock_lock_ttl_seconds", nil, 30},
		{"paylock_webhook_requests_total", map[string]string{"result": "duplicate", "code": "200", "source": "payments"}, 1},
		{"paylock_webhook_requests_total", map[string]string{"result": "processed", "code": "200", "source": "payments"}, 1},
		{"paylock_db_write_attempts_total", map[string]string{"source": "payments"}, 2},
	} {
		if got := metricValue(t, reg, c.name, c.labels); got != c.want {
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
	r, reg := instrumented(t, options{
		redisURL: "redis://" + mr.Addr() + "/0",
		cfg:      handler.Config{LockTTL: 300 * time.Millisecond},
		wrap:     func(s handler.Recorder) handler.Recorder { return untilDone{s} },
	})
	done := make(chan answer, 1)
	go func() { done <- pay(t, r.url, "tx-m-lost", 100, "JPY") }()
	key := lockKey(r, "tx-m-lost")
	deadline := time.Now().Add(5 * time.Second)
	for !mr.Exists(key) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	mr.Del(key) // a failover that lost the lock
	a := <-done
	wantProblem(t, a, http.StatusServiceUnavailable)
	if !strings.HasSuffix(a.str("type"), "#lock-lost") {
		t.Fatalf("type %q, want lock-lost", a.str("type"))
	}
	if got := metricValue(t, reg, "paylock_lock_lease_lost_total", nil); got != 1 {
		t.Errorf("lease lost = %v, want 1", got)
	}
	if got := metricValue(t, reg, "paylock_lock_refresh_total", map[string]string{"outcome": "not_held"}); got != 1 {
		t.Errorf("refresh not_held = %v, want 1", got)
	}
	if got := metricValue(t, reg, "paylock_webhook_requests_total", map[string]string{"result": "unavailable", "code": "503"}); got != 1 {
		t.Errorf("503 requests = %v, want 1", got)
	}
}

func TestFaultMetrics(t *testing.T) {
	t.Parallel()
	t.Run("signature failures by reason", func(t *testing.T) {
		t.Parallel()
		v, _ := verifier(t, signature.SchemeStandard, testSecret)
		r, reg := instrumented(t, options{cfg: handler.Config{Sources: []handler.Source{handler.PaymentsSource(v)}}})
		pay(t, r.url, "tx-m-sig", 100, "JPY")
		if got := metricValue(t, reg, "paylock_signature_failures_total", map[string]string{"reason": "missing_header"}); got != 1 {
			t.Fatalf("signature failures = %v, want 1", got)
		}
		if got := metricValue(t, reg, "paylock_webhook_requests_total", map[string]string{"result": "unauthenticated", "code": "401"}); got != 1 {
			t.Fatalf("401 requests = %v", got)
		}
	})
	t.Run("verified deliveries by secret", func(t *testing.T) {
		t.Parallel()
		v, secrets := verifier(t, signature.SchemeStandard, "whsec_c2VjcmV0LXRoYXQtaXMtbm90LW91cnMtMzJieXRlcw==,"+testSecret)
		r, reg := instrumented(t, options{cfg: handler.Config{Sources: []handler.Source{handler.PaymentsSource(v)}}})
		body := payJSON("tx-m-rot", 100, "JPY")
		signedPost(t, r.url, signature.Sign(signature.SchemeStandard, secrets[1], "msg_rot", time.Now(), body), body)
		if got := metricValue(t, reg, "paylock_signature_verified_total", map[string]string{"secret_index": "1"}); got != 1 {
			t.Fatalf("verified by the second secret = %v, want 1", got)
		}
	})
	t.Run("payload mismatch", func(t *testing.T) {
		t.Parallel()
		r, reg := instrumented(t, options{})
		pay(t, r.url, "tx-m-mis", 100, "JPY")
		pay(t, r.url, "tx-m-mis", 200, "JPY")
		if got := metricValue(t, reg, "paylock_payload_mismatch_total", nil); got != 1 {
			t.Fatalf("mismatches = %v, want 1", got)
		}
	})
	for _, policy := range []handler.RedisPolicy{handler.Backstop, handler.Reject} {
		t.Run("redis unavailable "+string(policy), func(t *testing.T) {
			t.Parallel()
			r, reg := instrumented(t, options{
				redisURL: "redis://" + closedAddr(t) + "/0",
				cfg:      handler.Config{RedisUnavailable: policy},
				redisOpt: noRetries,
			})
			pay(t, r.url, "tx-m-redis", 100, "JPY")
			if got := metricValue(t, reg, "paylock_redis_unavailable_total", map[string]string{"policy": string(policy)}); got != 1 {
				t.Fatalf("redis unavailable{%s} = %v, want 1", policy, got)
			}
			if got := metricValue(t, reg, "paylock_lock_obtain_total", map[string]string{"outcome": "error"}); got != 1 {
				t.Fatalf("obtain errors = %v, want 1", got)
			}
		})
	}
	t.Run("busy lock wait", func(t *testing.T) {
		t.Parallel()
		r, reg := instrumented(t, options{cfg: handler.Config{LockWait: 100 * time.Millisecond}})
		held, err := lock.New(r.rdb).Obtain(context.Background(), lockKey(r, "tx-m-busy"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(context.Background())
		a := pay(t, r.url, "tx-m-busy", 100, "JPY")
		wantProblem(t, a, http.StatusConflict)
		wantRetryAfter(t, a)
		if got := metricValue(t, reg, "paylock_lock_wait_seconds", nil); got != 1 {
			t.Fatalf("lock waits observed = %v, want 1", got)
		}
		if got := metricValue(t, reg, "paylock_lock_obtain_total", map[string]string{"outcome": "busy"}); got < 2 {
			t.Fatalf("busy obtains = %v, want the first try and at least one poll", got)
		}
	})
}

func TestReadinessFlipsWithPostgresAndRedis(t *testing.T) {
	t.Parallel()
	dsn := migratedSchema(t)
	pg := proxy(t, hostOf(t, dsn))
	rp := proxy(t, hostOf(t, redisTestURL(t)))
	for _, policy := range []handler.RedisPolicy{handler.Backstop, handler.Reject} {
		t.Run(string(policy), func(t *testing.T) {
			st := openStore(t, store.Config{URL: withHost(t, dsn, pg.Addr())})
			rdb := newRedisClient(t, "redis://"+rp.Addr()+"/0", noRetries)
			h := mustNew(t, handler.Config{
				Logger: testLogger(t),
				Checks: []handler.Check{
					{Name: "postgres", Critical: true, Ping: st.Ping},
					{Name: "redis", Critical: policy == handler.Reject, Ping: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
				},
			}, lock.New(rdb), st.Payments())
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

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRequestLogsCarryTheTransactionAndNeverASecret(t *testing.T) {
	t.Parallel()
	v, secrets := verifier(t, signature.SchemeStandard, testSecret)
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := startReplica(t, options{cfg: handler.Config{Sources: []handler.Source{handler.PaymentsSource(v)}, Logger: logger}})
	body := []byte(`{"transaction_id":"tx-log-1","amount":100,"currency":"JPY","card":"4242424242424242"}`)
	a := signedPost(t, r.url, signature.Sign(signature.SchemeStandard, secrets[0], "msg_log", time.Now(), body), body)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.raw)
	}
	signedPost(t, r.url, http.Header{}, body) // refused: logged with its reason
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

// fakeClock is a settable clock for lock.WithClock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
