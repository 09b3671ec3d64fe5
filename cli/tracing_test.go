package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/otlpsink"
)

// logLines collects the JSON lines a command writes to its stderr.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
	url   chan string // the webhook listener's URL, once logged
}

func (l *logLines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		l.mu.Lock()
		l.lines = append(l.lines, m)
		l.mu.Unlock()
		if m["msg"] == "paylock listening" {
			l.url <- m["url"].(string)
		}
	}
}

func (l *logLines) find(msg string) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.lines {
		if m["msg"] == msg {
			return m
		}
	}
	return nil
}

// TestServeExportsADeliverysTraceOverOTLP runs "paylock serve" as the
// binary does, with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a receiver the
// test starts, sends one signed delivery, stops serve (which flushes the
// spans) and decodes what the receiver got: the delivery's span tree, its
// attributes, and the log line that carries its trace and span ids. With
// PAYLOCK_TRACE_HTML set, it writes the trace's timeline page there (the
// docs/tracing.md's screenshot).
func TestServeExportsADeliverysTraceOverOTLP(t *testing.T) {
	sink := otlpsink.New()
	defer sink.Close()
	env := hardenEnv(t, map[string]string{
		"PAYLOCK_ADDR": "127.0.0.1:0", "PAYLOCK_ADMIN_ADDR": "off", "PAYLOCK_METRICS_ADDR": "off",
		"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL(), "OTEL_SERVICE_NAME": "paylock-e2e",
		// Auto-pipelined commands go out in writes that several deliveries
		// share, outside any one delivery's trace: one round trip each
		// shows the lock's Redis commands in the delivery's tree.
		"PAYLOCK_LOCK_PIPELINE": "off",
	})
	pr, pw := io.Pipe()
	logs := &logLines{url: make(chan string, 1)}
	go logs.read(pr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan int, 1)
	go func() {
		exited <- Main(ctx, []string{"serve"}, envMap(env), nil, io.Discard, pw)
		pw.Close()
	}()
	var base string
	select {
	case base = <-logs.url:
	case code := <-exited:
		t.Fatalf("serve exited %d before listening", code)
	}

	res, err := http.DefaultClient.Do(signedPayment(t, base, "tx-otlp-1"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("delivery answered %d", res.StatusCode)
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Fatalf("serve exited %d", code)
	}

	var server otlpsink.Span
	for _, sp := range sink.Spans() {
		if sp.Kind == "server" && sp.Attrs["paylock.transaction_id"] == "tx-otlp-1" {
			server = sp
		}
	}
	if server.SpanID == "" {
		t.Fatalf("no server span of the delivery among %d spans received", len(sink.Spans()))
	}
	spans := otlpsink.Trace(sink.Spans(), server.TraceID)
	if path := os.Getenv("PAYLOCK_TRACE_HTML"); path != "" {
		writeTimeline(t, path, spans)
	}
	checkDeliveryTrace(t, server, spans)

	line := logs.find("payment webhook")
	if line == nil || line["trace_id"] != server.TraceID || line["span_id"] != server.SpanID {
		t.Errorf("the delivery's log line does not carry its trace and span ids: %v (server span %s/%s)", line, server.TraceID, server.SpanID)
	}
}

// checkDeliveryTrace checks a processed delivery's exported tree: a root
// server span with its attributes, each step its child, the store's and
// Redis's spans under the steps, one service.
func checkDeliveryTrace(t *testing.T, server otlpsink.Span, spans []otlpsink.Span) {
	t.Helper()
	if server.ParentID != "" || server.Name != "POST /webhooks/payments" || server.Service != "paylock-e2e" {
		t.Errorf("server span: name %q parent %q service %q", server.Name, server.ParentID, server.Service)
	}
	for k, want := range map[string]string{"http.response.status_code": "200", "paylock.outcome": "processed",
		"paylock.source": "payments", "http.request.method": "POST", "paylock.lock.mode": "locked"} {
		if got := server.Attrs[k]; got != want {
			t.Errorf("server span %s = %q, want %q", k, got, want)
		}
	}
	byName := map[string]otlpsink.Span{}
	byID := map[string]otlpsink.Span{}
	for _, sp := range spans {
		byID[sp.SpanID] = sp
		if _, seen := byName[sp.Name]; !seen {
			byName[sp.Name] = sp
		}
	}
	under := func(name, parent string) bool {
		for _, sp := range spans {
			if sp.Name == name && byID[sp.ParentID].Name == parent {
				return true
			}
		}
		return false
	}
	for _, step := range []string{"paylock.signature", "paylock.adapt", "paylock.lock.obtain", "paylock.record", "paylock.lock.release"} {
		if sp, ok := byName[step]; !ok || sp.ParentID != server.SpanID {
			t.Errorf("step %s missing or not the delivery's child (%+v)", step, sp)
		}
	}
	if sp := byName["paylock.store.record_payment"]; sp.ParentID != byName["paylock.record"].SpanID || sp.Attrs["paylock.result"] != "recorded" {
		t.Errorf("the store's span is not the record step's child: %+v", sp)
	}
	if !under("INSERT", "paylock.store.record_payment") {
		t.Errorf("no INSERT span under the store's (pgx tracer)")
	}
	// A free key is taken with SET NX; the release is a script.
	if !under("set", "paylock.lock.obtain") || !under("evalsha", "paylock.lock.release") {
		var names []string
		for _, sp := range spans {
			names = append(names, sp.Name+"<"+byID[sp.ParentID].Name)
		}
		t.Errorf("no Redis command span under the lock's (redisotel): %v", names)
	}
	for _, sp := range spans {
		if sp.SpanID != server.SpanID {
			if _, ok := byID[sp.ParentID]; !ok {
				t.Errorf("span %s's parent is not in the trace", sp.Name)
			}
		}
		if sp.Service != "paylock-e2e" {
			t.Errorf("span %s of service %q", sp.Name, sp.Service)
		}
	}
}

func writeTimeline(t *testing.T, path string, spans []otlpsink.Span) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := otlpsink.WriteHTML(f, "paylock: one signed payment delivery, processed", spans); err != nil {
		t.Fatal(err)
	}
}

