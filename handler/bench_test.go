package handler_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
)

// benchBody is the shape of paybench's deliveries: the three fields paylock
// reads and a few it keeps as received.
const benchBody = `{"transaction_id":%q,"amount":%d,"currency":"EUR","customer":"cus_00012345","description":"order 12345","metadata":{"source":"bench"}}`

// BenchmarkPaymentDelivery measures one signed delivery of the payments
// source through an in-process HTTP server backed by a real Postgres schema
// and Redis: the client's cost, the handler's (signature, strict decoding,
// lock, record, answer, log line at info into a discarding handler,
// metrics) and the servers' round trips. Deliveries are signed before the
// timer starts; senders run in parallel (b.RunParallel) as a PSP's would.
//
//   - unique: every delivery is a new transaction (lock on);
//   - unique-nolock: the same, Config.NoLock (PAYLOCK_LOCK=off);
//   - duplicate: every delivery repeats a transaction already recorded
//     (lock on: the finished marker, then a read).
//
// scripts/bench.sh runs it with -benchmem and reports ns/op, B/op and
// allocs/op in BENCHMARKS.md; allocs/op and B/op are the figures that stay
// put on a noisy machine.
func BenchmarkPaymentDelivery(b *testing.B) {
	for _, bc := range []struct {
		name      string
		noLock    bool
		duplicate bool
	}{
		{"unique", false, false},
		{"unique-nolock", true, false},
		{"duplicate", false, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			env := newBenchServer(b, handler.Config{NoLock: bc.noLock})
			prefix := testkit.Key(b, bc.name) + "-"
			var reqs []benchDelivery
			if bc.duplicate {
				// A small set of recorded transactions, cycled: every
				// delivery of the measured loop is a duplicate.
				for i := range 64 {
					d := env.sign(prefix+strconv.Itoa(i), i)
					if code := env.send(d); code != http.StatusOK {
						b.Fatalf("recording %s: status %d", prefix+strconv.Itoa(i), code)
					}
					reqs = append(reqs, d)
				}
			} else {
				reqs = make([]benchDelivery, b.N)
				for i := range reqs {
					reqs[i] = env.sign(prefix+strconv.Itoa(i), i)
				}
			}
			var next atomic.Int64
			var failed atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(4) // 4 × GOMAXPROCS senders: round trips overlap
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1) - 1
					if code := env.send(reqs[int(i)%len(reqs)]); code != http.StatusOK {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d of %d deliveries were not answered 200", n, b.N)
			}
		})
	}
}

// benchDelivery is one signed delivery, ready to send.
type benchDelivery struct {
	header http.Header
	body   []byte
}

// benchServer is a handler on a fresh schema and the test Redis, served by
// an httptest server, with a client that keeps its connections alive.
type benchServer struct {
	b      *testing.B
	url    string
	client *http.Client
	secret signature.Secret
}

func newBenchServer(b *testing.B, cfg handler.Config) *benchServer {
	b.Helper()
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, testSecret)
	if err != nil {
		b.Fatal(err)
	}
	v, err := signature.NewVerifier(signature.SchemeStandard, secrets, 5*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Sources = []handler.Source{handler.PaymentsSource(v)}
	cfg.Metrics = handler.NewMetrics(prometheus.NewRegistry(), 5*time.Second)
	// The log line is built and encoded as in production (JSON, info),
	// then dropped.
	cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	r := paylocktest.StartReplica(b, paylocktest.Options{Config: cfg})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	c := &http.Client{Transport: tr}
	b.Cleanup(tr.CloseIdleConnections)
	return &benchServer{b: b, url: r.URL + "/webhooks/payments", client: c, secret: secrets[0]}
}

// sign builds the delivery of transaction tx, signed now.
func (s *benchServer) sign(tx string, i int) benchDelivery {
	body := fmt.Appendf(nil, benchBody, tx, 100+i%100000)
	h := signature.Sign(signature.SchemeStandard, s.secret, "msg_"+tx, time.Now(), body)
	h.Set("Content-Type", "application/json")
	return benchDelivery{header: h, body: body}
}

// send posts d and returns the status code (0 for a transport error).
func (s *benchServer) send(d benchDelivery) int {
	req, err := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(d.body))
	if err != nil {
		return 0
	}
	req.Header = d.header.Clone()
	res, err := s.client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}
