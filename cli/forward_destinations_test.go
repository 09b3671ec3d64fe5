package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// watchedFile defines two destinations, one with credentials in its URL.
const watchedFile = `destinations:
  ledger:
    url: https://svc:hunter2@ledger.internal/hooks?token=abc123
    secrets_env: LEDGER_FORWARD_SECRETS
    types: ["payment.*"]
    filter: 'data.amount >= 1000'
    headers: {X-Api-Key: {env: LEDGER_API_KEY}}
  analytics:
    url: nats://127.0.0.1:4222/payments
sources:
  stripe:
    adapter: stripe
    signature: stripe
    secrets_env: STRIPE_WEBHOOK_SECRETS
    forward_to: [ledger, analytics]
`

func TestForwardDestinationsShowsEachDestinationsStateBacklogAndLastError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sources.yaml")
	if err := os.WriteFile(path, []byte(watchedFile), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DATABASE_URL": testkit.Schema(t), "PAYLOCK_SOURCES_FILE": path, "PAYLOCK_LOG_LEVEL": "error",
		"LEDGER_API_KEY": "header-value-secret", // never read, never printed
	}
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	ctx := context.Background()
	for i, dest := range []string{"ledger", "analytics", "gone"} {
		p := store.Payment{Source: "stripe", TransactionID: "dst-" + dest, Amount: int64(1000 + i), Currency: "EUR", Payload: []byte(`{}`), EventID: "evt_" + dest}
		if _, err := st.Payments().RecordPaymentForwarded(ctx, p, dest); err != nil {
			t.Fatal(err)
		}
	}
	// ledger's job failed its first attempt; analytics' waits since 10 minutes.
	testkit.Exec(t, st.Pool(), `UPDATE river_job SET state = 'retryable', attempt = 1, scheduled_at = now() + interval '1 minute',
		errors = ARRAY['{"at":"2026-12-03T12:00:00Z","attempt":1,"error":"forward: the receiver answered 503\nbody: {\"card\":\"4242\"}"}']::jsonb[]
		WHERE args->>'destination' = 'ledger'`)
	testkit.Exec(t, st.Pool(), `UPDATE river_job SET created_at = now() - interval '10 minutes' WHERE args->>'destination' = 'analytics'`)

	code, out, errOut := runCLI(env, "forward", "destinations")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	t.Logf("the table:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	wantLines := []string{
		"NAME STATE SINCE BACKLOG FAILING DISCARDED_24H LAG URL TYPES FILTER SOURCES LAST_ERROR",
		"analytics stalled - 1 0 0 10m0s nats://127.0.0.1:4222/payments * - stripe -",
		"ledger failing - 1 1 0 0s https://xxxxx@ledger.internal/hooks?token=xxxxx payment.* data.amount >= 1000 stripe forward: the receiver answered 503",
		"gone unknown - 1 0 0 0s - - - - -",
	}
	if len(lines) != len(wantLines) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(wantLines), out)
	}
	for i, want := range wantLines {
		got := strings.Join(strings.Fields(lines[i]), " ")
		if i > 1 {
			got = strings.Replace(got, " 1s ", " 0s ", 1) // a job's age: 0s, or 1s on a slow machine
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("line %d: %q\nwant %q", i, got, want)
		}
	}
	for _, secret := range []string{"hunter2", "abc123", "svc", "header-value-secret", "4242"} {
		if strings.Contains(out, secret) {
			t.Errorf("the table shows %q:\n%s", secret, out)
		}
	}

	code, out, errOut = runCLI(env, "forward", "destinations", "--json")
	var rows []destinationRow
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 3 {
		t.Fatalf("--json: exit %d, %v, %d rows:\n%s%s", code, err, len(rows), out, errOut)
	}
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	want := destinationRow{Name: "ledger", State: "failing", URL: "https://xxxxx@ledger.internal/hooks?token=xxxxx",
		Types: []string{"payment.*"}, Filter: "data.amount >= 1000", Sources: []string{"stripe"}, Backlog: 1, Failing: 1,
		LastError: "forward: the receiver answered 503", LastErrorAt: &at}
	if got := rows[1]; got.LagSeconds > 60 {
		t.Errorf("--json ledger: lag %ds, want its job's age (seconds)", got.LagSeconds)
	}
	got := rows[1]
	got.LagSeconds = 0 // the job's age: 0s, or 1s on a slow machine
	if !reflect.DeepEqual(got, want) {
		t.Errorf("--json ledger:\n%+v\nwant\n%+v", got, want)
	}
	if rows[0].LagSeconds < 590 || rows[0].State != "stalled" || rows[2].State != "unknown" {
		t.Errorf("--json analytics %+v, gone %+v: want stalled with lag ~600s, unknown", rows[0], rows[2])
	}
	var raw []map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	for _, f := range []string{"name", "state", "url", "types", "filter", "sources", "backlog", "failing", "discarded_24h", "lag_seconds", "last_error", "last_error_at", "state_since", "next_probe_seconds"} {
		if _, ok := raw[0][f]; !ok {
			t.Errorf("--json: no field %q in %v", f, raw[0])
		}
	}
}

