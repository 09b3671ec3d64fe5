package handler_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// tracedReplica starts a replica whose handler, lock and store record
// their spans in the returned recorder.
func tracedReplica(t *testing.T, o paylocktest.Options) (*paylocktest.Replica, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	o.Config.TracerProvider = tp
	o.Config.Propagator = propagation.TraceContext{}
	tweak := o.Store
	o.Store = func(c *store.Config) {
		if tweak != nil {
			tweak(c)
		}
		c.TracerProvider = tp
	}
	o.Lock = append(o.Lock, lock.WithTracerProvider(tp))
	return startReplica(t, o), rec
}

// delivery is one traced delivery's spans.
type delivery struct {
	t      *testing.T
	spans  []sdktrace.ReadOnlySpan
	server sdktrace.ReadOnlySpan
	remote trace.SpanContext // the caller's span, traceparent's
}

// tracedPost posts body to path with a traceparent of a fresh trace and h's
// headers, and returns the answer and the trace's spans once the delivery's
// server span has ended.
func tracedPost(t *testing.T, r *paylocktest.Replica, rec *tracetest.SpanRecorder, path string, h http.Header, body []byte) (answer, *delivery) {
	t.Helper()
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	req, err := http.NewRequest(http.MethodPost, r.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	propagation.TraceContext{}.Inject(trace.ContextWithRemoteSpanContext(context.Background(), remote), propagation.HeaderCarrier(req.Header))
	a := do(t, req)
	d := &delivery{t: t, remote: remote}
	testkit.WaitFor(t, 5*time.Second, "the delivery's server span", func() bool {
		// The server span is a root linked to the caller's span; the
		// delivery's spans are those of its trace.
		ended := rec.Ended()
		for _, sp := range ended {
			if sp.SpanKind() == trace.SpanKindServer && slices.ContainsFunc(sp.Links(), func(l sdktrace.Link) bool {
				return l.SpanContext.SpanID() == remote.SpanID()
			}) {
				d.server = sp
			}
		}
		if d.server == nil {
			return false
		}
		d.spans = d.spans[:0]
		for _, sp := range ended {
			if sp.SpanContext().TraceID() == d.server.SpanContext().TraceID() {
				d.spans = append(d.spans, sp)
			}
		}
		return true
	})
	return a, d
}

// children are the spans whose parent is p, by name.
func (d *delivery) children(p sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range d.spans {
		if sp.Parent().SpanID() == p.SpanContext().SpanID() {
			out = append(out, sp)
		}
	}
	return out
}

// child is p's child span called name, failing the test without one;
// with several, the first to start.
func (d *delivery) child(p sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	d.t.Helper()
	var found sdktrace.ReadOnlySpan
	for _, sp := range d.children(p) {
		if sp.Name() == name && (found == nil || sp.StartTime().Before(found.StartTime())) {
			found = sp
		}
	}
	if found == nil {
		d.t.Fatalf("%s has no child %q:\n%s", p.Name(), name, d)
	}
	return found
}

// names are the names of p's children, in the order they started.
func (d *delivery) names(p sdktrace.ReadOnlySpan) string {
	var out []string
	kids := d.children(p)
	for range kids {
		first := -1
		for i, sp := range kids {
			if sp != nil && (first < 0 || sp.StartTime().Before(kids[first].StartTime())) {
				first = i
			}
		}
		out = append(out, kids[first].Name())
		kids[first] = nil
	}
	return strings.Join(out, ", ")
}

// String draws the tree, for failure messages.
func (d *delivery) String() string {
	var b strings.Builder
	var walk func(p sdktrace.ReadOnlySpan, depth int)
	walk = func(p sdktrace.ReadOnlySpan, depth int) {
		fmt.Fprintf(&b, "%s%s %v\n", strings.Repeat("  ", depth), p.Name(), p.Attributes())
		for _, c := range d.children(p) {
			walk(c, depth+1)
		}
	}
	if d.server != nil {
		walk(d.server, 0)
	}
	return b.String()
}

// attr is span's attribute k as text, "" without it.
func attr(sp sdktrace.ReadOnlySpan, k string) string {
	for _, kv := range sp.Attributes() {
		if kv.Key == attribute.Key(k) {
			return kv.Value.Emit()
		}
	}
	return ""
}

func (d *delivery) want(sp sdktrace.ReadOnlySpan, kvs ...string) {
	d.t.Helper()
	for i := 0; i < len(kvs); i += 2 {
		if got := attr(sp, kvs[i]); got != kvs[i+1] {
			d.t.Errorf("%s: %s = %q, want %q\n%s", sp.Name(), kvs[i], got, kvs[i+1], d)
		}
	}
}

// wantServer checks the delivery's server span: the root of a trace of its
// own, linked to (not continuing) the caller's span, whose trace id the
// sender chose; with the attributes an operator filters by.
func (d *delivery) wantServer(status int, outcome, tx string) {
	d.t.Helper()
	if d.server.Parent().IsValid() || d.server.SpanContext().TraceID() == d.remote.TraceID() {
		d.t.Errorf("the server span continues the sender's trace (parent %v), want a root linked to it", d.server.Parent().SpanID())
	}
	if d.server.Name() != "POST /webhooks/payments" {
		d.t.Errorf("server span %q, want POST /webhooks/payments", d.server.Name())
	}
	d.want(d.server, "http.response.status_code", fmt.Sprint(status), "paylock.outcome", outcome,
		"paylock.transaction_id", tx, "paylock.source", "payments", "http.route", "/webhooks/payments")
	if wantErr := status >= 500; (d.server.Status().Code == codes.Error) != wantErr {
		d.t.Errorf("server span status %v for a %d", d.server.Status(), status)
	}
	for _, sp := range d.spans {
		if sp != d.server && !d.has(sp.Parent().SpanID()) {
			d.t.Errorf("span %s is outside the delivery's tree", sp.Name())
		}
	}
}

func (d *delivery) has(id trace.SpanID) bool {
	for _, sp := range d.spans {
		if sp.SpanContext().SpanID() == id {
			return true
		}
	}
	return false
}

func TestSpansOfProcessedDuplicateAndMismatchingDeliveries(t *testing.T) {
	t.Parallel()
	v, secrets := verifier(t, signature.SchemeStandard, testSecret)
	r, rec := tracedReplica(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{handler.PaymentsSource(v)}}})
	body := payJSON("tx-trace-1", 1200, "JPY")
	signed := signature.Sign(signature.SchemeStandard, secrets[0], "msg_trace_1", time.Now(), body)

	a, d := tracedPost(t, r, rec, "/webhooks/payments", signed, body)
	if a.status != http.StatusOK || a.str("result") != "processed" {
		t.Fatalf("first delivery: %d %s", a.status, a.raw)
	}
	d.wantServer(200, "processed", "tx-trace-1")
	if got := d.names(d.server); got != "paylock.signature, paylock.adapt, paylock.lock.obtain, paylock.record, paylock.lock.release" {
		t.Errorf("the delivery's steps: %s\n%s", got, d)
	}
	d.want(d.child(d.server, "paylock.signature"), "paylock.signature.result", "ok", "paylock.signature.secret_index", "0")
	d.want(d.child(d.server, "paylock.adapt"), "paylock.events", "1")
	obtain := d.child(d.server, "paylock.lock.obtain")
	d.want(obtain, "paylock.lock.outcome", "obtained", "paylock.lock.attempts", "1", "paylock.lock.key", r.LockKey("tx-trace-1"))
	if attr(obtain, "paylock.lock.wait_ms") == "" || attr(d.server, "paylock.lock.wait_ms") == "" {
		t.Errorf("no lock wait on the obtain or the delivery span\n%s", d)
	}
	record := d.child(d.server, "paylock.record")
	d.want(record, "paylock.result", "processed", "paylock.transaction_id", "tx-trace-1")
	insert := d.child(record, "paylock.store.record_payment")
	d.want(insert, "paylock.result", "recorded", "paylock.source", "payments")
	if len(d.children(insert)) == 0 {
		t.Errorf("no pgx span under the insert\n%s", d)
	}
	d.want(d.child(d.server, "paylock.lock.release"), "paylock.lock.op", "finish", "paylock.lock.outcome", "released")

	// The same delivery again: the finished marker sends it to a read.
	a, d = tracedPost(t, r, rec, "/webhooks/payments", signed, body)
	if a.str("result") != "duplicate" {
		t.Fatalf("second delivery: %d %s", a.status, a.raw)
	}
	d.wantServer(200, "duplicate", "tx-trace-1")
	if got := d.names(d.server); got != "paylock.signature, paylock.adapt, paylock.lock.obtain, paylock.confirm" {
		t.Errorf("the duplicate's steps: %s\n%s", got, d)
	}
	d.want(d.child(d.server, "paylock.lock.obtain"), "paylock.lock.outcome", "finished")
	confirm := d.child(d.server, "paylock.confirm")
	d.want(confirm, "paylock.result", "duplicate")
	if len(d.children(confirm)) == 0 {
		t.Errorf("no pgx span under the confirming read\n%s", d)
	}

	// The same transaction id with another amount: 422, a mismatch.
	other := payJSON("tx-trace-1", 9900, "JPY")
	a, d = tracedPost(t, r, rec, "/webhooks/payments", signature.Sign(signature.SchemeStandard, secrets[0], "msg_trace_2", time.Now(), other), other)
	wantProblem(t, a, http.StatusUnprocessableEntity)
	d.wantServer(422, "mismatch", "tx-trace-1")
	d.want(d.child(d.server, "paylock.confirm"), "paylock.result", "mismatch")
}

