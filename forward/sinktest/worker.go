package sinktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// destination is the name the table's worker knows the harness's URL by,
// and the source of its payments.
const destination = "sinktest"

// worker is a forward worker on River over a schema of the test's own,
// forwarding to one harness.
type worker struct {
	st *store.Store
	// spans records the worker's spans (River's and the attempts').
	spans *tracetest.SpanRecorder

	mu     sync.Mutex
	events []forward.Event
}

func (w *worker) observe(ev forward.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, ev)
}

// outcomes returns the outcomes of webhook-id id's attempts, in order.
func (w *worker) outcomes(id string) []forward.Outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []forward.Outcome
	for _, ev := range w.events {
		if ev.WebhookID == id {
			out = append(out, ev.Outcome)
		}
	}
	return out
}

// maxAttempts is the attempts of the table's forward jobs.
const maxAttempts = 5

// startWorker migrates a schema, opens a store on it and works its forward
// queue with short timings until the test ends. The worker signs with
// Secret when sign is true, and has no secret otherwise.
func startWorker(t *testing.T, h Harness, sign bool) *worker {
	t.Helper()
	ctx := context.Background()
	dsn, _ := paylocktest.MigratedSchema(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	st := paylocktest.OpenStore(t, store.Config{URL: dsn, ForwardMaxAttempts: maxAttempts, TracerProvider: tp})
	w := &worker{st: st, spans: spans}
	quiet := slog.New(slog.DiscardHandler)
	cfg := forward.Config{Destinations: forward.Destinations{destination: h.URL},
		TLS: h.TLS, Timeout: 5 * time.Second, Backoff: func(int) time.Duration { return 20 * time.Millisecond },
		Logger: quiet, Observe: w.observe, TracerProvider: tp, Propagator: propagation.TraceContext{}}
	if sign {
		cfg.Secret = secret(t)
	}
	fw, err := forward.New(cfg, st.Payments())
	if err != nil {
		t.Fatalf("forward.New with destination %s: %v", forward.Redact(h.URL), err)
	}
	t.Cleanup(func() { _ = fw.Close() })
	rcfg := &river.Config{Logger: quiet, FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond}
	if err := fw.AddTo(rcfg); err != nil {
		t.Fatal(err)
	}
	stop, err := st.StartJobs(ctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = stop(sctx)
	})
	return w
}

// finished waits until the forward job of transaction tx is finished
// (completed, cancelled or discarded) and returns it.
func (w *worker) finished(t *testing.T, tx string) store.ForwardJob {
	t.Helper()
	var job store.ForwardJob
	testkit.Eventually(t, 30*time.Second, "the forward job of "+tx+" finished", func(ctx context.Context) error {
		jobs, err := w.st.Outbox().PaymentForwards(ctx, destination, tx)
		if err != nil {
			return err
		}
		if len(jobs) != 1 || jobs[0].FinalizedAt.IsZero() {
			return fmt.Errorf("%+v", jobs)
		}
		job = jobs[0]
		return nil
	})
	return job
}

// workerCase is one row of the worker's table.
type workerCase struct {
	name      string
	refuse    int  // refusals for now before the destination takes it
	permanent bool // the destination refuses it for good
	outcomes  []forward.Outcome
	state     string // the job's state at the end
}

// workerCases are the rows for a sink with caps: the same for every sink,
// then the one of PermanentRefusals or of its absence.
func workerCases(caps forward.Capabilities) []workerCase {
	cases := []workerCase{
		{name: "a recorded payment is delivered once",
			outcomes: []forward.Outcome{forward.OutcomeDelivered}, state: "completed"},
		{name: "after refusals it is delivered, under one webhook-id on every attempt", refuse: 2,
			outcomes: []forward.Outcome{forward.OutcomeFailedAttempt, forward.OutcomeFailedAttempt, forward.OutcomeDelivered},
			state:    "completed"},
	}
	if caps.PermanentRefusals {
		return append(cases, workerCase{name: "a permanent refusal is not retried", permanent: true,
			outcomes: []forward.Outcome{forward.OutcomeDiscarded}, state: "cancelled"})
	}
	exhausted := slices.Repeat([]forward.Outcome{forward.OutcomeFailedAttempt}, maxAttempts-1)
	return append(cases, workerCase{name: "no refusal is permanent: refused every time, it is tried until its last attempt",
		refuse: maxAttempts, outcomes: append(exhausted, forward.OutcomeDiscarded), state: "discarded"})
}

