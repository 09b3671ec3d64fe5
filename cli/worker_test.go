package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// lendingEnv returns the environment of a paylock talking to a fresh
// schema, the test Redis and an in-process fake provider.
func lendingEnv(t *testing.T) (map[string]string, *fakeprovider.Provider) {
	t.Helper()
	fake := fakeprovider.New(fakeprovider.Config{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	t.Cleanup(fake.Close)
	return map[string]string{
		"DATABASE_URL":           testkit.Schema(t),
		"REDIS_URL":              testkit.RedisURL(t),
		"PAYLOCK_LOCK_PREFIX":    testkit.Key(t, "") + ":",
		"PAYLOCK_ALLOW_UNSIGNED": "true",
		"PAYLOCK_METRICS_ADDR":   "off",
		"PAYLOCK_PAYOUT_URL":     srv.URL,
		"PAYLOCK_WORKER_POLL":    "50ms",
		"PAYLOCK_LOG_LEVEL":      "error",
	}, fake
}

// waitForStatus waits until loanID's first tranche has status want, and
// returns it.
func waitForStatus(t *testing.T, st *store.Store, loanID string, want store.DisbursementStatus) store.Disbursement {
	t.Helper()
	var d store.Disbursement
	testkit.Eventually(t, 15*time.Second, loanID+" "+string(want), func(ctx context.Context) error {
		var err error
		if d, err = st.Disbursements().Disbursement(ctx, loanID, 1); err != nil {
			return err
		}
		if d.Status != want {
			return fmt.Errorf("%+v", d)
		}
		return nil
	})
	return d
}

func TestWorkerCommandPaysOutAndStopsOnSIGTERM(t *testing.T) {
	env, fake := lendingEnv(t)
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exit := make(chan int, 1)
	var stderr bytes.Buffer
	go func() { exit <- Main(ctx, []string{"worker"}, envMap(env), nil, io.Discard, &stderr) }()

	if _, err := st.Disbursements().AcceptDisbursement(context.Background(), store.Disbursement{
		LoanID: "L-cmd", Tranche: 1, Amount: 1000, Currency: "JPY", EventID: "evt_cmd",
	}); err != nil {
		t.Fatal(err)
	}
	d := waitForStatus(t, st, "L-cmd", store.StatusSent)
	if fake.Created("L-cmd-1") != 1 || d.ProviderRef == "" {
		t.Fatalf("row %+v, provider created %d", d, fake.Created("L-cmd-1"))
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("paylock worker did not stop")
	}
}

func TestServeWithWorkerTakesALoanFromWebhookToPayout(t *testing.T) {
	env, fake := lendingEnv(t)
	env["PAYLOCK_WORKER"] = "true"
	cfg, _, err := loadConfig("paylock serve", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Admin.listener = testkit.Listen(t)
	admin := "http://" + cfg.Admin.listener.Addr().String()
	ln := testkit.Listen(t)
	running := testkit.Run(t, "serve", func(ctx context.Context) error { return serve(ctx, cfg, slog.New(slog.DiscardHandler), ln, nil) })
	base := "http://" + ln.Addr().String()
	testkit.WaitReady(t, base+"/healthz", 10*time.Second, running)

	body := `{"event_id":"evt_serve","loan_id":"L-serve","tranche":1,"amount":500000,"currency":"JPY"}`
	res, err := http.Post(base+"/webhooks/loans", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("loan webhook: %d", res.StatusCode)
	}
	testkit.Eventually(t, 15*time.Second, "L-serve sent", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/disbursements/L-serve/1", nil)
		if err != nil {
			return err
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		var row map[string]any
		json.NewDecoder(res.Body).Decode(&row)
		if row["status"] != "sent" {
			return fmt.Errorf("%v", row)
		}
		return nil
	})
	if n := fake.Created("L-serve-1"); n != 1 {
		t.Fatalf("%d payouts", n)
	}
}

func TestWorkerWithoutAPayoutURLRefusesToStart(t *testing.T) {
	var stderr bytes.Buffer
	code := Main(context.Background(), []string{"worker"}, envMap(nil), nil, io.Discard, &stderr)
	msg := strings.TrimSpace(stderr.String())
	if code == 0 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "PAYLOCK_PAYOUT_URL") {
		t.Fatalf("exit %d, message %q: want a one-line refusal naming PAYLOCK_PAYOUT_URL", code, msg)
	}
}

func TestBadPayoutSettingsStopStartWithOneLineNamingTheVariable(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"PAYLOCK_PAYOUT_URL": "ftp://provider"}, "PAYLOCK_PAYOUT_URL"},
		{map[string]string{"PAYLOCK_PAYOUT_TIMEOUT": "soon"}, "PAYLOCK_PAYOUT_TIMEOUT"},
		{map[string]string{"PAYLOCK_PAYOUT_BACKOFF_CAP": "1ms"}, "PAYLOCK_PAYOUT_BACKOFF_CAP"},
		{map[string]string{"PAYLOCK_PROVIDER_KEY_RETENTION": "10s"}, "PAYLOCK_PROVIDER_KEY_RETENTION"},
		{map[string]string{"PAYLOCK_WORKER_CONCURRENCY": "0"}, "PAYLOCK_WORKER_CONCURRENCY"},
		{map[string]string{"PAYLOCK_WORKER": "sometimes"}, "PAYLOCK_WORKER"},
	} {
		var stderr bytes.Buffer
		code := Main(context.Background(), []string{"worker"}, envMap(c.env), nil, io.Discard, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 2 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%v: exit %d, message %q; want 2 and one line naming %s", c.env, code, msg, c.want)
		}
	}
}

