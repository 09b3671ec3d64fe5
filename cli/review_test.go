package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/store"
)

func (e *reconcileEnv) review(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"USER": "carol"}
	for k, v := range e.env {
		env[k] = v
	}
	code = Main(context.Background(), append([]string{"review"}, args...), envMap(env), nil, &out, &errb)
	return code, out.String(), errb.String()
}

func (e *reconcileEnv) flagged(t *testing.T, loan string) (store.Disbursement, string) {
	t.Helper()
	d := e.disbursement(t, loan, "review_reason = 'lookup refused'")
	return d, "disbursement-" + strconv.FormatInt(d.ID, 10)
}

func (e *reconcileEnv) resolution(t *testing.T, id string) string {
	t.Helper()
	var who, action, note string
	err := e.st.Pool().QueryRow(context.Background(),
		`SELECT who, action, note FROM review_resolutions WHERE item_id = $1 ORDER BY id DESC LIMIT 1`, id).Scan(&who, &action, &note)
	if err != nil {
		return ""
	}
	return who + " " + action + " " + note
}

func TestReviewCLIResolvesEachKindAndRecordsWhoAndWhy(t *testing.T) {
	t.Parallel()
	e := setupReconcile(t, store.IdempotencyKey("L-refused", 1))
	ctx := context.Background()
	if _, err := e.st.Payments().RecordPaymentForwarded(ctx, store.Payment{TransactionID: "tx-1", Amount: 100, Currency: "EUR", Payload: []byte(`{}`)}, forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Payments().RecordMismatch(ctx, store.Mismatch{TransactionID: "tx-1", Amount: 200, Currency: "EUR", RequestID: "r1", Body: []byte(`{"amount":200}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Pool().Exec(ctx, `UPDATE river_job SET state = 'discarded', finalized_at = now(), attempt = max_attempts WHERE kind = 'forward'`); err != nil {
		t.Fatal(err)
	}
	var fwdJob int64
	if err := e.st.Pool().QueryRow(ctx, `SELECT id FROM river_job WHERE kind = 'forward'`).Scan(&fwdJob); err != nil {
		t.Fatal(err)
	}
	fwdID := "forward-" + strconv.FormatInt(fwdJob, 10)
	dAdopt, adoptID := e.flagged(t, "L-adopt")
	if _, err := e.client.Create(ctx, dAdopt.IdempotencyKey, payout.Request{Amount: 1000, Currency: "JPY", Reference: dAdopt.Reference()}); err != nil {
		t.Fatal(err)
	}
	_, failID := e.flagged(t, "L-fail")
	_, refusedID := e.flagged(t, "L-refused")
	mmItems, _ := e.st.Review().ReviewItems(ctx, store.ReviewFilter{Kind: store.ReviewMismatch})
	if len(mmItems) != 1 {
		t.Fatalf("mismatches %+v", mmItems)
	}
	mmID := mmItems[0].ID

	code, out, errOut := e.review(t, "list")
	if code != 0 || strings.Count(out, "\n") != 6 || !strings.Contains(out, mmID) || !strings.Contains(out, fwdID) {
		t.Fatalf("list: %d\n%s%s", code, out, errOut)
	}
	// Each item names its subject: the discarded forward and the mismatch
	// their payment, a disbursement its loan and tranche.
	for id, subject := range map[string]string{fwdID: store.DefaultSource + "/tx-1@v1 payment.recorded",
		mmID: store.DefaultSource + "/tx-1@v1", adoptID: "loan:L-adopt/1"} {
		if line := grepLines(out, id+" "); !strings.Contains(line, subject) {
			t.Errorf("list: the line of %s does not name %q: %s", id, subject, line)
		}
	}
	if code, out, errOut := e.review(t, "show", fwdID); code != 0 || !strings.Contains(out, `"transaction_id": "tx-1"`) ||
		!strings.Contains(out, `"source": "`+store.DefaultSource+`"`) || !strings.Contains(out, `"version": 1`) {
		t.Errorf("show %s: %d\n%s%s", fwdID, code, out, errOut)
	}
	if code, out, _ := e.review(t, "list", "--kind", "disbursement"); code != 0 || strings.Count(out, "\n") != 4 {
		t.Errorf("list --kind disbursement: %d\n%s", code, out)
	}
	if code, out, _ := e.review(t, "show", mmID); code != 0 || !strings.Contains(out, `"stored_amount": 100`) {
		t.Errorf("show: %d %s", code, out)
	}

	for _, c := range []struct {
		name string
		args []string
		code int
		who  string // the recorded resolution, "" when none
	}{
		{"no note", []string{"resolve", mmID, "--action", "acknowledge"}, 2, ""},
		{"no id", []string{"resolve", "--action", "acknowledge", "--note", "x"}, 2, ""},
		{"bad id", []string{"show", "payment-1"}, 2, ""},
		{"bad kind", []string{"list", "--kind", "payment"}, 2, ""},
		{"bad action", []string{"resolve", mmID, "--action", "adopt", "--note", "x"}, 2, ""},
		{"unknown item", []string{"resolve", "mismatch-9999", "--action", "acknowledge", "--note", "x"}, 1, ""},
		{"fail though the provider holds the payout", []string{"resolve", adoptID, "--action", "fail", "--note", "x"}, 1, ""},
		{"adopt though the provider holds none", []string{"resolve", failID, "--action", "adopt", "--note", "x"}, 1, ""},
		{"adopt with the lookup refused", []string{"resolve", refusedID, "--action", "adopt", "--note", "x"}, 1, ""},
		{"fail with the lookup refused", []string{"resolve", refusedID, "--action", "fail", "--note", "x"}, 1, ""},
		{"acknowledge a mismatch as $USER", []string{"resolve", mmID, "--action", "acknowledge", "--note", "PSP bug"}, 0, "carol acknowledge PSP bug"},
		{"adopt", []string{"resolve", adoptID, "--action", "adopt", "--note", "found it", "--as", "dave"}, 0, "dave adopt found it"},
		{"fail", []string{"resolve", failID, "--action", "fail", "--note", "never paid", "--as", "dave"}, 0, "dave fail never paid"},
		{"retry the refused one", []string{"resolve", refusedID, "--action", "retry", "--note", "keys rotated", "--as", "erin"}, 0, "erin retry keys rotated"},
		{"retry a forward", []string{"resolve", fwdID, "--action", "retry", "--note", "receiver back", "--as", "erin"}, 0, "erin retry receiver back"},
	} {
		code, out, errOut := e.review(t, c.args...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d\n%s%s", c.name, code, c.code, out, errOut)
		}
		if code != 0 && errOut == "" {
			t.Errorf("%s: no reason on stderr", c.name)
		}
		if c.who != "" && e.resolution(t, c.args[1]) != c.who {
			t.Errorf("%s: recorded %q, want %q", c.name, e.resolution(t, c.args[1]), c.who)
		}
	}
	if d, _ := e.st.Disbursements().Disbursement(ctx, "L-adopt", 1); d.Status != store.StatusSent || d.ProviderRef == "" {
		t.Errorf("adopted %+v", d)
	}
	if d, _ := e.st.Disbursements().Disbursement(ctx, "L-fail", 1); d.Status != store.StatusFailed {
		t.Errorf("failed %+v", d)
	}
	if code, out, _ := e.review(t, "list"); code != 0 || !strings.Contains(out, "empty") {
		t.Errorf("list after: %d\n%s", code, out)
	}
	if code, out, _ := e.review(t, "list", "--all"); code != 0 || !strings.Contains(out, "acknowledge by carol") {
		t.Errorf("list --all: %d\n%s", code, out)
	}
}

func TestReviewAdminTokensAreNamedAndNeverPrinted(t *testing.T) {
	t.Parallel()
	const secret = "short"
	for _, c := range []struct {
		value string
		ok    bool
	}{
		{"alice:alice-token-0123456789,bob:bob-token-0123456789x", true},
		{"alice:" + secret, false},
		{"alice", false},
		{":no-name-token-0123456789", false},
		{"alice:alice-token-0123456789,alice:other-token-0123456789", false},
		{"alice:same-token-0123456789,bob:same-token-0123456789", false},
	} {
		cfg, _, err := loadConfig("paylock serve", nil, envMap(map[string]string{"PAYLOCK_ADMIN_TOKENS": c.value}))
		if (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok=%v", c.value, err, c.ok)
		}
		if err != nil && (strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "token-0123")) {
			t.Errorf("%q: the error prints a token: %v", c.value, err)
		}
		if c.ok && (len(cfg.Admin.Tokens) != 2 || cfg.Admin.Tokens[1].Name != "bob") {
			t.Errorf("%q: %+v", c.value, cfg.Admin.Tokens)
		}
	}
	_, _, err := loadConfig("paylock serve", nil, envMap(map[string]string{
		"PAYLOCK_ADMIN_ADDR": ":9091", "PAYLOCK_ADMIN_TOKENS": "alice:alice-token-0123456789"}))
	if err != nil {
		t.Errorf("an admin address off loopback with named tokens only: %v", err)
	}
	_, _, err = loadConfig("paylock serve", nil, envMap(map[string]string{
		"PAYLOCK_ADMIN_TOKEN": "admin-token-0123456789", "PAYLOCK_ADMIN_TOKENS": "admin:other-token-0123456789"}))
	if err == nil {
		t.Error(`a named token called "admin" beside PAYLOCK_ADMIN_TOKEN was accepted`)
	}
}

// TestServeServesTheReviewQueueToNamedAdminTokens runs serve with
// PAYLOCK_ADMIN_TOKENS: a mismatching delivery is answered 422, shows in
// the review queue and its metrics, and is acknowledged through the admin
// API under the token's name.
func TestServeServesTheReviewQueueToNamedAdminTokens(t *testing.T) {
	const alice = "alice-token-of-the-review-test"
	dsn := testkit.Schema(t)
	env := map[string]string{
		"DATABASE_URL":           dsn,
		"REDIS_URL":              testkit.RedisURL(t),
		"PAYLOCK_LOCK_PREFIX":    testkit.Key(t, "") + ":",
		"PAYLOCK_ALLOW_UNSIGNED": "true",
		"PAYLOCK_ADMIN_TOKENS":   "alice:" + alice,
	}
	srv := startServe(t, env, serveOptions{metrics: true, admin: true})
	admin, base := srv.admin, srv.base
	deliver := func(amount int) int {
		res, err := http.Post(base+"/webhooks/payments", "application/json",
			strings.NewReader(`{"transaction_id":"tx-serve-mm","amount":`+strconv.Itoa(amount)+`,"currency":"EUR"}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if s := deliver(100); s != 200 {
		t.Fatalf("first delivery: %d", s)
	}
	for range 3 {
		if s := deliver(150); s != http.StatusUnprocessableEntity {
			t.Fatalf("mismatch: %d, want 422", s)
		}
	}
	get := func(url string, header map[string]string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	bearer := map[string]string{"Authorization": "Bearer " + alice}
	if code, _ := get(admin+"/admin/review", nil); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d", code)
	}
	code, body := get(admin+"/admin/review", bearer)
	var list struct{ Items []store.ReviewItem }
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Items) != 1 {
		t.Fatalf("GET /admin/review: %d %s", code, body)
	}
	if _, m := get(srv.metrics+"/metrics", nil); !strings.Contains(m, `paylock_review_queue_items{kind="mismatch"} 1`) ||
		!strings.Contains(m, "paylock_review_queue_oldest_seconds") {
		t.Errorf("metrics without the review queue:\n%s", grepLines(m, "paylock_review"))
	}
	req, _ := http.NewRequest(http.MethodPost, admin+"/admin/review/"+list.Items[0].ID+"/resolve",
		strings.NewReader(`{"action":"acknowledge","note":"PSP sent a partial capture"}`))
	req.Header.Set("Authorization", "Bearer "+alice)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var it store.ReviewItem
	if err := json.Unmarshal(b, &it); res.StatusCode != 200 || err != nil || it.Resolution == nil || it.Resolution.Who != "alice" {
		t.Fatalf("resolve: %d %s", res.StatusCode, b)
	}
	if _, m := get(srv.metrics+"/metrics", nil); !strings.Contains(m, `paylock_review_queue_items{kind="mismatch"} 0`) {
		t.Errorf("metrics after the resolution:\n%s", grepLines(m, "paylock_review"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
