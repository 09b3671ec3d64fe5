package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/paylock/paylock/internal/latency"
)

// Summary is what a run came to, printed for people and, with --json, for
// scripts (scripts/chaos.sh reads it).
type Summary struct {
	RunID        string   `json:"run_id"`
	Targets      []string `json:"targets"`
	Transactions int      `json:"transactions"`
	Deliveries   int      `json:"deliveries"`
	// Acknowledged deliveries got a 2xx before the deadline; the others are
	// Unacknowledged.
	Acknowledged   int     `json:"acknowledged"`
	Unacknowledged int     `json:"unacknowledged"`
	Attempts       int     `json:"attempts"`
	Retries        int     `json:"retries"` // attempts beyond each delivery's first
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// FirstAttempt and Answers count answers by class: the HTTP status
	// ("200 processed", "200 duplicate", "409", "503", ...) or err:timeout,
	// err:refused, err:broken when no HTTP answer came.
	FirstAttempt map[string]int `json:"first_attempt"`
	Answers      map[string]int `json:"answers"`
	// Unexpected counts answers other than a 2xx, 409, 503 or a transport
	// error; Rejected counts the 4xx among them, answers that refuse a
	// valid, correctly signed payment.
	Unexpected int `json:"unexpected"`
	Rejected   int `json:"rejected"`
	// Latency is per answered attempt; AckLatency per acknowledged delivery,
	// from its first attempt to its 2xx, retries included.
	Latency    latency.Percentiles `json:"latency_ms"`
	AckLatency latency.Percentiles `json:"ack_latency_ms"`

	// Verified is false when the database could not be read; the rows
	// fields are then meaningless and the verdict fails.
	Verified bool `json:"verified"`
	// Rows is the number of transactions found recorded.
	Rows int `json:"rows"`
	// ProcessedMoreThanOnce counts transactions answered "processed" by
	// more than one delivery; WrongRows those stored with another amount,
	// currency or webhook-id than sent. Duplicates is their sum.
	ProcessedMoreThanOnce int `json:"processed_more_than_once"`
	WrongRows             int `json:"wrong_rows"`
	Duplicates            int `json:"duplicates"`
	// LostAcknowledged counts transactions acknowledged but not recorded;
	// NeverAcknowledged those no delivery of which was acknowledged before
	// the deadline. Lost is their sum.
	LostAcknowledged  int `json:"lost_acknowledged"`
	NeverAcknowledged int `json:"never_acknowledged"`
	Lost              int `json:"lost"`

	Verdict string   `json:"verdict"` // "pass" or "fail"
	Reasons []string `json:"reasons,omitempty"`
	// Problems lists some wrong rows and verification errors, for people.
	Problems []string `json:"problems,omitempty"`
}

// dbCheck is what the database says about a run's transactions.
type dbCheck struct {
	Verified bool
	Found    []bool   // per transaction
	Wrong    []string // one line per wrong row
	Err      error    // why verification could not finish
}

// summarize builds the summary from the tally and the database check, and
// passes the verdict.
func summarize(t *tally, db dbCheck, deliveries int) Summary {
	s := Summary{
		Transactions:   len(t.processed),
		Deliveries:     deliveries,
		Acknowledged:   t.acked,
		Unacknowledged: deliveries - t.acked,
		Attempts:       t.attempts,
		Retries:        max(t.attempts-firstAttempts(t), 0),
		FirstAttempt:   t.firstAttempt,
		Answers:        t.answers,
		Latency:        latency.Of(t.latencies),
		AckLatency:     latency.Of(t.ackLatencies),
		Verified:       db.Verified,
	}
	for class, n := range t.answers {
		if !expected(class) {
			s.Unexpected += n
			if strings.HasPrefix(class, "4") {
				s.Rejected += n
			}
		}
	}
	for i := range t.processed {
		if t.processed[i] > 1 {
			s.ProcessedMoreThanOnce++
		}
		found := db.Verified && db.Found[i]
		if found {
			s.Rows++
		}
		switch {
		case !t.ackedTx[i]:
			s.NeverAcknowledged++
		case db.Verified && !found:
			s.LostAcknowledged++
		}
	}
	s.WrongRows = len(db.Wrong)
	s.Duplicates = s.ProcessedMoreThanOnce + s.WrongRows
	s.Lost = s.LostAcknowledged + s.NeverAcknowledged
	s.Problems = append(s.Problems, db.Wrong[:min(len(db.Wrong), 10)]...)
	if db.Err != nil {
		s.Problems = append(s.Problems, "verification: "+db.Err.Error())
	}
	s.Reasons = judge(s)
	s.Verdict = "pass"
	if len(s.Reasons) > 0 {
		s.Verdict = "fail"
	}
	return s
}

