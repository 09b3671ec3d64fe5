package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// newForwardReceiver starts the team's service (testkit's receiver): it
// verifies each forward with forwardSecret and answers the scripted
// statuses first, 2xx after. It returns the receiver and its URL.
func newForwardReceiver(t *testing.T, answers ...int) (*testkit.Receiver, string) {
	t.Helper()
	rc := testkit.StartReceiver(t, testkit.ReceiverConfig{
		Verifier:    testkit.Verifier(t, signature.SchemeStandard, forwardSecret),
		Answers:     answers,
		OtherEvents: true, // disbursement status changes too
	})
	return rc, rc.URL
}

// received returns the event type of each forward rc got, in order, and
// how many did not verify.
func received(rc *testkit.Receiver) (types []string, bad int) {
	for _, a := range rc.Attempts() {
		var msg struct{ Type string }
		_ = json.Unmarshal(a.Body, &msg)
		types = append(types, msg.Type)
		if a.Err != nil {
			bad++
		}
	}
	return types, bad
}

// idCounts returns how many forwards rc got under each webhook-id.
func idCounts(rc *testkit.Receiver) map[string]int {
	n := map[string]int{}
	for _, a := range rc.Attempts() {
		n[a.Header.Get(signature.HeaderWebhookID)]++
	}
	return n
}

func forwardEnv(t *testing.T, url string) map[string]string {
	return map[string]string{
		"DATABASE_URL":                 testkit.Schema(t),
		"REDIS_URL":                    testkit.RedisURL(t),
		"PAYLOCK_LOCK_PREFIX":          testkit.Key(t, "") + ":",
		"PAYLOCK_ALLOW_UNSIGNED":       "true",
		"PAYLOCK_METRICS_ADDR":         "off",
		"PAYLOCK_ADMIN_ADDR":           "off",
		"PAYLOCK_WORKER_POLL":          "50ms",
		"PAYLOCK_LOG_LEVEL":            "error",
		"PAYLOCK_FORWARD_URL":          url,
		"PAYLOCK_FORWARD_SECRETS":      forwardSecret,
		"PAYLOCK_FORWARD_MAX_ATTEMPTS": "1",
	}
}

