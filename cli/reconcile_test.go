package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/store"
)

// reconcileEnv is a migrated schema and an in-process fake provider over
// HTTP that refuses lookups of the keys in refuse (403).
type reconcileEnv struct {
	env    map[string]string
	st     *store.Store
	fake   *fakeprovider.Provider
	client *payout.Client
}

func setupReconcile(t *testing.T, refuse ...string) *reconcileEnv {
	t.Helper()
	fake := fakeprovider.New(fakeprovider.Config{})
	t.Cleanup(fake.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, key := range refuse {
			if r.Method == http.MethodGet && r.URL.Query().Get("idempotency_key") == key {
				http.Error(w, `{"error":"not allowed"}`, http.StatusForbidden)
				return
			}
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	dsn, st := paylocktest.MigratedSchema(t)
	env := map[string]string{
		"DATABASE_URL":       dsn,
		"PAYLOCK_PAYOUT_URL": srv.URL,
		"PAYLOCK_LOG_LEVEL":  "error",
	}
	return &reconcileEnv{env: env, st: st, fake: fake, client: payout.NewClient(srv.URL, nil)}
}

// disbursement records loan's tranche 1 and applies the SQL set clause to it.
func (e *reconcileEnv) disbursement(t *testing.T, loan, set string) store.Disbursement {
	t.Helper()
	ctx := context.Background()
	if _, err := e.st.Disbursements().AcceptDisbursement(ctx, store.Disbursement{LoanID: loan, Tranche: 1, Amount: 1000, Currency: "JPY", EventID: "evt_" + loan}); err != nil {
		t.Fatal(err)
	}
	if set != "" {
		if _, err := e.st.Pool().Exec(ctx, "UPDATE disbursements SET "+set+" WHERE loan_id = $1", loan); err != nil {
			t.Fatalf("%s: %v", set, err)
		}
	}
	d, err := e.st.Disbursements().Disbursement(ctx, loan, 1)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// payout makes the provider create the payout of loan's tranche 1, and
// settle it when statuses are given.
func (e *reconcileEnv) payout(t *testing.T, loan string, statuses ...string) string {
	t.Helper()
	p, err := e.client.Create(context.Background(), store.IdempotencyKey(loan, 1),
		payout.Request{Amount: 1000, Currency: "JPY", Reference: loan + "-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(statuses) > 0 {
		if _, err := e.fake.Settle(p.ID, "", statuses...); err != nil {
			t.Fatal(err)
		}
	}
	return p.ID
}

func (e *reconcileEnv) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), append([]string{"reconcile"}, args...), envMap(e.env), nil, &out, &errb)
	return code, out.String(), errb.String()
}

func TestReconcileReportsEachKindOfDifferenceAndExits1(t *testing.T) {
	t.Parallel()
	e := setupReconcile(t, store.IdempotencyKey("L-refused", 1))

	// In agreement: nothing to report.
	e.disbursement(t, "L-ok-pending", "")
	e.disbursement(t, "L-ok-sent", fmt.Sprintf("status = 'sent', provider_ref = '%s'", e.payout(t, "L-ok-sent")))
	e.payout(t, "L-fresh-pending") // the worker saved nothing yet, but touched the row just now
	e.disbursement(t, "L-fresh-pending", "")
	e.disbursement(t, "L-fresh-paid", fmt.Sprintf("status = 'sent', provider_ref = '%s'", e.payout(t, "L-fresh-paid", "paid")))
	e.disbursement(t, "L-done", fmt.Sprintf("status = 'paid', provider_ref = '%s'", "po_gone")) // settled rows are not compared
	e.disbursement(t, "L-review-none", "review_reason = 'lookup found nothing'")

	// Differences, one of each kind.
	e.payout(t, "L-pending-payout")
	e.disbursement(t, "L-pending-payout", "updated_at = now() - interval '2 hours', status_since = now() - interval '3 hours'")
	e.payout(t, "L-review-payout")
	e.disbursement(t, "L-review-payout", "review_reason = 'lookup found nothing'")
	e.disbursement(t, "L-sent-missing", "status = 'sent', provider_ref = 'po_ghost'")
	e.payout(t, "L-sent-other")
	e.disbursement(t, "L-sent-other", "status = 'sent', provider_ref = 'po_wrong'")
	e.disbursement(t, "L-settled", fmt.Sprintf("status = 'sent', provider_ref = '%s', status_since = now() - interval '2 hours'",
		e.payout(t, "L-settled", "failed")))
	e.disbursement(t, "L-refused", "")
	// Failed after a lost answer and a refused retry: the provider paid.
	e.payout(t, "L-failed-paid")
	e.disbursement(t, "L-failed-paid", "status = 'failed', attempts = 2, last_error = '403'")
	// Failed rows that agree, or are not looked up.
	e.disbursement(t, "L-failed-none", "status = 'failed', attempts = 2, last_error = '403'")
	e.payout(t, "L-failed-once")
	e.disbursement(t, "L-failed-once", "status = 'failed', attempts = 1, last_error = '400'")

	code, out, errOut := e.run(t, "--grace", "1h")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	t.Logf("paylock reconcile --grace 1h:\n%s%s", out, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "DIFFERENCE") {
		t.Fatalf("no table header:\n%s", out)
	}
	want := map[string]string{
		"L-pending-payout": reconcile.PendingHasPayout,
		"L-review-payout":  reconcile.PendingHasPayout,
		"L-sent-missing":   reconcile.SentMissing,
		"L-sent-other":     reconcile.SentOtherPayout,
		"L-settled":        reconcile.SettledUnrecorded,
		"L-refused":        reconcile.LookupRefused,
		"L-failed-paid":    reconcile.FailedHasPayout,
	}
	got := map[string]string{}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		got[f[1]] = f[0]
	}
	for loan, kind := range want {
		if got[loan] != kind {
			t.Errorf("%s: reported as %q, want %s", loan, got[loan], kind)
		}
	}
	if len(lines)-1 != len(want) {
		t.Errorf("%d differences, want %d:\n%s", len(lines)-1, len(want), out)
	}
	if !strings.Contains(errOut, "7 differences") || !strings.Contains(errOut, "2 retried failures") {
		t.Errorf("stderr %q does not sum up the differences", errOut)
	}

	// With a grace of a day, lagging rows are not differences yet; the
	// others are.
	code, out, _ = e.run(t, "--grace=1d")
	if code != 1 || strings.Contains(out, "L-pending-payout") || strings.Contains(out, "L-settled") ||
		!strings.Contains(out, "L-review-payout") || !strings.Contains(out, "L-sent-missing") {
		t.Errorf("--grace=1d: exit %d\n%s", code, out)
	}
}