func TestDestinationStateIsParkedThenFailingThenStalledThenHealthy(t *testing.T) {
	t.Parallel()
	parked := store.DestinationHealth{Destination: "d", State: store.DestinationParked}
	failing := store.DestinationHealth{Destination: "d", State: store.DestinationFailing}
	for _, tc := range []struct {
		s    store.DestinationStats
		h    store.DestinationHealth
		want string
	}{
		{store.DestinationStats{}, store.DestinationHealth{}, "healthy"},
		{store.DestinationStats{Backlog: 3, Lag: 4 * time.Minute}, store.DestinationHealth{}, "healthy"},
		{store.DestinationStats{Backlog: 3, Lag: 6 * time.Minute}, store.DestinationHealth{}, "stalled"},
		{store.DestinationStats{Backlog: 3, Failing: 1, Lag: time.Hour}, store.DestinationHealth{}, "failing"},
		{store.DestinationStats{Discarded: 2}, store.DestinationHealth{}, "healthy"},
		{store.DestinationStats{}, failing, "failing"},
		{store.DestinationStats{Backlog: 3, Failing: 1, Lag: time.Hour}, parked, "parked"},
	} {
		if got := destinationState(tc.s, tc.h); got != tc.want {
			t.Errorf("destinationState(%+v) = %s, want %s", tc.s, got, tc.want)
		}
	}
}

// opsFile is watchedFile with an operations destination.
const opsFile = watchedFile + `operations:
  destination: analytics
`