// runWorker runs the signing case, then workerCases, through one worker,
// one after the other. The worker signs when the sink declares Signs (it
// must: it refuses the destination otherwise), and has no secret when it
// does not, so that the table sees what such a destination gets without
// one.
func runWorker(t *testing.T, h Harness, caps forward.Capabilities) {
	if caps.Signs {
		t.Run("without a secret, the worker refuses it", func(t *testing.T) {
			fw, err := forward.New(forward.Config{Destinations: forward.Destinations{destination: h.URL}, TLS: h.TLS,
				Logger: slog.New(slog.DiscardHandler)}, nil)
			if err == nil {
				_ = fw.Close()
			}
			if !errors.Is(err, forward.ErrConfig) || !strings.Contains(err.Error(), "PAYLOCK_FORWARD_SECRETS") {
				t.Errorf("forward.New without a secret, to a destination whose sink declares Signs: %v; want forward.ErrConfig naming PAYLOCK_FORWARD_SECRETS", err)
			}
		})
	}
	w := startWorker(t, h, caps.Signs)
	if !caps.Signs {
		t.Run("without a secret, it gets unsigned messages", func(t *testing.T) {
			tx := "tx-unsigned"
			w.record(t, tx)
			if job := w.finished(t, tx); job.State != "completed" {
				t.Fatalf("job %s after %d attempts, want completed", job.State, job.Attempt)
			}
			got := byID(h, store.PaymentForwardID(destination, tx))
			if len(got) != 1 || !got[0].Accepted {
				t.Fatalf("the destination received %d messages (%+v), want 1 accepted", len(got), got)
			}
			if sig, ok := got[0].Header[forward.HeaderSignature]; ok {
				t.Errorf("a message from a worker without a secret arrived with webhook-signature %q", sig)
			}
		})
	}
	for i, c := range workerCases(caps) {
		t.Run(c.name, func(t *testing.T) {
			tx := "tx-" + strconv.Itoa(i)
			if c.refuse > 0 {
				h.Refuse(c.refuse)
			}
			if c.permanent {
				h.RefusePermanently()
			}
			w.record(t, tx)
			job := w.finished(t, tx)
			id := store.PaymentForwardID(destination, tx)
			if job.State != c.state || job.Attempt != len(c.outcomes) {
				t.Errorf("job %s after %d attempts, want %s after %d", job.State, job.Attempt, c.state, len(c.outcomes))
			}
			if got := w.outcomes(id); !slices.Equal(got, c.outcomes) {
				t.Errorf("outcomes %v, want %v", got, c.outcomes)
			}
			checkAttempts(t, h, id, tx, len(c.outcomes), c.state == "completed", caps.Signs)
			checkTraced(t, w.spans, byID(h, id))
		})
	}
}

// record records a payment of transaction tx, forwarded to the harness.
func (w *worker) record(t *testing.T, tx string) {
	t.Helper()
	p := store.Payment{Source: destination, TransactionID: tx, Amount: 1999, Currency: "EUR",
		EventID: "evt_" + tx, Payload: []byte(`{"id":"` + tx + `"}`)}
	if _, err := w.st.Payments().RecordPaymentForwarded(context.Background(), p, destination); err != nil {
		t.Fatal(err)
	}
}

// checkAttempts checks what the destination received under webhook-id id:
// one message per attempt, the same body every time, each verifying
// (signed) or carrying no signature (not signed), the last one accepted
// when the job completed.
func checkAttempts(t *testing.T, h Harness, id, tx string, attempts int, delivered, signed bool) {
	t.Helper()
	got := byID(h, id)
	if len(got) != attempts {
		t.Fatalf("the destination received %d messages under webhook-id %s, want %d (one per attempt)", len(got), id, attempts)
	}
	for i, r := range got {
		what := fmt.Sprintf("attempt %d", i+1)
		if signed {
			if err := verify(t, r); err != nil {
				t.Errorf("%s does not verify: %v", what, err)
			}
		} else if sig, ok := r.Header[forward.HeaderSignature]; ok {
			t.Errorf("%s of a worker without a secret arrived with webhook-signature %q", what, sig)
		}
		if !bytes.Equal(r.Body, got[0].Body) {
			t.Errorf("%s's body differs from the first's", what)
		}
		if ts, err := strconv.ParseInt(r.Header[forward.HeaderTimestamp], 10, 64); err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
			t.Errorf("%s: webhook-timestamp %q, want this attempt's Unix time", what, r.Header[forward.HeaderTimestamp])
		}
		if h.Keyed && r.Key != destination+":"+tx {
			t.Errorf("%s: key %q, want %q", what, r.Key, destination+":"+tx)
		}
		if last := i == len(got)-1; r.Accepted != (last && delivered) {
			t.Errorf("%s: accepted %v", what, r.Accepted)
		}
	}
}

// checkTraced checks that each message received carries the trace context
// of its attempt's span (forward.SpanName), a child of River's span of the
// job, with the attempt's number.
func checkTraced(t *testing.T, spans *tracetest.SpanRecorder, got []Received) {
	t.Helper()
	ended := spans.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		byID[s.SpanContext().SpanID()] = s
	}
	for i, r := range got {
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
			propagation.MapCarrier{"traceparent": r.Header["traceparent"]}))
		if !sc.IsValid() {
			t.Errorf("attempt %d arrived without a valid traceparent (%q): the sink must send every header of the message", i+1, r.Header["traceparent"])
			continue
		}
		s, ok := byID[sc.SpanID()]
		if !ok || !strings.HasPrefix(s.Name(), forward.SpanName+" ") {
			t.Errorf("attempt %d's traceparent names no %s span", i+1, forward.SpanName)
			continue
		}
		if s.SpanContext().TraceID() != sc.TraceID() {
			t.Errorf("attempt %d's traceparent is in trace %v, its span in %v", i+1, sc.TraceID(), s.SpanContext().TraceID())
		}
		if p, ok := byID[s.Parent().SpanID()]; !ok || p.Name() != "river.work/"+(store.ForwardArgs{}).Kind() {
			t.Errorf("attempt %d's span is not a child of River's span of the job", i+1)
		}
		if !slices.Contains(s.Attributes(), forward.AttrAttempt.Int(i+1)) {
			t.Errorf("attempt %d's span has attributes %v, want %s=%d", i+1, s.Attributes(), forward.AttrAttempt, i+1)
		}
	}
}
