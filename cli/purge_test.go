package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// seedRetention returns the environment of a migrated schema holding a
// payment, a disbursement and its loan event, all received 100 days ago, a
// payout event 10 days old and a loan event of today.
func seedRetention(t *testing.T) (map[string]string, *store.Store) {
	t.Helper()
	dsn, st := paylocktest.MigratedSchema(t)
	env := map[string]string{"DATABASE_URL": dsn, "PAYLOCK_LOG_LEVEL": "error"}
	ctx := context.Background()
	if _, err := st.Payments().RecordPayment(ctx, store.Payment{TransactionID: "tx-old", Amount: 1, Currency: "JPY",
		Payload: []byte(`{"transaction_id":"tx-old","amount":1,"currency":"JPY"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Disbursements().AcceptDisbursement(ctx, store.Disbursement{LoanID: "L-old", Tranche: 1, Amount: 1, Currency: "JPY", EventID: "evt_old"}); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`UPDATE payments SET received_at = now() - interval '100 days'`,
		`UPDATE disbursements SET created_at = now() - interval '100 days', status_since = now() - interval '100 days'`,
		`UPDATE webhook_events SET received_at = now() - interval '100 days'`,
		`INSERT INTO webhook_events (source, event_id, subject, received_at) VALUES
			('payouts', 'evt_po_10d', 'po_1', now() - interval '10 days'),
			('loans', 'evt_today', 'L-new-1', now())`,
	} {
		if _, err := st.Pool().Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	return env, st
}

func TestPurgeCommandDeletesOnlyEventsPastTheWindow(t *testing.T) {
	t.Parallel()
	env, st := seedRetention(t)
	var out, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"purge", "--older-than", "90d"}, envMap(env), nil, &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.HasPrefix(out.String(), "deleted 1 webhook events received before ") || !strings.Contains(out.String(), "(older than 90d)") {
		t.Errorf("printed %q", out.String())
	}
	if n := testkit.Count(t, st.Pool(), "SELECT count(*) FROM webhook_events"); n != 2 {
		t.Errorf("%d events left, want the 2 inside 90 days", n)
	}

	// A week's window takes the 10-day-old event too; payments and
	// disbursements stay whatever their age.
	out.Reset()
	if code := Main(context.Background(), []string{"purge", "--older-than=7d"}, envMap(env), nil, &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.HasPrefix(out.String(), "deleted 1 ") {
		t.Errorf("printed %q", out.String())
	}
	events := testkit.Count(t, st.Pool(), "SELECT count(*) FROM webhook_events")
	payments := testkit.Count(t, st.Pool(), "SELECT count(*) FROM payments")
	disbursements := testkit.Count(t, st.Pool(), "SELECT count(*) FROM disbursements")
	if events != 1 || payments != 1 || disbursements != 1 {
		t.Errorf("left: %d events, %d payments, %d disbursements; want 1 each", events, payments, disbursements)
	}
}

func TestPurgeCommandTakesPaylockEventRetentionAsItsDefault(t *testing.T) {
	t.Parallel()
	env, st := seedRetention(t)
	env["PAYLOCK_EVENT_RETENTION"] = "2160h"
	var out, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"purge"}, envMap(env), nil, &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if n := testkit.Count(t, st.Pool(), "SELECT count(*) FROM webhook_events"); !strings.Contains(out.String(), "(older than 90d)") || n != 2 {
		t.Errorf("printed %q, %d events left", out.String(), n)
	}
}

func TestPurgeRefusesAWindowUnderSevenDaysWithOneLine(t *testing.T) {
	t.Parallel()
	env, st := seedRetention(t)
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--older-than", "6d"}, nil, "at least 7d"},
		{[]string{"--older-than=167h"}, nil, "at least 7d"},
		{[]string{"-older-than", "1h"}, nil, "at least 7d"},
		{[]string{"--older-than", "0"}, nil, "at least 7d"},
		{[]string{"--older-than", "-90d"}, nil, "--older-than"},
		{[]string{"--older-than", "soon"}, nil, "--older-than"},
		{[]string{"--older-than"}, nil, "--older-than"},
		{nil, nil, "--older-than is required"},
		{[]string{"90d"}, nil, "unexpected argument"},
		{nil, map[string]string{"PAYLOCK_EVENT_RETENTION": "3d"}, "PAYLOCK_EVENT_RETENTION"},
	} {
		e := map[string]string{}
		for k, v := range env {
			e[k] = v
		}
		for k, v := range c.env {
			e[k] = v
		}
		var stderr bytes.Buffer
		code := Main(context.Background(), append([]string{"purge"}, c.args...), envMap(e), nil, io.Discard, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 2 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("purge %v %v: exit %d, %q; want 2 and one line with %q", c.args, c.env, code, msg, c.want)
		}
	}
	if n := testkit.Count(t, st.Pool(), "SELECT count(*) FROM webhook_events"); n != 3 {
		t.Errorf("a refused purge deleted events: %d left of 3", n)
	}
}

func TestServeRefusesAnEventRetentionUnderSevenDays(t *testing.T) {
	for _, v := range []string{"6d", "1h", "forever"} {
		var stderr bytes.Buffer
		code := Main(context.Background(), []string{"serve"}, envMap(map[string]string{"PAYLOCK_EVENT_RETENTION": v}), nil, io.Discard, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 2 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "PAYLOCK_EVENT_RETENTION") {
			t.Errorf("PAYLOCK_EVENT_RETENTION=%s: exit %d, %q; want 2 and one line naming it", v, code, msg)
		}
	}
	for v, want := range map[string]time.Duration{"": 0, "7d": 7 * 24 * time.Hour, "90d": 90 * 24 * time.Hour, "720h": 30 * 24 * time.Hour} {
		cfg, _, err := loadConfig("paylock serve", nil, envMap(map[string]string{"PAYLOCK_EVENT_RETENTION": v}))
		if err != nil || cfg.Database.EventRetention != want {
			t.Errorf("PAYLOCK_EVENT_RETENTION=%q: %v, %v; want %v", v, cfg.Database.EventRetention, err, want)
		}
	}
}
