package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakestripe"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/signature"
	"github.com/prometheus/client_golang/prometheus"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"version"}, envMap(nil), nil, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.HasPrefix(out.String(), "paylock ") {
		t.Fatalf("version printed %q", out.String())
	}
}

func TestBadConfigurationStopsStartWithOneLineNamingTheVariable(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"PAYLOCK_LOCK_TTL": "soon"}, nil, "PAYLOCK_LOCK_TTL"},
		{map[string]string{"PAYLOCK_LOCK_TTL": "10ms"}, nil, "PAYLOCK_LOCK_TTL"},
		{map[string]string{"PAYLOCK_LOCK_WAIT": "-1s"}, nil, "PAYLOCK_LOCK_WAIT"},
		{map[string]string{"PAYLOCK_MAX_BODY": "lots"}, nil, "PAYLOCK_MAX_BODY"},
		{map[string]string{"PAYLOCK_REDIS_UNAVAILABLE": "ignore"}, nil, "PAYLOCK_REDIS_UNAVAILABLE"},
		{map[string]string{"PAYLOCK_DEFAULT_CURRENCY": "yen"}, nil, "PAYLOCK_DEFAULT_CURRENCY"},
		{map[string]string{"PAYLOCK_ADDR": "8080"}, nil, "PAYLOCK_ADDR"},
		{map[string]string{"PAYLOCK_ALLOW_UNSIGNED": "maybe"}, nil, "PAYLOCK_ALLOW_UNSIGNED"},
		{map[string]string{"PAYLOCK_LOG_LEVEL": "loud"}, nil, "PAYLOCK_LOG_LEVEL"},
		{map[string]string{"PAYLOCK_LOCK_TTL": "1s", "PAYLOCK_REDIS_TIMEOUT": "900ms"}, nil, "PAYLOCK_REDIS_TIMEOUT"},
		{nil, []string{"--lock-ttl", "forever"}, "lock-ttl"},
		{map[string]string{"PAYLOCK_MAX_BODY": "9999999999GiB"}, nil, "PAYLOCK_MAX_BODY"},
		{map[string]string{"PAYLOCK_MAX_BODY": "65MiB"}, nil, "PAYLOCK_MAX_BODY"},
		{map[string]string{"PAYLOCK_DEFAULT_CURRENCY": "ABC"}, nil, "PAYLOCK_DEFAULT_CURRENCY"},
		{map[string]string{"PAYLOCK_DEFAULT_CURRENCY": "XTS"}, nil, "PAYLOCK_DEFAULT_CURRENCY"},
		{map[string]string{"PAYLOCK_CURRENCIES": "xts"}, nil, "PAYLOCK_CURRENCIES"},
		{map[string]string{"PAYLOCK_CURRENCIES": "FOO"}, nil, "PAYLOCK_CURRENCIES"},
		{map[string]string{"REDIS_URL": "redis://:s3%cret@cache:6379/0"}, nil, "REDIS_URL"},
		{map[string]string{"REDIS_URL": "memcached://cache"}, nil, "REDIS_URL"},
		{map[string]string{"DATABASE_URL": "postgres://app:s3cret@db:notaport/pay"}, nil, "DATABASE_URL"},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		code := Main(context.Background(), append([]string{"serve"}, c.args...), envMap(c.env), nil, io.Discard, &stderr)
		if code != 2 {
			t.Errorf("%v %v: exit %d, want 2", c.env, c.args, code)
		}
		msg := strings.TrimSpace(stderr.String())
		if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%v %v: message %q, want one line naming %s", c.env, c.args, msg, c.want)
		}
		if strings.Contains(msg, "s3cret") || strings.Contains(msg, "s3%cret") {
			t.Errorf("%v: the password leaked: %q", c.env, msg)
		}
	}
}

