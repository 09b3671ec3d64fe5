package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/store"
)

// TestListCommandsPrintATableOrJSON: every list command prints a table
// with its header row by default, and with --json a JSON array of objects
// with the table's fields (and ids) under stable snake_case names.
func TestListCommandsPrintATableOrJSON(t *testing.T) {
	t.Parallel()
	e := setupReconcile(t)
	ctx := context.Background()
	if _, err := e.st.Payments().RecordPaymentForwarded(ctx, store.Payment{TransactionID: "tx-list", Amount: 100, Currency: "EUR",
		Payload: []byte(`{}`)}, forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Deliveries().Keep(ctx, store.Delivery{Source: "stripe", EventID: "evt_list", Outcome: store.DeliveryIgnored,
		Status: 200, Body: []byte(`{"id":"evt_list"}`)}); err != nil {
		t.Fatal(err)
	}
	e.flagged(t, "L-list") // a review item, a stuck disbursement...
	e.payout(t, "L-list")  // ...and a difference: the provider has its payout
	env := map[string]string{"USER": "carol"}
	for k, v := range e.env {
		env[k] = v
	}

	for _, tc := range []struct {
		args   []string
		header string   // the table's first columns, one space apart
		fields []string // some of each JSON object's fields
		code   int      // reconcile exits 1: it found a difference
	}{
		{args: []string{"forward", "list"}, header: "ID STATE ATTEMPTS TYPE",
			fields: []string{"id", "webhook_id", "state", "attempt", "max_attempts", "type", "subject", "source", "transaction_id", "destination", "created_at", "last_error"}},
		{args: []string{"deliveries", "list"}, header: "ID RECEIVED SOURCE",
			fields: []string{"id", "received_at", "source", "outcome", "status", "seen", "event_id", "replayed_at", "detail"}},
		{args: []string{"review", "list"}, header: "ID KIND SUBJECT",
			fields: []string{"id", "kind", "subject", "loan_id", "tranche", "since", "age_seconds", "resolution", "summary", "actions"}},
		{args: []string{"disbursements", "stuck", "--older-than", "0s"}, header: "ID LOAN_ID TRANCHE",
			fields: []string{"id", "loan_id", "tranche", "amount", "currency", "status", "status_since", "for_seconds", "attempts", "provider_ref", "review_reason"}},
		{args: []string{"reconcile"}, header: "DIFFERENCE LOAN_ID TRANCHE", code: 1,
			fields: []string{"difference", "disbursement_id", "loan_id", "tranche", "status", "review_reason", "provider_ref", "provider", "detail"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(env, tc.args...)
			first, _, _ := strings.Cut(out, "\n")
			if code != tc.code || !strings.HasPrefix(strings.Join(strings.Fields(first), " "), tc.header) {
				t.Fatalf("exit %d (want %d), want the header %q first:\n%s%s", code, tc.code, tc.header, out, errOut)
			}
			code, out, errOut = runCLI(env, append(tc.args, "--json")...)
			if code != tc.code {
				t.Fatalf("--json: exit %d, want %d: %s", code, tc.code, errOut)
			}
			var rows []map[string]any
			if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) == 0 {
				t.Fatalf("--json: %v, %d rows:\n%s", err, len(rows), out)
			}
			for _, f := range tc.fields {
				if _, ok := rows[0][f]; !ok {
					t.Errorf("--json: no field %q in %v", f, rows[0])
				}
			}
		})
	}

	// --since filters forward list and review list: 3d holds today's, a
	// time to come holds none.
	for _, args := range [][]string{{"forward", "list"}, {"review", "list"}} {
		for since, want := range map[string]int{"3d": 1, "2999-01-01T00:00:00Z": 0} {
			code, out, errOut := runCLI(env, append(args, "--since", since, "--json")...)
			var rows []map[string]any
			if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != want {
				t.Errorf("%v --since %s: exit %d, %d rows (want %d), %v %s", args, since, code, len(rows), want, err, errOut)
			}
		}
	}

	// An empty list is [] in JSON, never null.
	code, out, errOut := runCLI(env, "forward", "list", "--discarded", "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("an empty forward list --json: exit %d %q %q; want []", code, out, errOut)
	}
}

// TestReconcilePaymentsReportIsATableOrJSON: reconcile payments' rows are
// a table with a header, or with --json an array, the counts on stderr.
func TestReconcilePaymentsReportIsATableOrJSON(t *testing.T) {
	t.Parallel()
	rep := reconcile.Report{Seen: 3, AlreadyRecorded: 1, RecordedNow: 1, Recorded: []string{"pi_new"},
		Mismatched: []reconcile.Difference{{EventID: "evt_2", Ref: "pi_other", Err: errors.New("differs")}}}
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var out, counts bytes.Buffer
	if err := printPaymentsReport(&out, &counts, "stripe", from, rep, false, false); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "RESULT        TRANSACTION_ID") || !strings.Contains(out.String(), "recorded_now  pi_new") ||
		!strings.Contains(out.String(), "stripe: 3 events since") || counts.Len() != 0 {
		t.Errorf("table:\n%s(counts %q)", out.String(), counts.String())
	}
	out.Reset()
	if err := printPaymentsReport(&out, &counts, "stripe", from, rep, false, true); err != nil {
		t.Fatal(err)
	}
	var rows []paymentsRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 2 || rows[1] != (paymentsRow{Result: "mismatch", TransactionID: "pi_other", EventID: "evt_2", Detail: "differs"}) {
		t.Errorf("--json: %v %+v\n%s", err, rows, out.String())
	}
	if !strings.Contains(counts.String(), "1 already recorded, 1 recorded now, 1 mismatched") {
		t.Errorf("--json counts: %q", counts.String())
	}
	var raw []map[string]any
	_ = json.Unmarshal(out.Bytes(), &raw)
	for _, f := range []string{"result", "transaction_id", "event_id", "detail"} {
		if _, ok := raw[0][f]; !ok {
			t.Errorf("--json: no field %q", f)
		}
	}
}

// TestTheDocsNameEachListsJSONFields keeps docs/cli.md's table of JSON
// fields and the row types' json tags the same.
func TestTheDocsNameEachListsJSONFields(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	for cmd, row := range map[string]any{
		"forward list": forwardRow{}, "forward destinations": destinationRow{}, "deliveries list": deliveryRow{}, "review list": reviewRow{},
		"disbursements stuck": stuckRow{}, "reconcile [disbursements]": differenceRow{}, "reconcile payments": paymentsRow{},
	} {
		var tags []string
		rt := reflect.TypeOf(row)
		for i := range rt.NumField() {
			if tag, ok := rt.Field(i).Tag.Lookup("json"); ok {
				tags = append(tags, "`"+tag+"`")
			}
		}
		want := "| `" + cmd + "` | " + strings.Join(tags, ", ")
		if !strings.Contains(string(b), want) {
			t.Errorf("docs/cli.md has no row %q", want)
		}
	}
}