// TestTracingIsOffWithoutOTELVariables: with none set, serve's
// configuration says tracing is off, and Setup would install nothing.
func TestTracingIsOffWithoutOTELVariables(t *testing.T) {
	cfg, _, err := loadConfig("serve", nil, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Telemetry.Enabled {
		t.Fatal("tracing on without any OTEL_* variable")
	}
}

func TestBadOTELValuesStopStartNamingTheVariable(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"OTEL_EXPORTER_OTLP_PROTOCOL": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
		"OTEL_TRACES_EXPORTER":        {"OTEL_TRACES_EXPORTER": "jaeger"},
		"OTEL_TRACES_SAMPLER":         {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_SAMPLER": "half"},
	} {
		var stderr strings.Builder
		code := Main(context.Background(), []string{"serve"}, envMap(env), nil, io.Discard, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != exitUsage || strings.Contains(msg, "\n") || !strings.Contains(msg, name) {
			t.Errorf("%v: exit %d, %q; want 2 and one line naming %s", env, code, msg, name)
		}
	}
}

// hangingCollector accepts connections and never answers: it reads and
// discards what the exporter sends, holding each connection open until the
// test ends. accepted counts the connections.
func hangingCollector(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	var conns sync.WaitGroup
	done := make(chan struct{})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conns.Add(1)
			go func() {
				defer conns.Done()
				go func() { <-done; c.Close() }()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); close(done); conns.Wait() })
	return ln.Addr().String(), accepted
}

// TestAHangingCollectorLeavesDeliveriesUnaffected runs "paylock serve"
// exporting to a collector that accepts and never answers, with a queue of
// 64 spans exported every 10 ms: the exporter is stuck from the first
// batch on and the queue is full within a few deliveries. Every one of 200
// deliveries is still answered 200 before the test's generous deadline
// (spans are dropped, never waited for), serve exits 0 within it (the
// final flush is bounded by tracingShutdownTimeout), and the start-up line
// never prints the endpoint's token. The OTEL_BSP_* variables are read by
// the SDK from the process: not parallel.
func TestAHangingCollectorLeavesDeliveriesUnaffected(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "64")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "16")
	addr, accepted := hangingCollector(t)
	env := hardenEnv(t, map[string]string{
		"PAYLOCK_ADDR": "127.0.0.1:0", "PAYLOCK_ADMIN_ADDR": "off", "PAYLOCK_METRICS_ADDR": "off",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://s3cr3t-user@" + addr + "/?token=s3cr3t-query",
		// Longer than the test: the export never ends by its own timeout.
		"OTEL_EXPORTER_OTLP_TIMEOUT": "600000", "OTEL_TRACES_SAMPLER": "always_on",
	})
	deadline, cancelAll := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelAll()
	pr, pw := io.Pipe()
	logs := &logLines{url: make(chan string, 1)}
	var stderr strings.Builder
	var stderrMu sync.Mutex
	readAll := make(chan struct{})
	go func() {
		defer close(readAll)
		logs.read(io.TeeReader(pr, writerFunc(func(p []byte) (int, error) {
			stderrMu.Lock()
			defer stderrMu.Unlock()
			return stderr.Write(p)
		})))
	}()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	exited := make(chan int, 1)
	go func() {
		code := Main(ctx, []string{"serve"}, envMap(env), nil, io.Discard, pw)
		pw.Close() // every line serve wrote is read before its exit is seen
		exited <- code
	}()
	var base string
	select {
	case base = <-logs.url:
	case code := <-exited:
		t.Fatalf("serve exited %d before listening", code)
	case <-deadline.Done():
		t.Fatal("serve did not start before the deadline")
	}

	const deliveries, senders = 200, 8
	statuses := make(chan int, deliveries)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < deliveries; i += senders {
				res, err := http.DefaultClient.Do(signedPayment(t, base, fmt.Sprintf("tx-hang-%d", i)).WithContext(deadline))
				if err != nil {
					statuses <- 0
					continue
				}
				res.Body.Close()
				statuses <- res.StatusCode
			}
		}()
	}
	wg.Wait()
	close(statuses)
	answered := 0
	for st := range statuses {
		if st == http.StatusOK {
			answered++
		}
	}
	if answered != deliveries {
		t.Fatalf("%d of %d deliveries answered 200 before the deadline while the collector hangs", answered, deliveries)
	}
	if accepted.Load() == 0 {
		t.Fatal("the exporter never connected to the hanging collector: the test proves nothing")
	}
	stop()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("serve exited %d", code)
		}
	case <-deadline.Done():
		t.Fatal("serve's shutdown did not end before the deadline: the final flush waits for the hanging collector")
	}
	<-readAll
	stderrMu.Lock()
	defer stderrMu.Unlock()
	if strings.Contains(stderr.String(), "s3cr3t") {
		t.Fatalf("serve printed the endpoint's secrets:\n%s", stderr.String())
	}
	if logs.find("tracing: flushing the last spans failed") == nil {
		t.Errorf("no line says the final flush was cut short")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
