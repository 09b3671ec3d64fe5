package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
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

// loader sends webhook deliveries. Each sender writes its requests as
// bytes on a keep-alive connection of its own and reads the answers with
// http.ReadResponse, as wrk does: net/http's Client would add two
// goroutines and their channel handoffs per request, and a load generator
// that costs several times pgbench's client (both share the CPUs with what
// they measure) would understate paylock against its floor.
type loader struct {
	cfg   loadConfig
	host  string // the Host header
	addr  string // where to dial
	path  string
	conns []*conn // one per sender, kept from one phase to the next
}

// newLoader checks cfg.URL: plain http only (the generator writes its
// requests itself, with no TLS).
func newLoader(cfg loadConfig) (*loader, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if u.Scheme != "http" || u.Hostname() == "" {
		return nil, fmt.Errorf("load: %q: want an http:// URL with a host", cfg.URL)
	}
	l := &loader{cfg: cfg, host: u.Host, addr: net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "80")),
		path: u.RequestURI(), conns: make([]*conn, cfg.Senders)}
	for i := range l.conns {
		l.conns[i] = &conn{}
	}
	return l, nil
}

// close closes the senders' connections.
func (l *loader) close() {
	for _, c := range l.conns {
		c.close()
	}
}

// sendTimeout bounds one delivery, as the Client's Timeout did.
const sendTimeout = 30 * time.Second

// conn is one sender's keep-alive connection; nil until first used and
// after an error.
type conn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte
}

func (c *conn) close() {
	if c.c != nil {
		c.c.Close()
		c.c, c.r = nil, nil
	}
}

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
	type tally struct {
		sent, acked int
		statuses    map[int]int
		lat         latencies
	}
	tallies := make([]tally, n)
	deliver := func(t *tally, c *conn, dv delivery) {
		start := time.Now()
		code := l.send(c, dv)
		t.lat = append(t.lat, time.Since(start))
		t.sent++
		t.statuses[code]++
		if code >= 200 && code < 300 {
			t.acked++
		}
	}
	for i := range tallies {
		tallies[i].statuses = map[int]int{}
	}
	start := time.Now()
	distinct := 0
	if l.cfg.Copies <= 1 {
		// No copies to release together: each sender takes the next
		// transaction itself, with no dispatcher in between.
		var next atomic.Int64
		var stopped atomic.Bool
		stop := time.AfterFunc(d, func() { stopped.Store(true) })
		defer stop.Stop()
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				for !stopped.Load() && ctx.Err() == nil {
					deliver(&tallies[i], l.conns[i], l.delivery(tag, int(next.Add(1)-1)))
				}
			})
		}
		wg.Wait()
		distinct = int(next.Load())
	} else {
		distinct = l.dispatch(ctx, tag, d, func(i int, dv delivery, c *conn) { deliver(&tallies[i], c, dv) })
	}

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

// dispatch runs the phase with copies: the Copies deliveries of a
// transaction go to Copies idle senders at the same instant. It returns
// the transactions dispatched.
func (l *loader) dispatch(ctx context.Context, tag string, d time.Duration, deliver func(int, delivery, *conn)) int {
	n := l.cfg.Senders
	ready := make(chan int, n)
	work := make([]chan delivery, n)
	var wg sync.WaitGroup
	for i := range n {
		work[i] = make(chan delivery, 1)
		wg.Go(func() {
			for {
				ready <- i
				dv, ok := <-work[i]
				if !ok {
					return
				}
				deliver(i, dv, l.conns[i])
			}
		})
	}
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
	return distinct
}

// send posts one delivery on c (dialing it first if needed) and returns
// the status code, 0 for a transport error, after which c is closed. It
// reads the whole answer so the connection is reused.
func (l *loader) send(c *conn, dv delivery) int {
	if c.c == nil {
		nc, err := net.DialTimeout("tcp", l.addr, sendTimeout)
		if err != nil {
			return 0
		}
		c.c, c.r = nc, bufio.NewReaderSize(nc, 4096)
	}
	b := append(c.buf[:0], "POST "...)
	b = append(b, l.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, l.host...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(dv.body)), 10)
	for k, vs := range dv.header {
		for _, v := range vs {
			b = append(append(append(append(b, "\r\n"...), k...), ": "...), v...)
		}
	}
	b = append(append(b, "\r\n\r\n"...), dv.body...)
	c.buf = b
	if err := c.c.SetDeadline(time.Now().Add(sendTimeout)); err != nil {
		c.close()
		return 0
	}
	if _, err := c.c.Write(b); err != nil {
		c.close()
		return 0
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.close()
		return 0
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		c.close()
	}
	return resp.StatusCode
}
