package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/riverdemo"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
)

// Attack tests: what a client without any secret can do to a running
// serve, on loopback. Each opens a bounded number of connections and
// waits on events (metrics, answers), never on the clock.

// hardenEnv is a serve with the payments source signed by paymentsSecret.
func hardenEnv(t *testing.T, extra map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{
		"DATABASE_URL":            testkit.Schema(t),
		"REDIS_URL":               testkit.RedisURL(t),
		"PAYLOCK_LOCK_PREFIX":     testkit.Key(t, "") + ":",
		"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret,
		"PAYLOCK_ADMIN_ADDR":      "127.0.0.1:0",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// dialRaw opens a TCP connection to base ("http://host:port"), closed at
// the test's end.
func dialRaw(t *testing.T, base string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// signedPayment returns a payments delivery signed with paymentsSecret.
func signedPayment(t *testing.T, base, tx string) *http.Request {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"transaction_id":%q,"amount":100,"currency":"JPY"}`, tx))
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, paymentsSecret)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/payments", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = signature.Sign(signature.SchemeStandard, secrets[0], "msg_"+tx, time.Now(), body)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// slowBody starts a delivery whose headers are signed (they pass the
// precheck) and whose body never arrives beyond its first bytes.
func slowBody(t *testing.T, base string) net.Conn {
	t.Helper()
	req := signedPayment(t, base, "tx-slow")
	c := dialRaw(t, base)
	var head strings.Builder
	fmt.Fprintf(&head, "POST /webhooks/payments HTTP/1.1\r\nHost: paylock\r\nContent-Length: 4096\r\n")
	for k, vs := range req.Header {
		fmt.Fprintf(&head, "%s: %s\r\n", k, vs[0])
	}
	head.WriteString("\r\n{\"transaction_id\":")
	if _, err := io.WriteString(c, head.String()); err != nil {
		t.Fatal(err)
	}
	return c
}

// readStatus reads the status code of the answer on c (0 when none came
// before the connection ended).
func readStatus(c net.Conn) int {
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// metricAt waits until series on the /metrics page at url reads want.
func metricAt(t *testing.T, url, series string, want float64) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, fmt.Sprintf("%s = %v", series, want), func() bool {
		v, ok := testkit.Scrape(t, url+"/metrics").Value(series)
		return ok && v == want
	})
}

func TestHeadersBeyondMaxHeaderBytesAre431OnEveryListener(t *testing.T) {
	t.Parallel()
	s := startServe(t, hardenEnv(t, nil), serveOptions{metrics: true, admin: true})
	big := strings.Repeat("a", 100<<10) // beyond 64 KiB, far below Go's 1 MiB default
	for _, base := range []string{s.base + "/healthz", s.metrics + "/metrics", s.admin + "/admin/"} {
		req, _ := http.NewRequest(http.MethodGet, base, nil)
		req.Header.Set("X-Padding", big)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", base, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("GET %s with 100 KiB of headers: %d, want 431", base, res.StatusCode)
		}
	}
	// Headers under the cap are served.
	req, _ := http.NewRequest(http.MethodGet, s.base+"/healthz", nil)
	req.Header.Set("X-Padding", strings.Repeat("a", 32<<10))
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 200 {
		t.Fatalf("32 KiB of headers: %v %v", res, err)
	}
}

func TestConnectionsBeyondMaxConnsWaitToBeAccepted(t *testing.T) {
	t.Parallel()
	s := startServe(t, hardenEnv(t, map[string]string{"PAYLOCK_MAX_CONNS": "2"}), serveOptions{metrics: true})
	// Two clients that never finish their headers hold both connections.
	held := []net.Conn{dialRaw(t, s.base), dialRaw(t, s.base)}
	for _, c := range held {
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: paylock\r\n")
	}
	metricAt(t, s.metrics, `paylock_listener_connections{listener="webhook",state="open"}`, 2)
	third := dialRaw(t, s.base)
	io.WriteString(third, "GET /healthz HTTP/1.1\r\nHost: paylock\r\nConnection: close\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if code := readStatus(third); code != 0 {
		t.Fatalf("a third connection was served (%d) while two were open", code)
	}
	// One of the two gives up: the third is accepted and answered.
	held[0].Close()
	third.SetReadDeadline(time.Now().Add(20 * time.Second))
	if code := readStatus(third); code != 200 {
		t.Fatalf("third connection once a slot was free: %d", code)
	}
}

func TestSignedDeliveryAnsweredWhileHundredsOfSlowBodiesAreOpen(t *testing.T) {
	t.Parallel()
	const slow = 256 // PAYLOCK_MAX_INFLIGHT's default: on main they held every slot
	s := startServe(t, hardenEnv(t, nil), serveOptions{metrics: true})
	conns := make([]net.Conn, slow)
	for i := range conns {
		conns[i] = slowBody(t, s.base)
	}
	metricAt(t, s.metrics, `paylock_webhook_deliveries_open{stage="reading"}`, slow)

	client := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	res, err := client.Do(signedPayment(t, s.base, "tx-signed"))
	if err != nil {
		t.Fatalf("signed delivery beside %d slow bodies: %v", slow, err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("signed delivery beside %d slow bodies: %d %s", slow, res.StatusCode, b)
	}
	t.Logf("signed delivery answered in %v beside %d slow bodies", time.Since(start), slow)

	// The slow bodies are cut with 408 once past the grace.
	codes := make([]int, slow)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			codes[i] = readStatus(c)
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusRequestTimeout {
			t.Fatalf("slow body %d: %d, want 408", i, code)
		}
	}
	metricAt(t, s.metrics, `paylock_webhook_deliveries_open{stage="reading"}`, 0)
}

func TestReadyzIsUnreadyWhileTheReplicaSheds(t *testing.T) {
	t.Parallel()
	s := startServe(t, hardenEnv(t, map[string]string{"PAYLOCK_MAX_READING": "2"}), serveOptions{metrics: true})
	a, b := slowBody(t, s.base), slowBody(t, s.base)
	metricAt(t, s.metrics, `paylock_webhook_deliveries_open{stage="reading"}`, 2)

	res, err := http.DefaultClient.Do(signedPayment(t, s.base, "tx-shed"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a third body while two are read: %d, want 503 with Retry-After", res.StatusCode)
	}
	ready, err := http.Get(s.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(ready.Body)
	ready.Body.Close()
	if ready.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(rb), `"capacity":"shedding"`) {
		t.Fatalf("/readyz while shedding: %d %s", ready.StatusCode, rb)
	}
	// Cut at the floor, the slow bodies free their slots; ready again.
	for _, c := range []net.Conn{a, b} {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if code := readStatus(c); code != http.StatusRequestTimeout {
			t.Fatalf("slow body: %d, want 408", code)
		}
	}
	testkit.WaitFor(t, 20*time.Second, "/readyz ready", func() bool {
		res, err := http.Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	res, err = http.DefaultClient.Do(signedPayment(t, s.base, "tx-after"))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("a delivery after the slow bodies were cut: %v %v", res, err)
	}
	res.Body.Close()
}

// TestAdminWithoutATokenRefusesCrossSiteAndRebindingRequests runs serve
// with the default admin set-up (loopback, no token) and River UI: a page
// of another site can neither delete a discarded job through the
// operator's browser nor, by rebinding its name to the listener, read it.
func TestAdminWithoutATokenRefusesCrossSiteAndRebindingRequests(t *testing.T) {
	t.Parallel()
	dsn := testkit.Schema(t)
	env := hardenEnv(t, map[string]string{"DATABASE_URL": dsn})
	s := startServe(t, env, serveOptions{admin: true})
	st := paylocktest.Migrated(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	jobs, err := riverdemo.Seed(ctx, st)
	cancel()
	if err != nil || len(jobs.Discarded) == 0 {
		t.Fatalf("seed: %v %+v", err, jobs)
	}
	id := jobs.Discarded[0]
	do := func(method, path, host string, body string, header map[string]string) (int, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, s.admin+path, strings.NewReader(body))
		if host != "" {
			req.Host = host
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode, res.Header
	}
	del := fmt.Sprintf(`{"ids":["%d"]}`, id)
	crossSite := map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
	if code, _ := do(http.MethodPost, "/admin/river/api/jobs/delete", "", del, crossSite); code != http.StatusForbidden {
		t.Fatalf("cross-site delete of a discarded job: %d, want 403", code)
	}
	if code, _ := do(http.MethodGet, fmt.Sprintf("/admin/river/api/jobs/%d", id), "evil.example:9091", "", nil); code != http.StatusForbidden {
		t.Fatalf("a rebound name reading the job: %d, want 403", code)
	}
	if n := testkit.Count(t, st.Pool(), "SELECT count(*) FROM river_job WHERE id = $1", id); n != 1 {
		t.Fatalf("the discarded job is gone (%d rows)", n)
	}
	code, h := do(http.MethodGet, "/admin/river/jobs", "", "", nil)
	if code != 200 || h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("River UI page: %d X-Frame-Options %q CSP %q", code, h.Get("X-Frame-Options"), h.Get("Content-Security-Policy"))
	}
	// The operator's own page still can.
	if code, _ := do(http.MethodPost, "/admin/river/api/jobs/delete", "", del, map[string]string{"Content-Type": "application/json", "Origin": s.admin, "Sec-Fetch-Site": "same-origin"}); code != 200 {
		t.Fatalf("same-origin delete: %d", code)
	}
	if n := testkit.Count(t, st.Pool(), "SELECT count(*) FROM river_job WHERE id = $1", id); n != 0 {
		t.Fatalf("same-origin delete left the job (%d rows)", n)
	}
}

func TestFlagErrorsNeverEchoASecret(t *testing.T) {
	t.Parallel()
	const secret = "Zq8SECRETzq8"
	for _, args := range [][]string{
		{"--admin-tokens", "ops:" + secret + ",broken"},
		{"--admin-tokens", "bad name:" + secret + "0123456789"},
		{"--admin-token", secret},
		{"--database-url", "postgres://app:" + secret + "@db:notaport/pay"},
		{"--database-url", "postgres://app:" + secret + "@db/pay?password=" + secret + "%zz"},
		{"--redis-url", "redis://:" + secret + "@cache:notaport/0"},
		{"--redis-url", "memcached://:" + secret + "@cache"},
		{"--migrate-database-url", "postgres://app:" + secret + "@db:notaport/pay"},
		{"--migrate-database-url", "%zz" + secret},
		{"--forward-url", "https://u:" + secret + "@hooks.example/x?token=" + secret + "&a=%zz"},
	} {
		var stderr bytes.Buffer
		code := Main(context.Background(), append([]string{"serve"}, args...), envMap(nil), nil, io.Discard, &stderr)
		msg := stderr.String()
		if code != 2 || !strings.Contains(msg, args[0]) && !strings.Contains(msg, "_URL") {
			t.Errorf("%s: exit %d, message %q; want 2 and one naming the flag or variable", args[0], code, msg)
		}
		if strings.Contains(msg, secret) {
			t.Errorf("%s: the secret leaked: %q", args[0], msg)
		}
	}
}

// startServeLogged is startServe with serve's log in logs.
func startServeLogged(t *testing.T, env map[string]string, o serveOptions, logs *testkit.LogBuffer) *served {
	t.Helper()
	cfg, _, err := loadConfig("serve", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	s := &served{cfg: cfg}
	if o.admin {
		cfg.Admin.listener = testkit.Listen(t)
		s.admin = "http://" + cfg.Admin.listener.Addr().String()
	}
	var mln net.Listener
	if o.metrics {
		mln = testkit.Listen(t)
		s.metrics = "http://" + mln.Addr().String()
	}
	ln := testkit.Listen(t)
	s.base = "http://" + ln.Addr().String()
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	running := testkit.Run(t, "serve", func(ctx context.Context) error { return serve(ctx, cfg, logger, ln, mln) })
	testkit.WaitReady(t, s.base+"/healthz", 10*time.Second, running)
	return s
}

// get returns the body at url, failing the test on an error.
func getBody(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A browser's Accept: the admin console's paths answer it with their
	// pages.
	req.Header.Set("Accept", "text/html,*/*;q=0.8")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return fmt.Sprintf("GET %s: %d\n%s\n", url, res.StatusCode, b)
}

// TestNoOutputShowsAForwardDestinationsCredentials forwards a payment to a
// destination whose URL carries a password and a ?token=, has it fail and
// be discarded, and reads everything an operator or a log reader sees.
func TestNoOutputShowsAForwardDestinationsCredentials(t *testing.T) {
	t.Parallel()
	rc, rurl := newForwardReceiver(t, http.StatusInternalServerError)
	secretURL := strings.Replace(rurl, "http://", "http://paylock:s3cret-pass@", 1) + "?token=s3cret-token"
	env := forwardEnv(t, secretURL)
	env["PAYLOCK_ADMIN_ADDR"] = "127.0.0.1:0"
	var logs testkit.LogBuffer
	s := startServeLogged(t, env, serveOptions{admin: true}, &logs)
	res, err := http.Post(s.base+"/webhooks/payments", "application/json", strings.NewReader(`{"transaction_id":"tx-creds","amount":100,"currency":"JPY"}`))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("delivery: %v %v", res, err)
	}
	res.Body.Close()
	rc.WaitAttempts(t, 1)
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	testkit.WaitFor(t, 20*time.Second, "the forward discarded", func() bool {
		return testkit.Count(t, st.Pool(), "SELECT count(*) FROM river_job WHERE kind = 'forward' AND state = 'discarded'") == 1
	})
	var out strings.Builder
	out.WriteString(getBody(t, s.admin+"/admin/payments/payments/tx-creds"))
	out.WriteString(getBody(t, s.admin+"/admin/review"))
	out.WriteString(getBody(t, s.admin+"/admin/river/api/jobs?state=discarded"))
	var id int64
	if err := st.Pool().QueryRow(context.Background(), "SELECT id FROM river_job WHERE kind = 'forward'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	out.WriteString(getBody(t, fmt.Sprintf("%s/admin/river/api/jobs/%d", s.admin, id)))
	out.WriteString(logs.String())
	if strings.Count(out.String(), ": 200\n") != 4 {
		t.Fatalf("a page did not answer 200:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "tx-creds") {
		t.Fatalf("the outputs do not show the payment at all:\n%s", out.String())
	}
	if strings.Contains(out.String(), "s3cret") {
		t.Errorf("a destination's credentials are shown:\n%s", out.String())
	}
}

func TestServeRefusesAForwardSecretThatASourceHolds(t *testing.T) {
	t.Parallel()
	for name, env := range map[string]map[string]string{
		"the payments source's": {"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "PAYLOCK_FORWARD_SECRETS": forwardSecret + "," + paymentsSecret},
		"the loans source's":    {"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "PAYLOCK_LOAN_SECRETS": forwardSecret, "PAYLOCK_FORWARD_SECRETS": forwardSecret},
	} {
		env["PAYLOCK_FORWARD_URL"] = "https://orders.internal/paylock"
		env["DATABASE_URL"] = testkit.Schema(t)
		env["REDIS_URL"] = testkit.RedisURL(t)
		env["PAYLOCK_ADMIN_ADDR"], env["PAYLOCK_METRICS_ADDR"], env["PAYLOCK_ADDR"] = "off", "off", "127.0.0.1:0"
		// Bounded: a serve that starts anyway stops when ctx ends.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var stderr bytes.Buffer
		code := Main(ctx, []string{"serve"}, envMap(env), nil, io.Discard, &stderr)
		cancel()
		errOut := stderr.String()
		if code == 0 || !strings.Contains(errOut, "PAYLOCK_FORWARD_SECRETS") || strings.Contains(errOut, forwardSecret) {
			t.Errorf("forward secret equal to %s: exit %d, %q; want a refusal naming PAYLOCK_FORWARD_SECRETS", name, code, errOut)
		}
	}
}

func TestAdyenSourceWithBasicAuthRefusesDeliveriesWithoutIt(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sources.yaml")
	file := "sources: {adyen: {adapter: adyen, signature: adyen, secrets_env: ADYEN_HMAC_KEYS, basic_auth_env: ADYEN_BASIC_AUTH}}\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env := hardenEnv(t, map[string]string{"PAYLOCK_SOURCES_FILE": path, "ADYEN_HMAC_KEYS": adyenKey,
		"ADYEN_BASIC_AUTH": "adyen-notify:b4sic-pass"})
	delete(env, "PAYLOCK_WEBHOOK_SECRETS")
	s := startServe(t, env, serveOptions{})

	body := adyenSigned(t, adyenKey, "8815000000000001")
	post := func(user, pass string) int {
		req, _ := http.NewRequest(http.MethodPost, s.base+"/webhooks/adyen", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, c := range [][2]string{{"", ""}, {"adyen-notify", "wrong"}, {"someone", "b4sic-pass"}} {
		if code := post(c[0], c[1]); code != http.StatusUnauthorized {
			t.Errorf("HMAC-signed, basic auth %q: %d, want 401", c, code)
		}
	}
	if code := post("adyen-notify", "b4sic-pass"); code != 200 {
		t.Fatalf("with both: %d", code)
	}
	// Refused at start: a variable that is not user:password.
	bad := hardenEnv(t, map[string]string{"PAYLOCK_SOURCES_FILE": path, "ADYEN_HMAC_KEYS": adyenKey, "ADYEN_BASIC_AUTH": "no-colon-s3cret"})
	delete(bad, "PAYLOCK_WEBHOOK_SECRETS")
	if code, _, errOut := runCLI(bad, "serve"); code == 0 || !strings.Contains(errOut, "ADYEN_BASIC_AUTH") || strings.Contains(errOut, "s3cret") {
		t.Errorf("ADYEN_BASIC_AUTH without a colon: exit %d, %q", code, errOut)
	}
}

// adyenSigned is a one-item Adyen notification for psp, signed with key.
func adyenSigned(t *testing.T, key, psp string) []byte {
	t.Helper()
	keys, err := signature.ParseSecrets(signature.SchemeAdyen, key)
	if err != nil {
		t.Fatal(err)
	}
	body, err := signature.SignAdyenNotification(keys[0], []byte(`{"live":"false","notificationItems":[{"NotificationRequestItem":{`+
		`"additionalData":{},"amount":{"currency":"EUR","value":1000},"eventCode":"AUTHORISATION","eventDate":"2026-11-30T12:00:00+01:00",`+
		`"merchantAccountCode":"PaylockECOM","merchantReference":"order-1","originalReference":"","paymentMethod":"visa",`+
		`"pspReference":"`+psp+`","reason":"","success":"true"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestAdyenForwardsMarkWhatTheHMACDoesNotCover runs two Adyen sources,
// one with basic authentication, and reads their forwards: without it,
// the members of the item that Adyen's HMAC does not sign are named
// unauthenticated; with it, none are. Neither carries the HMAC itself.
func TestAdyenForwardsMarkWhatTheHMACDoesNotCover(t *testing.T) {
	t.Parallel()
	const otherKey = "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF"
	rc, rurl := newForwardReceiver(t)
	path := filepath.Join(t.TempDir(), "sources.yaml")
	file := "sources:\n" +
		"  adyen: {adapter: adyen, signature: adyen, secrets_env: ADYEN_HMAC_KEYS}\n" +
		"  adyenauth: {adapter: adyen, signature: adyen, secrets_env: OTHER_HMAC_KEYS, basic_auth_env: ADYEN_BASIC_AUTH}\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env := forwardEnv(t, rurl)
	delete(env, "PAYLOCK_ALLOW_UNSIGNED")
	env["PAYLOCK_SOURCES_FILE"], env["ADYEN_HMAC_KEYS"], env["OTHER_HMAC_KEYS"] = path, adyenKey, otherKey
	env["ADYEN_BASIC_AUTH"] = "adyen-notify:b4sic-pass"
	env["PAYLOCK_FORWARD_MAX_ATTEMPTS"] = "5"
	s := startServe(t, env, serveOptions{})
	for source, body := range map[string][]byte{"adyen": adyenSigned(t, adyenKey, "psp-plain"), "adyenauth": adyenSigned(t, otherKey, "psp-auth")} {
		req, _ := http.NewRequest(http.MethodPost, s.base+"/webhooks/"+source, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth("adyen-notify", "b4sic-pass")
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%s delivery: %v %v", source, res, err)
		}
		res.Body.Close()
	}
	attempts := rc.WaitAttempts(t, 2)
	got := map[string][]string{}
	for _, a := range attempts {
		var msg struct {
			Data struct {
				Source          string   `json:"source"`
				Unauthenticated []string `json:"unauthenticated"`
			} `json:"data"`
		}
		if err := json.Unmarshal(a.Body, &msg); err != nil {
			t.Fatal(err)
		}
		got[msg.Data.Source] = msg.Data.Unauthenticated
		if bytes.Contains(a.Body, []byte("hmacSignature")) {
			t.Errorf("%s forward carries the notification's signature: %s", msg.Data.Source, a.Body)
		}
	}
	if want := []string{"additionalData", "eventDate", "paymentMethod", "reason"}; !slices.Equal(got["adyen"], want) {
		t.Errorf("adyen forward: unauthenticated %q, want %q", got["adyen"], want)
	}
	if u, ok := got["adyenauth"]; !ok || u != nil {
		t.Errorf("adyenauth forward (basic auth): unauthenticated %q (present %v), want none", u, ok)
	}
}
