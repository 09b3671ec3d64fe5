package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/fakestripe"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

const stripeKey = "sk_test_reconcile0123456789"

// stripeReconcileEnv is a migrated schema, a stripe source (forwarding its
// payments) and a fake Stripe API listing events.
type stripeReconcileEnv struct {
	env map[string]string
	st  *store.Store
	api *fakestripe.API
}

func setupStripeReconcile(t *testing.T) *stripeReconcileEnv {
	t.Helper()
	api := fakestripe.New(stripeKey)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "sources.yaml")
	file := `
sources:
  stripe:
    adapter: stripe
    signature: stripe
    secrets_env: STRIPE_WEBHOOK_SECRETS
    events: [payment_intent.succeeded]
    forward_url: https://orders.internal/paylock
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn, st := paylocktest.MigratedSchema(t)
	env := map[string]string{
		"DATABASE_URL":            dsn,
		"REDIS_URL":               testkit.RedisURL(t),
		"PAYLOCK_LOCK_PREFIX":     testkit.Key(t, "") + ":",
		"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret,
		"PAYLOCK_SOURCES_FILE":    path,
		"STRIPE_WEBHOOK_SECRETS":  stripeSecret,
		"PAYLOCK_FORWARD_SECRETS": forwardSecret,
		"STRIPE_API_KEY":          stripeKey,
		"PAYLOCK_STRIPE_API_URL":  srv.URL,
		"PAYLOCK_LOG_LEVEL":       "error",
		"PAYLOCK_ADMIN_ADDR":      "off", // the default port is one for every test at once
	}
	return &stripeReconcileEnv{env: env, st: st, api: api}
}

// run runs "paylock reconcile payments" with args.
func (e *stripeReconcileEnv) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"reconcile", "payments"}, args...), envMap(e.env), nil, &out, &errb)
	t.Logf("paylock reconcile payments %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// payment adds pi's payment_intent.succeeded to the API and, with
// recorded > 0, records it as a webhook would have, for that amount.
func (e *stripeReconcileEnv) payment(t *testing.T, pi string, amount, recorded int64, created time.Time) {
	t.Helper()
	ev := fakestripe.PaymentIntentSucceeded(fakestripe.Payment{ID: pi, Amount: amount, Currency: "jpy", Created: created})
	e.api.Add(ev)
	if recorded > 0 {
		_, err := e.st.Payments().RecordPayment(context.Background(), store.Payment{Source: "stripe", TransactionID: pi,
			Amount: recorded, Currency: "JPY", Payload: ev, EventID: "evt_" + pi})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestReconcilePaymentsRecordsTheMissingPaymentOnceAndReportsTheMismatch(t *testing.T) {
	t.Parallel()
	e := setupStripeReconcile(t)
	now := time.Now()
	// 120 payments recorded by their webhooks: two pages of 100.
	for i := range 120 {
		e.payment(t, fmt.Sprintf("pi_seen_%03d", i), 1000+int64(i), 1000+int64(i), now.Add(-time.Duration(i)*time.Minute))
	}
	e.payment(t, "pi_missing", 4200, 0, now.Add(-3*time.Hour))                                                      // its webhook never came
	e.payment(t, "pi_other", 2500, 2000, now.Add(-4*time.Hour))                                                     // recorded with another amount
	e.payment(t, "pi_old", 999, 0, now.Add(-100*time.Hour))                                                         // outside --since
	e.api.Add(fakestripe.ChargeSucceeded(fakestripe.Payment{ID: "ch_x", Amount: 1, Currency: "eur", Created: now})) // a type the source does not record

	payments := `SELECT count(*) FROM payments WHERE transaction_id = $1`
	forwards := `SELECT count(*) FROM forward_messages WHERE transaction_id = $1`

	code, out, _ := e.run(t, "--source", "stripe", "--since", "72h", "--dry-run")
	if code != 1 || !strings.Contains(out, "would_record  pi_missing") || !strings.Contains(out, "mismatch") ||
		!strings.Contains(out, "122 events since") || !strings.Contains(out, "120 already recorded, 1 would record, 1 mismatched, 0 errors") {
		t.Fatalf("--dry-run: exit %d\n%s", code, out)
	}
	if n := testkit.Count(t, e.st.Pool(), payments, "pi_missing"); n != 0 {
		t.Fatalf("--dry-run recorded pi_missing (%d rows)", n)
	}

	code, out, _ = e.run(t, "--since", "72h")
	if code != 1 || !strings.Contains(out, "recorded_now  pi_missing") || !strings.Contains(out, "pi_other") ||
		!strings.Contains(out, "120 already recorded, 1 recorded now, 1 mismatched, 0 errors") {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	if n, f := testkit.Count(t, e.st.Pool(), payments, "pi_missing"), testkit.Count(t, e.st.Pool(), forwards, "pi_missing"); n != 1 || f != 1 {
		t.Fatalf("pi_missing: %d rows, %d forward jobs; want 1 and 1 (the webhook's pipeline, forward hook included)", n, f)
	}
	if n := testkit.Count(t, e.st.Pool(), payments, "pi_old"); n != 0 {
		t.Errorf("pi_old, outside --since, was recorded")
	}
	var amount int64
	if err := e.st.Pool().QueryRow(context.Background(), `SELECT amount FROM payments WHERE transaction_id = 'pi_other'`).Scan(&amount); err != nil || amount != 2000 {
		t.Errorf("pi_other's amount = %d, %v; want 2000 kept", amount, err)
	}

	code, out, _ = e.run(t)
	if code != 1 || strings.Contains(out, "recorded_now") || !strings.Contains(out, "121 already recorded, 0 recorded now, 1 mismatched") {
		t.Fatalf("second run: exit %d, want 1 for the mismatch alone\n%s", code, out)
	}
	if _, err := e.st.Pool().Exec(context.Background(), `DELETE FROM payments WHERE transaction_id = 'pi_other'`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Payments().RecordPayment(context.Background(), store.Payment{Source: "stripe", TransactionID: "pi_other", Amount: 2500, Currency: "JPY", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if code, out, _ = e.run(t); code != 0 || !strings.Contains(out, "122 already recorded, 0 recorded now, 0 mismatched, 0 errors") {
		t.Fatalf("all recorded: exit %d, want 0\n%s", code, out)
	}
	if n, f := testkit.Count(t, e.st.Pool(), payments, "pi_missing"), testkit.Count(t, e.st.Pool(), forwards, "pi_missing"); n != 1 || f != 1 {
		t.Fatalf("pi_missing after three runs: %d rows, %d forward jobs; want 1 and 1", n, f)
	}
}

func TestReconcilePaymentsUsageAndRefusals(t *testing.T) {
	t.Parallel()
	e := setupStripeReconcile(t)
	e.payment(t, "pi_1", 1000, 0, time.Now())
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range e.env {
			m[a] = b
		}
		m[k] = v
		return m
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"wrong key", with("STRIPE_API_KEY", "sk_test_wrong"), nil, 1, "401"},
		{"no key", with("STRIPE_API_KEY", ""), nil, 2, "STRIPE_API_KEY is required"},
		{"unknown source", e.env, []string{"--source", "adyen"}, 2, `no source "adyen"`},
		{"not a stripe source", e.env, []string{"--source", "payments"}, 2, "only stripe sources"},
		{"bad since", e.env, []string{"--since", "soon"}, 2, "invalid --since"},
		{"since without value", e.env, []string{"--since"}, 2, "needs a value"},
		{"bad interval", with("PAYLOCK_RECONCILE_INTERVAL", "5s"), nil, 2, "PAYLOCK_RECONCILE_INTERVAL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), append([]string{"reconcile", "payments"}, c.args...), envMap(c.env), nil, &out, &errb)
			if code != c.code || !strings.Contains(errb.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errb.String(), c.code, c.want)
			}
			if strings.Contains(out.String()+errb.String(), "sk_test_") {
				t.Errorf("the key was printed: %s%s", out.String(), errb.String())
			}
		})
	}
	if n := testkit.Count(t, e.st.Pool(), `SELECT count(*) FROM payments`); n != 0 {
		t.Errorf("%d payments recorded by refused runs", n)
	}
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"reconcile", "payments", "-h"}, envMap(e.env), nil, &out, &out); code != 0 || !strings.Contains(out.String(), "--dry-run") {
		t.Errorf("-h: exit %d\n%s", code, out.String())
	}
}

func TestServeAndWorkerReconcilePaymentsPeriodicallyOnTheRiverLeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, cfg Config, mln net.Listener) error
	}{
		{"serve", func(ctx context.Context, cfg Config, mln net.Listener) error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			return serve(ctx, cfg, slog.New(slog.DiscardHandler), ln, mln)
		}},
		{"worker", func(ctx context.Context, cfg Config, mln net.Listener) error {
			return runWorker(ctx, cfg, slog.New(slog.DiscardHandler), mln)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reconcilesPeriodically(t, tc.run)
		})
	}
}

// reconcilesPeriodically runs a process with PAYLOCK_RECONCILE_INTERVAL and
// waits for its first run (River's RunOnStart) to record the missing
// payment.
func reconcilesPeriodically(t *testing.T, run func(ctx context.Context, cfg Config, mln net.Listener) error) {
	e := setupStripeReconcile(t)
	now := time.Now()
	e.payment(t, "pi_seen", 1000, 1000, now.Add(-time.Hour))
	e.payment(t, "pi_missing", 4200, 0, now.Add(-2*time.Hour))
	e.env["PAYLOCK_RECONCILE_INTERVAL"] = "1h" // RunOnStart: once when the leader starts, then hourly
	cfg, _, err := loadConfig("paylock serve", nil, envMap(e.env))
	if err != nil {
		t.Fatal(err)
	}
	mln := testkit.Listen(t)
	testkit.Run(t, "the process", func(ctx context.Context) error { return run(ctx, cfg, mln) })
	url := "http://" + mln.Addr().String() + "/metrics"
	want := map[string]float64{
		`paylock_reconcile_payments_total{outcome="seen",source="stripe"}`:       2,
		`paylock_reconcile_payments_total{outcome="recorded",source="stripe"}`:   1,
		`paylock_reconcile_payments_total{outcome="mismatched",source="stripe"}`: 0,
		`paylock_reconcile_payments_total{outcome="error",source="stripe"}`:      0,
	}
	var got map[string]float64
	testkit.WaitFor(t, 30*time.Second, "the first run's series", func() bool {
		got = testkit.Scrape(t, url).Map()
		return got[`paylock_reconcile_payments_total{outcome="seen",source="stripe"}`] > 0
	})
	for series, n := range want {
		if got[series] != n {
			t.Errorf("%s = %v, want %v", series, got[series], n)
		}
	}
	if n, f := testkit.Count(t, e.st.Pool(), `SELECT count(*) FROM payments WHERE transaction_id = 'pi_missing'`),
		testkit.Count(t, e.st.Pool(), `SELECT count(*) FROM forward_messages WHERE transaction_id = 'pi_missing'`); n != 1 || f != 1 {
		t.Errorf("pi_missing: %d rows, %d forward jobs; want 1 and 1", n, f)
	}
}

func TestReconcileDisbursementsStaysTheDefaultSubcommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"reconcile", "-h"}, {"reconcile", "disbursements", "-h"}} {
		var out bytes.Buffer
		if code := Main(context.Background(), args, envMap(nil), nil, &out, &out); code != 0 ||
			!strings.Contains(out.String(), "pending_has_payout") || !strings.Contains(out.String(), "reconcile payments") {
			t.Errorf("%q: exit %d\n%s", args, code, out.String())
		}
	}
	var errb bytes.Buffer
	if code := Main(context.Background(), []string{"reconcile", "disbursements"}, envMap(nil), nil, io.Discard, &errb); code != 2 ||
		!strings.Contains(errb.String(), "PAYLOCK_PAYOUT_URL is required") {
		t.Errorf("reconcile disbursements without PAYLOCK_PAYOUT_URL: exit %d, %s", code, errb.String())
	}
}

// Without --source, reconcile payments takes the one source whose provider
// lists its events, and asks for a name when there are several or says
// which adapters can when there is none.
func TestReconcilePaymentsTakesTheOnlyReconcilableSource(t *testing.T) {
	t.Parallel()
	one := []handler.Source{{Name: "payments", Provider: "paylock"}, {Name: "shop", Provider: "stripe"}}
	if s, err := reconcilable(one, ""); err != nil || s.Name != "shop" {
		t.Fatalf("one stripe source: %q, %v; want shop", s.Name, err)
	}
	two := append(one, handler.Source{Name: "marketplace", Provider: "stripe"})
	if _, err := reconcilable(two, ""); err == nil || !strings.Contains(err.Error(), "shop, marketplace") || !strings.Contains(err.Error(), "--source") {
		t.Fatalf("two stripe sources: %v; want both named and --source asked for", err)
	}
	if _, err := reconcilable(one[:1], ""); err == nil || !strings.Contains(err.Error(), "only stripe sources can") {
		t.Fatalf("no stripe source: %v", err)
	}
}