// firstAttempts is the number of deliveries that made at least one attempt
// (one the run's end stopped before its first is neither a first attempt nor
// a retry).
func firstAttempts(t *tally) int {
	n := 0
	for _, c := range t.firstAttempt {
		n += c
	}
	return n
}

// expected reports whether an answer class is one the contract allows under
// faults: a 2xx, 409 (in progress elsewhere), 503 (not confirmed, retry) or a
// transport error.
func expected(class string) bool {
	return strings.HasPrefix(class, "2") || class == "409" || class == "503" || strings.HasPrefix(class, "err:")
}

// judge returns why the run fails the exactly-once verdict, or nothing.
// Unexpected 5xx answers (a 500, say) do not fail it on their own: the
// contract promises nothing was claimed recorded and the retry converges;
// when it does not, unacknowledged or lost deliveries fail the run.
func judge(s Summary) []string {
	var r []string
	if !s.Verified {
		r = append(r, "the database could not be verified")
	}
	if s.ProcessedMoreThanOnce > 0 {
		r = append(r, fmt.Sprintf("%d transactions answered \"processed\" more than once", s.ProcessedMoreThanOnce))
	}
	if s.WrongRows > 0 {
		r = append(r, fmt.Sprintf("%d transactions stored with another amount, currency or webhook-id than sent", s.WrongRows))
	}
	if s.LostAcknowledged > 0 {
		r = append(r, fmt.Sprintf("%d transactions acknowledged but not recorded", s.LostAcknowledged))
	}
	if s.NeverAcknowledged > 0 {
		r = append(r, fmt.Sprintf("%d transactions never acknowledged before the deadline", s.NeverAcknowledged))
	}
	if s.Unacknowledged > 0 {
		r = append(r, fmt.Sprintf("%d deliveries not acknowledged before the deadline", s.Unacknowledged))
	}
	if s.Rejected > 0 {
		r = append(r, fmt.Sprintf("%d answers refused a valid payment with a 4xx other than 409", s.Rejected))
	}
	return r
}

// print writes the human-readable summary.
func (s Summary) print(w io.Writer) {
	p := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-15s %s\n", label, fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(w, "pspsim run %s: %d transactions × %d deliveries over %d targets in %.1fs\n",
		s.RunID, s.Transactions, deliveriesPer(s), len(s.Targets), s.ElapsedSeconds)
	p("deliveries", "%d (%d acknowledged, %d not before the deadline)", s.Deliveries, s.Acknowledged, s.Unacknowledged)
	p("attempts", "%d (%d retries)", s.Attempts, s.Retries)
	p("first attempt", "%s", formatCounts(s.FirstAttempt))
	p("answers", "%s", formatCounts(s.Answers))
	if s.Unexpected > 0 {
		p("unexpected", "%d answers other than 2xx, 409, 503 or a transport error (%d of them 4xx)", s.Unexpected, s.Rejected)
	}
	p("latency", "%s (answered attempts)", s.Latency)
	p("ack latency", "%s (first attempt to 2xx)", s.AckLatency)
	if s.Verified {
		p("database", "%d/%d transactions recorded, %d wrong rows", s.Rows, s.Transactions, s.WrongRows)
	} else {
		p("database", "NOT VERIFIED")
	}
	p("duplicates", "%d (%d processed more than once, %d wrong rows)", s.Duplicates, s.ProcessedMoreThanOnce, s.WrongRows)
	p("lost", "%d (%d acknowledged but not recorded, %d never acknowledged)", s.Lost, s.LostAcknowledged, s.NeverAcknowledged)
	for _, pr := range s.Problems {
		p("problem", "%s", pr)
	}
	if s.Verdict == "pass" {
		p("verdict", "PASS: every transaction recorded exactly once with the amount sent")
		return
	}
	p("verdict", "FAIL")
	for _, r := range s.Reasons {
		p("", "- %s", r)
	}
}

func deliveriesPer(s Summary) int {
	if s.Transactions == 0 {
		return 0
	}
	return s.Deliveries / s.Transactions
}