// runCLI runs paylock with args and env and returns its exit code and output.
func runCLI(env map[string]string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, envMap(env), nil, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestForwardWorkerDiscardsAndForwardRetryPutsItBack(t *testing.T) {
	t.Parallel()
	rc, url := newForwardReceiver(t, http.StatusInternalServerError)
	env := forwardEnv(t, url)
	cfg, _, err := loadConfig("paylock worker", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	paylocktest.Migrated(t, env["DATABASE_URL"])
	st := paylocktest.OpenStore(t, cfg.storeConfig()) // its forward jobs get PAYLOCK_FORWARD_MAX_ATTEMPTS
	mln := testkit.Listen(t)
	// No PAYLOCK_PAYOUT_URL: the worker works the forward queue alone.
	testkit.Run(t, "worker", func(ctx context.Context) error { return runWorker(ctx, cfg, slog.New(slog.DiscardHandler), mln) })
	metricsURL := "http://" + mln.Addr().String() + "/metrics"

	if _, err := st.Payments().RecordPaymentForwarded(ctx, store.Payment{Source: "acme", TransactionID: "tx-cli", Amount: 100, Currency: "EUR",
		Payload: []byte(`{"id":"tx-cli"}`)}, forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	var out string
	testkit.WaitFor(t, 15*time.Second, "the discarded forward in 'forward list --discarded'", func() bool {
		var code int
		code, out, _ = runCLI(env, "forward", "list", "--discarded")
		return code == 0 && strings.Contains(out, "acme/tx-cli")
	})
	for _, want := range []string{"discarded", "payment.recorded", "1/1", "answered 500"} {
		if !strings.Contains(out, want) {
			t.Errorf("forward list --discarded printed %q; want %q in it", out, want)
		}
	}
	if got := testkit.Scrape(t, metricsURL).Map()[`paylock_forward_total{outcome="discarded"}`]; got != 1 {
		t.Errorf("paylock_forward_total{outcome=discarded} = %v, want 1", got)
	}

	code, out, errOut := runCLI(env, "forward", "retry", "--discarded")
	if code != 0 || !strings.Contains(out, "put 1 ") {
		t.Fatalf("forward retry --discarded: exit %d, %q %q", code, out, errOut)
	}
	testkit.WaitFor(t, 15*time.Second, "the retried forward's delivery", func() bool {
		types, _ := received(rc)
		return len(types) == 2
	})
	testkit.WaitFor(t, 15*time.Second, "the completed job", func() bool {
		_, out, _ = runCLI(env, "forward", "list")
		return strings.Contains(out, "completed")
	})
	if types, bad := received(rc); bad != 0 || types[0] != "payment.recorded" {
		t.Errorf("deliveries %v, %d unverified", types, bad)
	}
	testkit.WaitFor(t, 15*time.Second, "the delivered count", func() bool {
		return testkit.Scrape(t, metricsURL).Map()[`paylock_forward_total{outcome="delivered"}`] == 1
	})
	if code, out, _ := runCLI(env, "forward", "list", "--discarded"); code != 0 || !strings.Contains(out, "no discarded") {
		t.Errorf("after the retry, forward list --discarded: exit %d, %q", code, out)
	}
	if code, _, errOut := runCLI(env, "forward", "retry", "987654"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("retry of an unknown id: exit %d, %q; want 1 and not found", code, errOut)
	}
}

func TestServeForwardsDisbursementStatusChanges(t *testing.T) {
	t.Parallel()
	rc, url := newForwardReceiver(t)
	env := forwardEnv(t, url)
	env["PAYLOCK_FORWARD_MAX_ATTEMPTS"] = "5"
	cfg, _, err := loadConfig("paylock serve", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	ctx := context.Background()
	d, err := st.Disbursements().AcceptDisbursement(ctx, store.Disbursement{LoanID: "L-sf", Tranche: 1, Amount: 1000, Currency: "JPY", EventID: "evt_sf"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Disbursements().MarkSent(ctx, d.ID, "po_sf", store.StatusSent); err != nil { // this store has no hook: nothing forwarded
		t.Fatal(err)
	}
	ln := testkit.Listen(t)
	// Without PAYLOCK_WORKER: serve runs the forward queue, not the payouts.
	running := testkit.Run(t, "serve", func(ctx context.Context) error { return serve(ctx, cfg, slog.New(slog.DiscardHandler), ln, nil) })
	base := "http://" + ln.Addr().String()
	testkit.WaitReady(t, base+"/healthz", 10*time.Second, running)

	body := `{"event_id":"pevt_sf","payout_id":"po_sf","status":"paid"}`
	res, err := http.Post(base+"/webhooks/payouts", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("payout status webhook: %d", res.StatusCode)
	}
	// And a payment forward inserted by another replica's store.
	if _, err := st.Payments().RecordPaymentForwarded(ctx, store.Payment{TransactionID: "tx-sf", Amount: 5, Currency: "EUR", Payload: []byte(`{}`)}, forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "two forwards", func() bool {
		types, _ := received(rc)
		return len(types) == 2
	})
	types, bad := received(rc)
	if bad != 0 || !strings.Contains(strings.Join(types, " "), "disbursement.paid") || !strings.Contains(strings.Join(types, " "), "payment.recorded") {
		t.Fatalf("forwards %v (%d unverified); want disbursement.paid and payment.recorded", types, bad)
	}
}

func TestForwardCommandRefusesBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"forward"},
		{"forward", "resend"},
		{"forward", "retry"},
		{"forward", "retry", "abc"},
		{"forward", "retry", "0"},
		{"forward", "retry", "7", "--discarded"},
		{"forward", "list", "--limit", "0"},
		{"forward", "list", "--limit"},
		{"forward", "list", "--no-such-flag"},
	} {
		code, _, errOut := runCLI(nil, args...)
		if code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, %q; want 2 and a message", args, code, errOut)
		}
	}
	if code, out, _ := runCLI(nil, "forward", "--help"); code != 0 || !strings.Contains(out, "paylock forward list") {
		t.Errorf("forward --help: exit %d, %q", code, out)
	}
}

func TestParseForwardArgsKeepsServeFlags(t *testing.T) {
	t.Parallel()
	fa, err := parseForwardArgs("list", []string{"--discarded", "--limit=5", "--database-url", "postgres://x/y"})
	if err != nil || !fa.discarded || fa.limit != 5 || strings.Join(fa.rest, " ") != "--database-url postgres://x/y" {
		t.Fatalf("%+v, %v", fa, err)
	}
	fa, err = parseForwardArgs("retry", []string{"42"})
	if err != nil || fa.id != 42 || fa.discarded {
		t.Fatalf("%+v, %v", fa, err)
	}
}

func TestServeForwardsEachRecordedPaymentOnceAndNothingForDuplicatesOrRefusals(t *testing.T) {
	t.Parallel()
	rc, url := newForwardReceiver(t, http.StatusInternalServerError) // the first attempt fails
	env := forwardEnv(t, url)
	env["PAYLOCK_FORWARD_MAX_ATTEMPTS"] = "5"
	base := startServe(t, env, serveOptions{}).base
	ctx := context.Background()
	pay := func(body string) int {
		t.Helper()
		res, err := http.Post(base+"/webhooks/payments", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for range 3 { // the PSP delivers three times
		if code := pay(`{"transaction_id":"tx-fwd","amount":700,"currency":"JPY"}`); code != 200 {
			t.Fatalf("payment: %d", code)
		}
	}
	if code := pay(`{"transaction_id":"tx-fwd-bad","amount":-1,"currency":"JPY"}`); code != 422 {
		t.Fatalf("a refused payment: %d, want 422", code)
	}
	testkit.WaitFor(t, 15*time.Second, "the forward", func() bool {
		types, _ := received(rc)
		return len(types) == 2 // the failed attempt and the delivered one
	})
	time.Sleep(300 * time.Millisecond) // room for a forward that should not exist
	types, bad := received(rc)
	if len(types) != 2 || bad != 0 || types[0] != "payment.recorded" || types[1] != "payment.recorded" {
		t.Fatalf("receiver got %v (%d unverified); want one payment.recorded, sent twice (500, then 200)", types, bad)
	}
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	jobs, err := st.Outbox().ForwardJobs(ctx, store.ForwardJobFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Args.TransactionID != "tx-fwd" || jobs[0].Args.ID != store.PaymentForwardID("payments", "tx-fwd") {
		t.Fatalf("forward jobs %+v; want one, for tx-fwd", jobs)
	}
}

func TestForwardDestinationsAreNamedAfterTheirSource(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "PAYLOCK_LOAN_SECRETS": loansSecret,
		"STRIPE_WEBHOOK_SECRETS": stripeSecret, "ADYEN_HMAC_KEYS": adyenKey, "ACME_WEBHOOK_SECRETS": acmeSecret,
		"PAYLOCK_FORWARD_URL": "https://all.internal/paylock", "PAYLOCK_FORWARD_SECRETS": forwardSecret,
	}
	specs, _, _, err := sourcesSetup(t, exampleSources, env)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := loadConfig("paylock serve", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	r, err := routeForwards(cfg, specs, false)
	if err != nil {
		t.Fatal(err)
	}
	wantDests := forward.Destinations{"default": "https://all.internal/paylock", "stripe": "https://orders.internal/paylock"}
	wantBySource := map[string]string{"payments": "default", "stripe": "stripe", "adyen": "default", "acme": "default"}
	if !maps.Equal(r.Destinations, wantDests) || !maps.Equal(r.BySource, wantBySource) {
		t.Fatalf("routes %v %v; want %v %v (loans forwards nothing)", r.Destinations, r.BySource, wantDests, wantBySource)
	}

	clash := "sources:\n  default: {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS, forward_url: https://other.internal/x}\n"
	if specs, _, _, err = sourcesSetup(t, clash, env); err != nil {
		t.Fatal(err)
	}
	if _, err := routeForwards(cfg, specs, false); err == nil || !strings.Contains(err.Error(), `"default"`) || !strings.Contains(err.Error(), "forward_url") {
		t.Errorf("a source named default with its own forward_url: %v; want an error naming it and forward_url", err)
	}
	same := strings.Replace(clash, "https://other.internal/x", "https://all.internal/paylock", 1)
	if specs, _, _, err = sourcesSetup(t, same, env); err != nil {
		t.Fatal(err)
	}
	if _, err := routeForwards(cfg, specs, false); err != nil {
		t.Errorf("a source named default forwarding to PAYLOCK_FORWARD_URL itself: %v", err)
	}
}

// paylock worker reads the sources file for the sources' own destinations
// (without their webhook secrets, which it does not need), and each
// payment goes to its source's.
func TestWorkerForwardsEachSourceToItsOwnDestination(t *testing.T) {
	t.Parallel()
	all, allURL := newForwardReceiver(t)
	acme, acmeURL := newForwardReceiver(t)
	env := forwardEnv(t, allURL)
	delete(env, "PAYLOCK_ALLOW_UNSIGNED") // and no PAYLOCK_WEBHOOK_SECRETS, no ACME_WEBHOOK_SECRETS
	path := filepath.Join(t.TempDir(), "sources.yaml")
	file := "sources:\n  acme: {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS, forward_url: " + acmeURL + "/acme}\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env["PAYLOCK_SOURCES_FILE"] = path
	cfg, _, err := loadConfig("paylock worker", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	mln := testkit.Listen(t)
	testkit.Run(t, "worker", func(ctx context.Context) error { return runWorker(ctx, cfg, slog.New(slog.DiscardHandler), mln) })
	for _, p := range []struct{ source, dest string }{{"acme", "acme"}, {"payments", forward.DefaultDestination}} {
		if _, err := st.Payments().RecordPaymentForwarded(ctx, store.Payment{Source: p.source, TransactionID: "tx-" + p.source,
			Amount: 100, Currency: "EUR", Payload: []byte(`{}`)}, p.dest); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 15*time.Second, "both forwards", func() bool {
		a, _ := received(acme)
		b, _ := received(all)
		return len(a) == 1 && len(b) == 1
	})
	if n := idCounts(acme)[store.PaymentForwardID("acme", "tx-acme")]; n != 1 {
		t.Errorf("acme's receiver got acme's payment %d times, want 1", n)
	}
	// The attempt is counted once the receiver's answer is in.
	testkit.WaitFor(t, 15*time.Second, `paylock_forward_destination_total{destination="acme",outcome="delivered"} = 1`, func() bool {
		return testkit.Scrape(t, "http://"+mln.Addr().String()+"/metrics").Map()[`paylock_forward_destination_total{destination="acme",outcome="delivered"}`] == 1
	})
	if code, out, _ := runCLI(env, "forward", "list"); code != 0 || !strings.Contains(out, "DESTINATION") || !strings.Contains(out, " acme ") {
		t.Errorf("forward list: exit %d, %q; want the acme destination named", code, out)
	}
}

func TestNoForwardOutputPrintsADestinationsCredentials(t *testing.T) {
	t.Parallel()
	const secretURL = "https://paylock:s3cret-pass@orders.internal/hook?token=s3cret-token"
	env := forwardEnv(t, secretURL)
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	ctx := context.Background()
	p, err := st.Payments().RecordPayment(ctx, store.Payment{Source: "acme", TransactionID: "tx-old", Amount: 1, Currency: "EUR", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	// A job from before destinations were named: its URL is in its args.
	if _, err := st.JobClient().Insert(ctx, store.ForwardArgs{ID: store.PaymentForwardID(p.Source, p.TransactionID),
		Type: store.ForwardPaymentRecorded, URL: secretURL, Source: p.Source, TransactionID: p.TransactionID}, nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cfg, _, err := loadConfig("paylock serve", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	slog.New(slog.NewJSONHandler(&out, nil)).Info("config", slog.Any("config", cfg))
	_, list, _ := runCLI(env, "forward", "list")
	out.WriteString(list)
	bad := forwardEnv(t, secretURL)
	bad["PAYLOCK_FORWARD_SECRETS"] = ""
	_, _, errOut := runCLI(bad, "serve")
	out.WriteString(errOut)
	if strings.Contains(out.String(), "s3cret") {
		t.Errorf("a destination's credentials are printed:\n%s", out.String())
	}
	for _, want := range []string{"https://orders.internal/hook", "orders.internal", "PAYLOCK_FORWARD_SECRETS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