func TestFlagsOverrideTheEnvironment(t *testing.T) {
	cfg, _, err := loadConfig("serve", []string{"--lock-ttl", "9s"}, envMap(map[string]string{"PAYLOCK_LOCK_TTL": "3s", "PAYLOCK_LOCK_WAIT": "1s"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Lock.TTL != 9*time.Second || cfg.Lock.Wait != time.Second {
		t.Fatalf("ttl %v wait %v", cfg.Lock.TTL, cfg.Lock.Wait)
	}
}

func TestRedactURLHidesEveryKindOfPassword(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app:s3cret@db:5432/pay":                     "postgres://app:xxxxx@db:5432/pay",
		"postgres://app@db/pay?password=s3cret&sslmode=disable": "postgres://app@db/pay?password=xxxxx&sslmode=disable",
		"host=db user=app password=s3cret dbname=pay":           "host=db user=app password=xxxxx dbname=pay",
		"host=db password='s3 cret' dbname=pay":                 "host=db password=xxxxx dbname=pay",
		"redis://:s3cret@cache:6379/0":                          "redis://:xxxxx@cache:6379/0",
		"redis://cache:6379/0":                                  "redis://cache:6379/0",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestConfigLogValueHidesPasswords(t *testing.T) {
	cfg, _, err := loadConfig("serve", nil, envMap(map[string]string{
		"DATABASE_URL": "postgres://app:s3cret-db@db:5432/pay",
		"REDIS_URL":    "redis://:s3cret-redis@cache:6379/0",
	}))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", slog.Any("config", cfg))
	if strings.Contains(buf.String(), "s3cret") {
		t.Fatalf("password in log: %s", buf.String())
	}
	if !strings.Contains(buf.String(), "db:5432") {
		t.Fatalf("host missing from log: %s", buf.String())
	}
}

// TestServeAnswersAndShutsDownGracefully runs the real serve path on :0:
// it migrates, answers a payment, and on cancellation lets an in-flight
// request finish before returning.
func TestServeAnswersAndShutsDownGracefully(t *testing.T) {
	env := map[string]string{
		"DATABASE_URL":           testkit.Schema(t),
		"REDIS_URL":              testkit.RedisURL(t),
		"PAYLOCK_LOCK_PREFIX":    testkit.Key(t, "") + ":",
		"PAYLOCK_ALLOW_UNSIGNED": "true",
		"PAYLOCK_PPROF":          "true",
		"PAYLOCK_ADMIN_TOKEN":    "admin-token-of-the-test",
	}
	cfg, _, err := loadConfig("serve", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Admin.listener = testkit.Listen(t)
	adminBase := "http://" + cfg.Admin.listener.Addr().String()
	ln, mln := testkit.Listen(t), testkit.Listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler), ln, mln) }()
	base := "http://" + ln.Addr().String()
	testkit.WaitReady(t, base+"/healthz", 10*time.Second, nil)

	res, err := http.Post(base+"/webhooks/payments", "application/json",
		strings.NewReader(`{"transaction_id":"tx-serve","amount":100,"currency":"JPY"}`))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	json.NewDecoder(res.Body).Decode(&body)
	res.Body.Close()
	if res.StatusCode != 200 || body["result"] != "processed" {
		t.Fatalf("first delivery: %d %v", res.StatusCode, body)
	}

	// Metrics on their own listener, pprof there too.
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		res, err := http.Get("http://" + mln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		if path == "/metrics" {
			for _, want := range []string{
				`paylock_webhook_requests_total{code="200",result="processed",source="payments"} 1`,
				`paylock_lock_obtain_total{outcome="acquired"} 1`,
				`paylock_lock_release_total{outcome="released"} 1`,
				"paylock_lock_ttl_seconds 5", "paylock_db_pool_connections", "paylock_redis_pool_connections",
				"go_goroutines", "process_cpu_seconds_total",
			} {
				if !strings.Contains(string(b), want) {
					t.Errorf("/metrics lacks %q", want)
				}
			}
		}
	}
	if res, err := http.Get(base + "/debug/pprof/"); err == nil && res.StatusCode == 200 {
		t.Error("pprof is served on the webhook listener")
	}
	// The admin listener: 401 without the token, whatever the path.
	for _, path := range []string{"/", "/disbursements/L-1/1"} {
		if res, err := http.Get(adminBase + path); err != nil || res.StatusCode != http.StatusUnauthorized {
			t.Errorf("admin GET %s without the token: %v %v, want 401", path, res.StatusCode, err)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		var out bytes.Buffer
		if code := Main(ctx, []string{"healthcheck", "--path", path}, envMap(map[string]string{"PAYLOCK_ADDR": ln.Addr().String()}), nil, &out, io.Discard); code != 0 {
			t.Errorf("paylock healthcheck --path %s: exit %d (%s)", path, code, out.String())
		}
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		res, err := http.Get(base + path)
		if err != nil || res.StatusCode != want {
			t.Errorf("GET %s: %v %v", path, res, err)
		}
	}

	// An in-flight request: headers and half a body sent, then SIGTERM.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/payments", pr)
	req.Header.Set("Content-Type", "application/json")
	inflight := make(chan *http.Response, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
		}
		inflight <- res
	}()
	io.WriteString(pw, `{"transaction_id":"tx-inflight",`)
	time.Sleep(200 * time.Millisecond) // the server is reading the body

	cancel()
	testkit.WaitFor(t, 10*time.Second, "shutdown to begin (the listener closed)", func() bool {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	io.WriteString(pw, `"amount":100,"currency":"JPY"}`)
	pw.Close()
	if res := <-inflight; res == nil || res.StatusCode != 200 {
		t.Fatalf("in-flight request during shutdown: %v", res)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after shutdown", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if _, err := http.Get(base + "/"); err == nil {
		t.Fatal("still accepting connections after shutdown")
	}
}

func TestPprofOnlyWithPaylockPprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv := httptest.NewServer(metricsMux(prometheus.NewRegistry(), on))
		res, err := http.Get(srv.URL + "/debug/pprof/")
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.StatusCode == http.StatusOK; got != on {
			t.Errorf("PAYLOCK_PPROF=%v: GET /debug/pprof/ answered %d", on, res.StatusCode)
		}
	}
}

// TestServeWithoutAnySourceRefusesToStartInOneLine: nothing configures a
// source (no secrets, no sources file, signatures required), so serve
// would answer 404 to every delivery: it refuses to start, saying how to
// configure one, before touching the database.
func TestServeWithoutAnySourceRefusesToStartInOneLine(t *testing.T) {
	var stderr bytes.Buffer
	env := map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/none", "PAYLOCK_METRICS_ADDR": "off", "PAYLOCK_ADMIN_ADDR": "off"}
	code := Main(context.Background(), []string{"serve"}, envMap(env), nil, io.Discard, &stderr)
	msg := strings.TrimSpace(stderr.String())
	if code != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, "no webhook source") {
		t.Fatalf("exit %d, %q; want 1 and one line saying no source is configured", code, msg)
	}
	for _, name := range []string{"PAYLOCK_WEBHOOK_SECRETS", "PAYLOCK_SOURCES_FILE", "PAYLOCK_ALLOW_UNSIGNED"} {
		if !strings.Contains(msg, name) {
			t.Errorf("the refusal %q does not name %s", msg, name)
		}
	}
}

// TestServeAStripeSourceAloneNeedsNoWebhookSecrets: a deployment whose
// only source is a Stripe one (PAYLOCK_SOURCES_FILE) starts without
// PAYLOCK_WEBHOOK_SECRETS or PAYLOCK_ALLOW_UNSIGNED; the built-in payments
// source is then not served.
func TestServeAStripeSourceAloneNeedsNoWebhookSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sources.yaml")
	if err := os.WriteFile(path, []byte("sources: {stripe: {adapter: stripe, signature: stripe, secrets_env: STRIPE_WEBHOOK_SECRETS}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DATABASE_URL":           testkit.Schema(t),
		"REDIS_URL":              testkit.RedisURL(t),
		"PAYLOCK_LOCK_PREFIX":    testkit.Key(t, "") + ":",
		"PAYLOCK_SOURCES_FILE":   path,
		"STRIPE_WEBHOOK_SECRETS": stripeSecret,
		"PAYLOCK_ADMIN_ADDR":     "off",
	}
	base := startServe(t, env, serveOptions{}).base
	secrets, err := signature.ParseSecrets(signature.SchemeStripe, stripeSecret)
	if err != nil {
		t.Fatal(err)
	}
	body := fakestripe.PaymentIntentSucceeded(fakestripe.Payment{ID: "pi_alone", Amount: 1200, Currency: "jpy", Created: time.Now()})
	post := func(path string, header http.Header) int {
		t.Helper()
		return testkit.PostJSON(t, context.Background(), base+path, header, body)
	}
	if code := post("/webhooks/stripe", signature.Sign(signature.SchemeStripe, secrets[0], "", time.Now(), body)); code != http.StatusOK {
		t.Errorf("a signed Stripe event: %d, want 200", code)
	}
	if code := post("/webhooks/payments", http.Header{}); code != http.StatusNotFound {
		t.Errorf("POST /webhooks/payments without its secrets configured: %d, want 404 (not served)", code)
	}
}
