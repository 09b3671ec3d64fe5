package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

func recordListed(t *testing.T, b *bundle, source string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		p := newPayment(id)
		p.Source = source
		if _, err := b.store.Payments().RecordPayment(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
}

func listedNames(ps []PaymentSummary) []string {
	var names []string
	for _, p := range ps {
		names = append(names, p.Source+"/"+p.TransactionID)
	}
	return names
}

func TestListPaymentsPagesStayStableWhilePaymentsArrive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	recordListed(t, b, "stripe", "p-1", "p-2", "p-3", "p-4", "p-5")
	var seen []string
	l := PaymentList{Limit: 2}
	for page := 0; ; page++ {
		got, err := b.store.Payments().ListPayments(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, listedNames(got)...)
		if page == 0 {
			// New payments arrive between the first and the second page:
			// they are newer than the cursor, so the pages after it
			// neither repeat nor skip a row.
			recordListed(t, b, "stripe", "p-new-1", "p-new-2")
		}
		if len(got) < l.Limit {
			break
		}
		c := got[len(got)-1].Cursor()
		l.After = &c
	}
	want := []string{"stripe/p-5", "stripe/p-4", "stripe/p-3", "stripe/p-2", "stripe/p-1"}
	if !slices.Equal(seen, want) {
		t.Fatalf("paged %v, want %v", seen, want)
	}
}

func TestListPaymentsFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	recordListed(t, b, "stripe", "s-1", "s-10", "s_%", "t-1")
	recordListed(t, b, "adyen", "s-1")
	testkit.Exec(t, b.admin, `UPDATE payments SET status = 'refunded' WHERE source = 'adyen'`)
	tests := []struct {
		name string
		l    PaymentList
		want []string
	}{
		{"BySource", PaymentList{Source: "adyen"}, []string{"adyen/s-1"}},
		{"ByStatus", PaymentList{Status: "refunded"}, []string{"adyen/s-1"}},
		{"ByPrefix", PaymentList{Prefix: "s-1"}, []string{"adyen/s-1", "stripe/s-10", "stripe/s-1"}},
		{"PrefixWildcardsAreLiteral", PaymentList{Prefix: "s_"}, []string{"stripe/s_%"}},
		{"PrefixAndSource", PaymentList{Prefix: "s-1", Source: "stripe"}, []string{"stripe/s-10", "stripe/s-1"}},
		{"SinceInTheFuture", PaymentList{Since: time.Now().Add(time.Hour)}, nil},
		{"SinceAnHourAgo", PaymentList{Since: time.Now().Add(-time.Hour), Source: "adyen"}, []string{"adyen/s-1"}},
		{"Limit", PaymentList{Limit: 1}, []string{"adyen/s-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.store.Payments().ListPayments(ctx, tc.l)
			if err != nil {
				t.Fatal(err)
			}
			if names := listedNames(got); !slices.Equal(names, tc.want) {
				t.Fatalf("got %v, want %v", names, tc.want)
			}
		})
	}
}

func TestPrefixUpperBound(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"abc", "abd", true},
		{"a\U0010FFFF", "b", true},
		{"\U0010FFFF", "", false},
		{"a\uD7FF", "a\uE000", true},
	} {
		got, ok := prefixUpperBound(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("prefixUpperBound(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestListPaymentsUsesItsIndexes checks with EXPLAIN that each shape of
// the listing reads an index of migration 00014 (sequential scans off, as
// on a table too large to scan).
func TestListPaymentsUsesItsIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testkit.Exec(t, b.admin, `SET enable_seqscan = off`)
	after := &PaymentCursor{ReceivedAt: time.Now(), ID: 42}
	for _, tc := range []struct {
		l     PaymentList
		index string
	}{
		{PaymentList{}, "payments_received_at_id_idx"},
		{PaymentList{After: after}, "payments_received_at_id_idx"},
		{PaymentList{Source: "stripe", After: after}, "payments_source_received_at_id_idx"},
		{PaymentList{Status: "refunded", After: after}, "payments_status_received_at_id_idx"},
		{PaymentList{Prefix: "pi_3"}, "payments_transaction_id_prefix_idx"},
	} {
		t.Run(tc.index+fmt.Sprintf("%+v", tc.l.After != nil), func(t *testing.T) {
			q, args := listPaymentsSQL(tc.l)
			rows, err := b.admin.Query(context.Background(), "EXPLAIN "+q, args...)
			if err != nil {
				t.Fatal(err)
			}
			var plan strings.Builder
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan.WriteString(line + "\n")
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan.String(), tc.index) {
				t.Fatalf("%+v does not use %s:\n%s", tc.l, tc.index, plan.String())
			}
		})
	}
}