func TestForwardResumeBringsAParkedDestinationBackAndRecoverPutsBackAWindow(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sources.yaml")
	if err := os.WriteFile(path, []byte(opsFile), 0o600); err != nil {
		t.Fatal(err)
	}
	// The jobs parked, resumed and recovered are River's, as the express
	// lane hands a sick destination's messages over.
	env := map[string]string{"DATABASE_URL": testkit.Schema(t), "PAYLOCK_SOURCES_FILE": path, "PAYLOCK_LOG_LEVEL": "error",
		"PAYLOCK_FORWARD_EXPRESS": "false"}
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	ctx := context.Background()
	for _, tx := range []string{"res-1", "res-2"} {
		p := store.Payment{Source: "stripe", TransactionID: tx, Amount: 1000, Currency: "EUR", Payload: []byte(`{}`), EventID: "evt_" + tx}
		if _, err := st.Payments().RecordPaymentForwarded(ctx, p, "ledger"); err != nil {
			t.Fatal(err)
		}
	}
	// The breaker parked ledger; its jobs wait.
	if _, _, _, err := st.Outbox().MoveDestination(ctx, store.DestinationMove{Destination: "ledger", To: store.DestinationParked,
		Failures: 10, LastError: "forward: the receiver answered 500", Probe: time.Minute}); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, st.Pool(), `UPDATE river_job SET state = 'scheduled', scheduled_at = now() + interval '1 minute' WHERE args->>'destination' = 'ledger'`)

	code, out, errOut := runCLI(env, "forward", "destinations", "--json")
	var rows []destinationRow
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
		t.Fatalf("destinations: exit %d, %v:\n%s%s", code, err, out, errOut)
	}
	var ledger destinationRow
	for _, r := range rows {
		if r.Name == "ledger" {
			ledger = r
		}
	}
	if ledger.State != "parked" || ledger.StateSince == nil || ledger.NextProbeSeconds == nil || *ledger.NextProbeSeconds < 50 ||
		ledger.Backlog != 2 || ledger.LastError != "forward: the receiver answered 500" {
		t.Fatalf("ledger: %+v; want parked with its since, next probe in about a minute, backlog 2 and the breaker's error", ledger)
	}

	t.Run("ResumeNamesOnlyADestination", func(t *testing.T) {
		code, _, errOut := runCLI(env, "forward", "resume", "nope")
		if code == 0 || !strings.Contains(errOut, `"nope"`) || !strings.Contains(errOut, "ledger") {
			t.Fatalf("resume nope: exit %d, %s; want a refusal naming the destinations", code, errOut)
		}
		if code, _, errOut := runCLI(env, "forward", "resume"); code != 2 || !strings.Contains(errOut, "destination") {
			t.Fatalf("resume without a name: exit %d, %s", code, errOut)
		}
	})
	code, out, errOut = runCLI(env, "forward", "resume", "ledger")
	if code != 0 || !strings.Contains(out, "destination ledger is healthy again") || !strings.Contains(out, "2 waiting jobs made available") {
		t.Fatalf("resume: exit %d:\n%s%s", code, out, errOut)
	}
	if n := testkit.Count(t, st.Pool(), `SELECT count(*) FROM river_job WHERE args->>'destination' = 'ledger' AND state = 'available'`); n != 2 {
		t.Errorf("%d of ledger's jobs available after resume, want 2", n)
	}
	if n := testkit.Count(t, st.Pool(), `SELECT count(*) FROM river_job WHERE args->>'type' = 'destination.recovered'
		AND args->>'destination' = 'analytics' AND args->'operator'->>'destination' = 'ledger'`); n != 1 {
		t.Errorf("%d destination.recovered events to the operations destination, want 1", n)
	}

	// res-1's job was given up an hour ago, res-2's three days ago.
	testkit.Exec(t, st.Pool(), `UPDATE river_job SET state = 'discarded', attempt = max_attempts, finalized_at = now() - interval '1 hour'
		WHERE args->>'destination' = 'ledger' AND args->>'transaction_id' = 'res-1'`)
	testkit.Exec(t, st.Pool(), `UPDATE river_job SET state = 'discarded', attempt = max_attempts, finalized_at = now() - interval '3 days'
		WHERE args->>'destination' = 'ledger' AND args->>'transaction_id' = 'res-2'`)
	if code, _, errOut := runCLI(env, "forward", "recover", "ledger"); code != 2 || !strings.Contains(errOut, "--since") {
		t.Fatalf("recover without --since: exit %d, %s", code, errOut)
	}
	code, out, errOut = runCLI(env, "forward", "recover", "ledger", "--since", "2h")
	if code != 0 || !strings.Contains(out, "put 1 given-up forward jobs to ledger back") {
		t.Fatalf("recover --since 2h: exit %d:\n%s%s", code, out, errOut)
	}
	if n := testkit.Count(t, st.Pool(), `SELECT count(*) FROM river_job WHERE args->>'destination' = 'ledger' AND state = 'discarded'`); n != 1 {
		t.Errorf("%d of ledger's jobs still discarded, want res-2's alone (outside the window)", n)
	}
}