func TestSpansOfA409WhileAnotherDeliveryHoldsTheLock(t *testing.T) {
	t.Parallel()
	r, rec := tracedReplica(t, paylocktest.Options{Config: handler.Config{LockWait: 50 * time.Millisecond}})
	held, err := lock.New(r.Redis).Obtain(context.Background(), r.LockKey("tx-trace-409"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())

	a, d := tracedPost(t, r, rec, "/webhooks/payments", nil, payJSON("tx-trace-409", 100, "JPY"))
	wantProblem(t, a, http.StatusConflict)
	d.wantServer(409, "error", "tx-trace-409")
	if got := d.names(d.server); got != "paylock.adapt, paylock.lock.obtain, paylock.confirm, paylock.lock.obtain" {
		t.Errorf("the 409's steps: %s\n%s", got, d)
	}
	obtain := d.child(d.server, "paylock.lock.obtain")
	d.want(obtain, "paylock.lock.outcome", "busy")
	if attr(obtain, "paylock.lock.attempts") == "1" {
		t.Errorf("the waiting obtain made one attempt\n%s", d)
	}
	d.want(d.child(d.server, "paylock.confirm"), "paylock.result", "not_found")
}

func TestSpansOfA503WhenPostgresIsDown(t *testing.T) {
	t.Parallel()
	dsn, _ := paylocktest.MigratedSchema(t)
	pg := proxy(t, hostOf(t, dsn))
	r, rec := tracedReplica(t, paylocktest.Options{DSN: testkit.WithHost(t, dsn, pg.Addr())})
	pg.Cut()
	a, d := tracedPost(t, r, rec, "/webhooks/payments", nil, payJSON("tx-trace-503", 100, "JPY"))
	wantProblem(t, a, http.StatusServiceUnavailable)
	pg.Restore()
	d.wantServer(503, "error", "tx-trace-503")
	if got := d.names(d.server); got != "paylock.adapt, paylock.lock.obtain, paylock.record, paylock.lock.release" {
		t.Errorf("the 503's steps: %s\n%s", got, d)
	}
	record := d.child(d.server, "paylock.record")
	d.want(record, "paylock.result", "error")
	if record.Status().Code != codes.Error {
		t.Errorf("record span status %v", record.Status())
	}
	d.want(d.child(record, "paylock.store.record_payment"), "paylock.result", "error")
	d.want(d.child(d.server, "paylock.lock.release"), "paylock.lock.op", "release", "paylock.lock.outcome", "released")
}

// TestBatchedRowsStayInTheirOwnDeliverysTrace sends concurrent deliveries
// with natural batching on: however they batch, each payment's record
// span is in its own delivery's tree with the statement's batch size, and
// a multi-row statement's span links every row it carried.
func TestBatchedRowsStayInTheirOwnDeliverysTrace(t *testing.T) {
	t.Parallel()
	r, rec := tracedReplica(t, paylocktest.Options{Store: func(c *store.Config) { c.BatchMax, c.BatchWriters = 64, 1 }})
	const n = 24
	deliveries := make([]*delivery, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			tx := fmt.Sprintf("tx-trace-batch-%d", i)
			a, d := tracedPost(t, r, rec, "/webhooks/payments", nil, payJSON(tx, 100, "JPY"))
			if a.str("result") != "processed" {
				t.Errorf("%s: %d %s", tx, a.status, a.raw)
			}
			deliveries[i] = d
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		byID[sp.SpanContext().SpanID()] = sp
	}
	for i, d := range deliveries {
		insert := d.child(d.child(d.server, "paylock.record"), "paylock.store.record_payment")
		d.want(insert, "paylock.transaction_id", fmt.Sprintf("tx-trace-batch-%d", i))
		size := attr(insert, "paylock.batch.size")
		if size == "" {
			t.Fatalf("no batch size on %s\n%s", insert.Name(), d)
		}
		if size == "1" {
			continue
		}
		if len(insert.Links()) != 1 {
			t.Fatalf("a row of a batch of %s links %d spans, want its batch's", size, len(insert.Links()))
		}
		batch, ok := byID[insert.Links()[0].SpanContext.SpanID()]
		if !ok || batch.Name() != "paylock.store.record_batch" || attr(batch, "paylock.batch.size") != size {
			t.Fatalf("a row's link is not its batch's span: %v", batch)
		}
		var linked bool
		for _, l := range batch.Links() {
			linked = linked || l.SpanContext.SpanID() == insert.SpanContext().SpanID()
		}
		if !linked {
			t.Errorf("the batch span does not link the row of %s", attr(insert, "paylock.transaction_id"))
		}
	}
}

// TestLatencyHistogramsCarryTheTraceIDAsExemplar: a sampled delivery's
// duration is observed with its trace id, which /metrics shows in the
// OpenMetrics format.
func TestLatencyHistogramsCarryTheTraceIDAsExemplar(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics := handler.NewMetrics(reg, 5*time.Second)
	r, rec := tracedReplica(t, paylocktest.Options{Config: handler.Config{Metrics: metrics},
		Lock: []lock.Option{lock.WithObserver(metrics.LockObserver())}})
	a, d := tracedPost(t, r, rec, "/webhooks/payments", nil, payJSON("tx-trace-exemplar", 100, "JPY"))
	if a.status != http.StatusOK {
		t.Fatalf("%d %s", a.status, a.raw)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	page, _ := io.ReadAll(res.Body)
	want := fmt.Sprintf(`# {trace_id="%s"}`, d.server.SpanContext().TraceID())
	var found bool
	for _, line := range strings.Split(string(page), "\n") {
		if strings.HasPrefix(line, "paylock_webhook_request_duration_seconds_bucket") && strings.Contains(line, want) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no duration bucket with the exemplar %s in:\n%s", want, page)
	}
}