func TestReconcileExits0WhenEverythingAgrees(t *testing.T) {
	t.Parallel()
	e := setupReconcile(t)
	e.disbursement(t, "L-pending", "")
	e.disbursement(t, "L-sent", fmt.Sprintf("status = 'sent', provider_ref = '%s', status_since = now() - interval '2 hours'",
		e.payout(t, "L-sent")))
	e.disbursement(t, "L-paid", fmt.Sprintf("status = 'paid', provider_ref = '%s'", e.payout(t, "L-paid", "paid")))
	code, out, errOut := e.run(t)
	if code != 0 || !strings.Contains(out, "1 pending and 1 sent disbursements agree") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

func TestReconcileUsageAndConfigErrorsExit2WithOneLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, "PAYLOCK_PAYOUT_URL"},
		{map[string]string{"PAYLOCK_PAYOUT_URL": "ftp://x"}, nil, "PAYLOCK_PAYOUT_URL"},
		{map[string]string{"PAYLOCK_PAYOUT_URL": "http://127.0.0.1:1"}, []string{"--grace", "soon"}, "--grace"},
		{map[string]string{"PAYLOCK_PAYOUT_URL": "http://127.0.0.1:1"}, []string{"--grace"}, "--grace"},
		{map[string]string{"PAYLOCK_PAYOUT_URL": "http://127.0.0.1:1"}, []string{"everything"}, "everything"},
	} {
		var stderr bytes.Buffer
		code := Main(context.Background(), append([]string{"reconcile"}, c.args...), envMap(c.env), nil, io.Discard, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 2 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%v %v: exit %d, %q; want 2 and one line naming %s", c.env, c.args, code, msg, c.want)
		}
	}
}