func TestDisbursementsStuckListsOldAndFlaggedRows(t *testing.T) {
	env, _ := lendingEnv(t)
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	ctx := context.Background()
	for _, loan := range []string{"L-fresh", "L-old", "L-flagged"} {
		if _, err := st.Disbursements().AcceptDisbursement(ctx, store.Disbursement{LoanID: loan, Tranche: 1, Amount: 1, Currency: "JPY", EventID: "evt_" + loan}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sql := range []string{
		`UPDATE disbursements SET status_since = now() - interval '2 hours' WHERE loan_id = 'L-old'`,
		`UPDATE disbursements SET review_reason = 'lookup found nothing' WHERE loan_id = 'L-flagged'`,
	} {
		if _, err := st.Pool().Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	stuck := func(args ...string) string {
		t.Helper()
		var out, stderr bytes.Buffer
		if code := Main(ctx, append([]string{"disbursements", "stuck"}, args...), envMap(env), nil, &out, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		return out.String()
	}
	out := stuck("--older-than", "1h")
	if !strings.Contains(out, "L-old") || !strings.Contains(out, "L-flagged") || strings.Contains(out, "L-fresh") ||
		!strings.Contains(out, "REVIEW: lookup found nothing") {
		t.Fatalf("--older-than 1h:\n%s", out)
	}
	if out := stuck("--older-than=1d"); strings.Contains(out, "L-old") || !strings.Contains(out, "L-flagged") {
		t.Fatalf("--older-than=1d:\n%s", out)
	}
	if out := stuck(); !strings.Contains(out, "L-old") {
		t.Fatalf("default 1h:\n%s", out)
	}
}

func TestOlderThanAcceptsDurationsAndDays(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
		rest int
		bad  bool
	}{
		{nil, time.Hour, 0, false},
		{[]string{"--older-than", "90m"}, 90 * time.Minute, 0, false},
		{[]string{"-older-than=2d", "--log-level", "debug"}, 48 * time.Hour, 2, false},
		{[]string{"--older-than"}, 0, 0, true},
		{[]string{"--older-than", "soon"}, 0, 0, true},
		{[]string{"--older-than", "-1h"}, 0, 0, true},
	} {
		d, rest, err := cutOlderThan(c.args)
		if (err != nil) != c.bad || (!c.bad && (d != c.want || len(rest) != c.rest)) {
			t.Errorf("%v: %v %v %v", c.args, d, rest, err)
		}
	}
	var stderr bytes.Buffer
	if code := Main(context.Background(), []string{"disbursements", "pending"}, envMap(nil), nil, io.Discard, &stderr); code != 2 {
		t.Errorf("unknown disbursements subcommand: exit %d", code)
	}
}

func TestServeGivesEachBuiltinSourceItsOwnSecret(t *testing.T) {
	const pspSecret, lenderSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_bGVuZGVyLXNlY3JldC1mb3ItdGVzdHMtb25seQ=="
	send := func(t *testing.T, base, path, secret, id, body string) int {
		t.Helper()
		secrets, err := signature.ParseSecrets(signature.SchemeStandard, secret)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		for k, vs := range signature.Sign(signature.SchemeStandard, secrets[0], id, time.Now(), []byte(body)) {
			req.Header[k] = vs
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req) // startServe has waited until serve answers
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	start := func(t *testing.T, env map[string]string) string {
		t.Helper()
		return startServe(t, env, serveOptions{}).base
	}
	loan := `{"event_id":"evt_own","loan_id":"L-own","tranche":1,"amount":500000,"currency":"JPY"}`

	t.Run("loans without their own secrets are not served", func(t *testing.T) {
		env, _ := lendingEnv(t)
		delete(env, "PAYLOCK_ALLOW_UNSIGNED")
		env["PAYLOCK_WEBHOOK_SECRETS"] = pspSecret
		env["PAYLOCK_ADMIN_ADDR"] = "off"
		base := start(t, env)
		if code := send(t, base, "/webhooks/loans", pspSecret, "msg-1", loan); code != http.StatusNotFound {
			t.Fatalf("a loan signed with the PSP's secret, no loans source: %d, want 404", code)
		}
	})
	t.Run("a loan signed with the payments secret is refused", func(t *testing.T) {
		env, _ := lendingEnv(t)
		delete(env, "PAYLOCK_ALLOW_UNSIGNED")
		env["PAYLOCK_WEBHOOK_SECRETS"] = pspSecret
		env["PAYLOCK_LOAN_SECRETS"] = lenderSecret
		env["PAYLOCK_ADMIN_ADDR"] = "off"
		base := start(t, env)
		if code := send(t, base, "/webhooks/loans", pspSecret, "msg-2", loan); code != http.StatusUnauthorized {
			t.Fatalf("a loan signed with the PSP's secret: %d, want 401", code)
		}
		if code := send(t, base, "/webhooks/payments", lenderSecret, "msg-3", `{"transaction_id":"tx-own","amount":1,"currency":"JPY"}`); code != http.StatusUnauthorized {
			t.Fatalf("a payment signed with the lender's secret: %d, want 401", code)
		}
		if code := send(t, base, "/webhooks/loans", lenderSecret, "msg-4", loan); code != http.StatusOK {
			t.Fatalf("a loan signed with the lender's secret: %d, want 200", code)
		}
	})
}
