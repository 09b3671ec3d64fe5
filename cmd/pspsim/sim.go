package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paylock/paylock/signature"
)

// transaction is one payment the simulated PSP notifies: every delivery of
// it carries the same body and the same webhook-id.
type transaction struct {
	ID        string
	WebhookID string
	Amount    int64
	Currency  string
	Body      []byte
}

// amountFor is transaction i's amount in minor units: deterministic for a
// seed, different from one transaction to the next, never 0.
func amountFor(seed uint64, i int) int64 {
	return rand.New(rand.NewPCG(seed, uint64(i))).Int64N(999_900) + 100
}

// makeTransactions builds a run's transactions; runID keeps their ids apart
// from other runs' on the same database.
func makeTransactions(runID string, seed uint64, n int, currency string) []transaction {
	txs := make([]transaction, n)
	for i := range txs {
		tx := transaction{
			ID:        fmt.Sprintf("%s-tx-%06d", runID, i),
			WebhookID: fmt.Sprintf("msg_%s_%06d", runID, i),
			Amount:    amountFor(seed, i),
			Currency:  currency,
		}
		tx.Body, _ = json.Marshal(map[string]any{
			"transaction_id": tx.ID, "amount": tx.Amount, "currency": tx.Currency,
		})
		txs[i] = tx
	}
	return txs
}

// Answer classes, the keys of the by-status counts. HTTP answers are their
// status code, with a 2xx's result ("200 processed", "200 duplicate");
// deliveries that got no HTTP answer are one of the err: classes.
const (
	errTimeout = "err:timeout" // the attempt's timeout (or the run's deadline) expired
	errRefused = "err:refused" // connection refused: nothing listens there
	errBroken  = "err:broken"  // reset, EOF or any other transport failure
)

// attemptResult is what one HTTP attempt came to.
type attemptResult struct {
	class      string
	status     int           // 0 without an HTTP answer
	result     string        // a 2xx body's "result"
	sent       time.Time     // when the request went out (an HTTP slot was free)
	latency    time.Duration // only meaningful with status > 0
	retryAfter time.Duration // -1 when absent
}

func (a attemptResult) acked() bool { return a.status >= 200 && a.status < 300 }

// tally collects every attempt's outcome. It is safe for concurrent use.
type tally struct {
	mu           sync.Mutex
	attempts     int
	inFlight     int
	firstAttempt map[string]int
	answers      map[string]int
	latencies    []time.Duration // answered attempts
	ackLatencies []time.Duration // acknowledged deliveries: first attempt to the 2xx
	acked        int             // deliveries acknowledged; the others were not by the deadline
	processed    []int           // per transaction: "processed" answers
	ackedTx      []bool          // per transaction: some delivery was acknowledged
}

func newTally(txs int) *tally {
	return &tally{
		firstAttempt: map[string]int{},
		answers:      map[string]int{},
		processed:    make([]int, txs),
		ackedTx:      make([]bool, txs),
	}
}

func (t *tally) begin() {
	t.mu.Lock()
	t.inFlight++
	t.mu.Unlock()
}

func (t *tally) attempt(tx, n int, a attemptResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inFlight--
	t.attempts++
	t.answers[a.class]++
	if n == 0 {
		t.firstAttempt[a.class]++
	}
	if a.status > 0 {
		t.latencies = append(t.latencies, a.latency)
	}
	if a.acked() {
		t.ackedTx[tx] = true
		if a.result == "processed" {
			t.processed[tx]++
		}
	}
}

// acknowledged records a delivery acknowledged took after its first attempt.
func (t *tally) acknowledged(took time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.acked++
	t.ackLatencies = append(t.ackLatencies, took)
}

// progress is a one-line view of the tally so far.
func (t *tally) progress(elapsed time.Duration, deliveries int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("pspsim: %5.1fs  acknowledged %d/%d  attempts %d  in flight %d  %s",
		elapsed.Seconds(), t.acked, deliveries, t.attempts, t.inFlight, formatCounts(t.answers))
}

// formatCounts prints counts as "k: n, k: n" in key order.
func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// sender delivers transactions like a PSP: at least once, retrying until a
// 2xx or the deadline.
type sender struct {
	client         *http.Client
	urls           []string // full webhook URLs, one per target
	secret         *signature.Secret
	schedule       schedule
	attemptTimeout time.Duration
	deadline       time.Time
	slots          chan struct{} // bounds concurrent HTTP attempts
	tally          *tally
}

// deliver runs delivery d of transaction i until it is acknowledged or the
// deadline leaves no time for another attempt. Attempt n goes to target
// (i+d+n) mod targets: the deliveries of one transaction start on different
// replicas, the first delivery's replica rotates from one transaction to the
// next, and each retry moves on, as behind a round-robin load balancer.
func (s *sender) deliver(ctx context.Context, i int, tx *transaction, d int) {
	b := s.schedule.backOff()
	var start time.Time // the first attempt's send, the origin of the ack latency
	for n := 0; ; n++ {
		a, ok := s.attempt(ctx, tx, s.urls[target(i, d, n, len(s.urls))], fmt.Sprintf("%s-%d-%d", tx.ID, d, n))
		if !ok { // the run's context ended before a slot was free
			return
		}
		if n == 0 {
			start = a.sent
		}
		s.tally.attempt(i, n, a)
		if a.acked() {
			s.tally.acknowledged(time.Since(start))
			return
		}
		wait := s.schedule.wait(b, a.retryAfter)
		if time.Now().Add(wait).After(s.deadline) || !sleep(ctx, wait) {
			return // unacknowledged: the summary counts deliveries minus acknowledged
		}
	}
}

// target is the index of the target that attempt n of delivery d of
// transaction i goes to, among targets.
func target(i, d, n, targets int) int { return (i + d + n) % targets }

// attempt sends one signed POST when an HTTP slot is free. It reports false
// when ctx ended first.
func (s *sender) attempt(ctx context.Context, tx *transaction, url, requestID string) (attemptResult, bool) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return attemptResult{}, false
	}
	defer func() { <-s.slots }()
	s.tally.begin()
	sent := time.Now()
	actx, cancel := context.WithTimeout(ctx, s.attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, url, bytes.NewReader(tx.Body))
	if err != nil {
		return attemptResult{class: errBroken, sent: sent, retryAfter: -1}, true
	}
	if s.secret != nil {
		// A fresh timestamp per attempt, the same webhook-id per
		// transaction: what a Standard Webhooks sender does on retry.
		for k, v := range signature.Sign(signature.SchemeStandard, *s.secret, tx.WebhookID, time.Now(), tx.Body) {
			req.Header[k] = v
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", requestID)
	start := time.Now()
	res, err := s.client.Do(req)
	if err != nil {
		return attemptResult{class: classifyError(err), sent: sent, retryAfter: -1}, true
	}
	body, rerr := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	a := attemptResult{
		class:      fmt.Sprint(res.StatusCode),
		status:     res.StatusCode,
		sent:       sent,
		latency:    time.Since(start),
		retryAfter: parseRetryAfter(res.Header.Get("Retry-After"), time.Now()),
	}
	if a.acked() {
		if rerr != nil {
			// The status said 2xx; a PSP takes that as acknowledged
			// whatever became of the body.
			a.result = "?"
		} else {
			var r struct {
				Result string `json:"result"`
			}
			_ = json.Unmarshal(body, &r)
			a.result = r.Result
			if a.result == "" {
				a.result = "?"
			}
		}
		a.class += " " + a.result
	}
	return a, true
}

func classifyError(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return errTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return errRefused
	}
	return errBroken
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
