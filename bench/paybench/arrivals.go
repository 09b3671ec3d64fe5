package main

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"time"
)

// arrivals is how the copies of each transaction reached a replica, read
// from its request log: when each copy's request started (the log line's
// time less its duration), and how long the copy that recorded the payment
// took from its start to its answer (when it released the lock).
type arrivals struct {
	Transactions int
	Spread       latencySummary // last copy's start less first copy's start, per transaction
	WinnerHold   latencySummary // the recording copy's start to its answer
}

// logLine is the part of paylock's "payment webhook" log line read here.
type logLine struct {
	Msg           string    `json:"msg"`
	Time          time.Time `json:"time"`
	TransactionID string    `json:"transaction_id"`
	Outcome       string    `json:"outcome"`
	Duration      int64     `json:"duration"` // ns
}

// readArrivals reads a replica's JSON log for the transactions whose id
// starts with prefix. It returns false when the log does not have the
// fields it needs.
func readArrivals(path, prefix string) (arrivals, bool) {
	f, err := os.Open(path)
	if err != nil {
		return arrivals{}, false
	}
	defer f.Close()
	type copyRun struct {
		start, end time.Time
		processed  bool
	}
	byTx := map[string][]copyRun{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), prefix) {
			continue
		}
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "payment webhook" || l.Time.IsZero() || l.Duration <= 0 {
			continue
		}
		if !strings.HasPrefix(l.TransactionID, prefix) {
			continue
		}
		byTx[l.TransactionID] = append(byTx[l.TransactionID], copyRun{
			start: l.Time.Add(-time.Duration(l.Duration)), end: l.Time, processed: l.Outcome == "processed"})
	}
	if len(byTx) == 0 {
		return arrivals{}, false
	}
	var a arrivals
	var spread, hold latencies
	for _, runs := range byTx {
		i := slices.IndexFunc(runs, func(c copyRun) bool { return c.processed })
		if i < 0 || len(runs) < 2 {
			continue
		}
		a.Transactions++
		w := runs[i]
		first, last := runs[0].start, runs[0].start
		for _, c := range runs {
			if c.start.Before(first) {
				first = c.start
			}
			if c.start.After(last) {
				last = c.start
			}
		}
		spread = append(spread, last.Sub(first))
		hold = append(hold, w.end.Sub(w.start))
	}
	if a.Transactions == 0 {
		return arrivals{}, false
	}
	a.Spread, a.WinnerHold = spread.summary(), hold.summary()
	return a, true
}
