package main

import (
	"strings"
	"testing"
	"time"
)

func TestAmountsAreDeterministicPerSeedAndDifferPerTransaction(t *testing.T) {
	a := makeTransactions("run-a", 7, 50, "JPY")
	b := makeTransactions("run-b", 7, 50, "JPY")
	c := makeTransactions("run-a", 8, 50, "JPY")
	seen := map[int64]bool{}
	sameAsOtherSeed := 0
	for i := range a {
		if a[i].Amount != b[i].Amount {
			t.Fatalf("tx %d: amount %d with run-a, %d with run-b: the seed alone must decide", i, a[i].Amount, b[i].Amount)
		}
		if a[i].Amount <= 0 {
			t.Fatalf("tx %d: amount %d", i, a[i].Amount)
		}
		if a[i].Amount == c[i].Amount {
			sameAsOtherSeed++
		}
		seen[a[i].Amount] = true
	}
	if len(seen) < 45 {
		t.Fatalf("only %d distinct amounts among 50 transactions", len(seen))
	}
	if sameAsOtherSeed > 2 {
		t.Fatalf("%d of 50 amounts unchanged by another seed", sameAsOtherSeed)
	}
	if a[3].ID != "run-a-tx-000003" || a[3].WebhookID != "msg_run-a_000003" {
		t.Fatalf("ids %q %q", a[3].ID, a[3].WebhookID)
	}
	if !strings.Contains(string(a[3].Body), `"transaction_id":"run-a-tx-000003"`) {
		t.Fatalf("body %s", a[3].Body)
	}
}

// run builds a tally the way deliveries fill it: tx, attempt number, class.
type step struct {
	tx, n int
	class string
}

func tallyOf(txs int, steps []step, acked int) *tally {
	t := newTally(txs)
	for _, s := range steps {
		a := attemptResult{class: s.class, retryAfter: -1}
		if !strings.HasPrefix(s.class, "err:") {
			a.status = int(s.class[0]-'0')*100 + int(s.class[1]-'0')*10 + int(s.class[2]-'0')
			a.latency = time.Millisecond
		}
		if a.acked() {
			a.result = strings.TrimPrefix(s.class[3:], " ")
		}
		t.begin()
		t.attempt(s.tx, s.n, a)
	}
	for range acked {
		t.acknowledged(time.Millisecond)
	}
	return t
}

func found(bs ...bool) dbCheck { return dbCheck{Verified: true, Found: bs} }

