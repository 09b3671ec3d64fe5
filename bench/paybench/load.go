package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/paylock/paylock/signature"
)

// loadConfig is one load run against one paylock replica.
type loadConfig struct {
	URL     string        // the webhook endpoint
	Senders int           // concurrent senders, each with its own keep-alive connection
	Copies  int           // deliveries of each transaction, released at the same instant
	Warmup  time.Duration // load before the measurement, not counted
	Measure time.Duration // the measured phase
	Prefix  string        // transaction ids start with it; unique per run
	// Secret signs every delivery (Standard Webhooks) when set; the copies
	// of a transaction carry the same webhook-id, as a PSP's retries do.
	Secret *signature.Secret
}

// phase is what one phase of load came to.
type phase struct {
	Elapsed  time.Duration
	Distinct int         // transactions dispatched (each Copies times)
	Sent     int         // deliveries that got an answer or a transport error
	Acked    int         // 2xx answers
	Statuses map[int]int // answers by status code; 0 counts transport errors
	Latency  latencySummary
}

// DeliveriesPerSec is the acknowledged deliveries per second.
func (p phase) DeliveriesPerSec() float64 { return float64(p.Acked) / p.Elapsed.Seconds() }

// NonOK counts deliveries that were not acknowledged.
func (p phase) NonOK() int { return p.Sent - p.Acked }

// delivery is one transaction to send, with its body and headers.
type delivery struct {
	body   []byte
	header http.Header
}

// loader sends webhook deliveries.
type loader struct {
	cfg    loadConfig
	client *http.Client
}

func newLoader(cfg loadConfig) *loader {
	return &loader{cfg: cfg, client: &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        cfg.Senders * 2,
			MaxIdleConnsPerHost: cfg.Senders * 2,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}}
}

func (l *loader) close() { l.client.CloseIdleConnections() }

// body returns the delivery of transaction n of the phase tagged tag: a
// payment body a little larger than the three required members, as PSPs
// send, signed when a secret is set.
func (l *loader) delivery(tag string, n int) delivery {
	tx := l.cfg.Prefix + tag + "-" + strconv.Itoa(n)
	body := fmt.Appendf(nil, `{"transaction_id":%q,"amount":%d,"currency":"EUR","customer":"cus_%08d","description":"order %d","metadata":{"source":"paybench"}}`,
		tx, 100+n%100000, n%100000000, n)
	h := http.Header{"Content-Type": {"application/json"}}
	if l.cfg.Secret != nil {
		for k, v := range signature.Sign(signature.SchemeStandard, *l.cfg.Secret, "msg_"+tx, time.Now(), body) {
			h[k] = v
		}
	}
	return delivery{body: body, header: h}
}

// run runs the phase tagged tag for d: senders take deliveries as they come
// free; the Copies deliveries of a transaction go to Copies idle senders at
// the same instant (the case a lock is for: a PSP delivering one event to
// several replicas, or retrying while the first attempt still runs). At the
// end no new transaction is dispatched and the phase waits for every sender
// to finish the request it has in flight.
func (l *loader) run(ctx context.Context, tag string, d time.Duration) phase {
	n := l.cfg.Senders
	ready := make(chan int, n)
	work := make([]chan delivery, n)
	type tally struct {
		sent, acked int
		statuses    map[int]int
		lat         latencies
	}
	tallies := make([]tally, n)
	var wg sync.WaitGroup
	for i := range n {
		work[i] = make(chan delivery, 1)
		tallies[i].statuses = map[int]int{}
		wg.Go(func() {
			t := &tallies[i]
			for {
				ready <- i
				dv, ok := <-work[i]
				if !ok {
					return
				}
				start := time.Now()
				code := l.send(dv)
				t.lat = append(t.lat, time.Since(start))
				t.sent++
				t.statuses[code]++
				if code >= 200 && code < 300 {
					t.acked++
				}
			}
		})
	}

	start := time.Now()
	stop := time.NewTimer(d)
	defer stop.Stop()
	picked := make([]int, 0, l.cfg.Copies)
	distinct := 0
dispatch:
	for {
		picked = picked[:0]
		for len(picked) < l.cfg.Copies {
			select {
			case i := <-ready:
				picked = append(picked, i)
			case <-stop.C:
				break dispatch
			case <-ctx.Done():
				break dispatch
			}
		}
		dv := l.delivery(tag, distinct)
		for _, i := range picked {
			work[i] <- dv
		}
		distinct++
	}
	for i := range work {
		close(work[i])
	}
	wg.Wait()

	p := phase{Elapsed: time.Since(start), Distinct: distinct, Statuses: map[int]int{}}
	var all latencies
	for _, t := range tallies {
		p.Sent += t.sent
		p.Acked += t.acked
		for c, k := range t.statuses {
			p.Statuses[c] += k
		}
		all = append(all, t.lat...)
	}
	p.Latency = all.summary()
	return p
}

// send posts one delivery and returns the status code, 0 for a transport
// error. It reads the whole answer so the connection is reused.
func (l *loader) send(dv delivery) int {
	req, err := http.NewRequest(http.MethodPost, l.cfg.URL, bytes.NewReader(dv.body))
	if err != nil {
		return 0
	}
	for k, v := range dv.header {
		req.Header[k] = v
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
