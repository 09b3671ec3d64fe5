package store

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// gathered returns every series of reg as "name{labels}" → value, with the
// labels in the text format's order.
func gathered(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			name := f.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Gauge != nil:
				out[name] = m.Gauge.GetValue()
			case m.Counter != nil:
				out[name] = m.Counter.GetValue()
			}
		}
	}
	return out
}

func TestDisbursementGaugesReportCountsAndTheOldestAge(t *testing.T) {
	t.Parallel()
	st := setup(t).store
	ctx := context.Background()
	for i, set := range []string{
		"", // pending, new
		"status_since = now() - interval '90 minutes'",                                      // pending for 1.5h: the oldest
		"review_reason = 'lookup found nothing', status_since = now() - interval '5 hours'", // awaiting review: not "oldest"
		"status = 'sent', provider_ref = 'po_3', status_since = now() - interval '20 minutes'",
		"status = 'paid', provider_ref = 'po_4', status_since = now() - interval '9 days'",
		"status = 'paid', provider_ref = 'po_5', status_since = now() - interval '9 days'",
	} {
		loan := fmt.Sprintf("L-%d", i)
		if _, err := st.Disbursements().AcceptDisbursement(ctx, Disbursement{LoanID: loan, Tranche: 1, Amount: 1, Currency: "JPY", EventID: "evt_" + loan}); err != nil {
			t.Fatal(err)
		}
		if set != "" {
			if _, err := st.Pool().Exec(ctx, "UPDATE disbursements SET "+set+" WHERE loan_id = $1", loan); err != nil {
				t.Fatal(err)
			}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(DisbursementCollector{Disbursements: st.Disbursements(), Timeout: StatsTimeout})
	got := gathered(t, reg)
	for series, want := range map[string]float64{
		`paylock_disbursement_stats_up`:               1,
		`paylock_disbursements{status="pending"}`:     3,
		`paylock_disbursements{status="sent"}`:        1,
		`paylock_disbursements{status="paid"}`:        2,
		`paylock_disbursements{status="failed"}`:      0,
		`paylock_disbursements_needing_review`:        1,
		`paylock_disbursement_oldest_pending_seconds`: 90 * 60,
	} {
		v, ok := got[series]
		if !ok {
			t.Errorf("%s is not exported", series)
			continue
		}
		if math.Abs(v-want) > 30 {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
}

func TestDisbursementGaugesOfAnEmptyTableAreZero(t *testing.T) {
	t.Parallel()
	st := setup(t).store
	reg := prometheus.NewRegistry()
	reg.MustRegister(DisbursementCollector{Disbursements: st.Disbursements(), Timeout: StatsTimeout})
	got := gathered(t, reg)
	if got[`paylock_disbursement_stats_up`] != 1 || len(got) != 7 {
		t.Fatalf("want stats_up 1 and 6 zero gauges, got %v", got)
	}
	for series, v := range got {
		if series != `paylock_disbursement_stats_up` && v != 0 {
			t.Errorf("%s = %v on an empty table", series, v)
		}
	}
}

func TestAScrapeBlockedByTheDatabaseEndsInTimeWithStatsDown(t *testing.T) {
	t.Parallel()
	st := setup(t).store
	ctx := context.Background()
	// Another session holds the table: the stats query would wait for it.
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE disbursements IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(DisbursementCollector{Disbursements: st.Disbursements(), Timeout: 200 * time.Millisecond})
	start := time.Now()
	got := gathered(t, reg)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the scrape took %v with a 200ms timeout", took)
	}
	if v, ok := got[`paylock_disbursement_stats_up`]; !ok || v != 0 || len(got) != 1 {
		t.Errorf("want only paylock_disbursement_stats_up 0, got %v", got)
	}
}