func TestVerdict(t *testing.T) {
	cases := []struct {
		name       string
		tally      *tally
		db         dbCheck
		deliveries int
		wantPass   bool
		wantReason string
		check      func(t *testing.T, s Summary)
	}{
		{
			name: "each recorded once after retries passes",
			tally: tallyOf(2, []step{
				{0, 0, "200 processed"}, {0, 0, "409"}, {0, 1, "200 duplicate"},
				{1, 0, "err:refused"}, {1, 1, "503"}, {1, 2, "200 processed"}, {1, 0, "200 duplicate"},
			}, 4),
			db: found(true, true), deliveries: 4, wantPass: true,
			check: func(t *testing.T, s Summary) {
				if s.Attempts != 7 || s.Retries != 3 || s.Rows != 2 || s.Acknowledged != 4 {
					t.Fatalf("attempts %d retries %d rows %d acked %d", s.Attempts, s.Retries, s.Rows, s.Acknowledged)
				}
				if s.FirstAttempt["409"] != 1 || s.FirstAttempt["err:refused"] != 1 || s.Answers["503"] != 1 {
					t.Fatalf("first %v answers %v", s.FirstAttempt, s.Answers)
				}
				if s.Unexpected != 0 || s.Duplicates != 0 || s.Lost != 0 {
					t.Fatalf("%+v", s)
				}
			},
		},
		{
			name:  "processed twice is a duplicate",
			tally: tallyOf(1, []step{{0, 0, "200 processed"}, {0, 0, "200 processed"}}, 2),
			db:    found(true), deliveries: 2, wantReason: "more than once",
			check: func(t *testing.T, s Summary) {
				if s.Duplicates != 1 || s.ProcessedMoreThanOnce != 1 {
					t.Fatalf("%+v", s)
				}
			},
		},
		{
			name:  "a wrong row is a duplicate",
			tally: tallyOf(1, []step{{0, 0, "200 processed"}}, 1),
			db:    dbCheck{Verified: true, Found: []bool{true}, Wrong: []string{"tx: stored 1 JPY, sent 2 JPY"}}, deliveries: 1,
			wantReason: "another amount",
			check: func(t *testing.T, s Summary) {
				if s.Duplicates != 1 || s.WrongRows != 1 || len(s.Problems) != 1 {
					t.Fatalf("%+v", s)
				}
			},
		},
		{
			name:  "acknowledged but not recorded is lost",
			tally: tallyOf(2, []step{{0, 0, "200 processed"}, {1, 0, "200 duplicate"}}, 2),
			db:    found(true, false), deliveries: 2, wantReason: "acknowledged but not recorded",
			check: func(t *testing.T, s Summary) {
				if s.Lost != 1 || s.LostAcknowledged != 1 || s.Rows != 1 {
					t.Fatalf("%+v", s)
				}
			},
		},
		{
			name:  "never acknowledged is lost even if recorded",
			tally: tallyOf(1, []step{{0, 0, "503"}, {0, 1, "err:timeout"}}, 0),
			db:    found(true), deliveries: 1, wantReason: "never acknowledged",
			check: func(t *testing.T, s Summary) {
				if s.Lost != 1 || s.NeverAcknowledged != 1 || s.Unacknowledged != 1 {
					t.Fatalf("%+v", s)
				}
			},
		},
		{
			name:  "one delivery left unacknowledged fails",
			tally: tallyOf(1, []step{{0, 0, "200 processed"}, {0, 0, "503"}}, 1),
			db:    found(true), deliveries: 2, wantReason: "deliveries not acknowledged",
		},
		{
			name:  "a 4xx refusal fails",
			tally: tallyOf(1, []step{{0, 0, "422"}, {0, 1, "200 processed"}}, 1),
			db:    found(true), deliveries: 1, wantReason: "4xx",
			check: func(t *testing.T, s Summary) {
				if s.Rejected != 1 || s.Unexpected != 1 {
					t.Fatalf("%+v", s)
				}
			},
		},
		{
			name:  "a 500 that a retry got past is unexpected but passes",
			tally: tallyOf(1, []step{{0, 0, "500"}, {0, 1, "200 processed"}}, 1),
			db:    found(true), deliveries: 1, wantPass: true,
			check: func(t *testing.T, s Summary) {
				if s.Unexpected != 1 || s.Rejected != 0 {
					t.Fatalf("%+v", s)
				}
			},
		},
		{
			name:  "an unreadable database fails",
			tally: tallyOf(1, []step{{0, 0, "200 processed"}}, 1),
			db:    dbCheck{Found: []bool{false}}, deliveries: 1, wantReason: "could not be verified",
			check: func(t *testing.T, s Summary) {
				if s.Lost != 0 {
					t.Fatalf("unverified rows counted lost: %+v", s)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := summarize(c.tally, c.db, c.deliveries)
			if pass := s.Verdict == "pass"; pass != c.wantPass {
				t.Fatalf("verdict %s, reasons %v", s.Verdict, s.Reasons)
			}
			if c.wantReason != "" && !strings.Contains(strings.Join(s.Reasons, "; "), c.wantReason) {
				t.Fatalf("reasons %v, want one about %q", s.Reasons, c.wantReason)
			}
			if c.check != nil {
				c.check(t, s)
			}
			var out strings.Builder
			s.print(&out)
			if want := map[bool]string{true: "PASS", false: "FAIL"}[c.wantPass]; !strings.Contains(out.String(), "verdict         "+want) {
				t.Fatalf("summary does not say %s:\n%s", want, out.String())
			}
		})
	}
}
