package forward_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

var forwardSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("forward-test-secret-0123456789"))

// receiver is the team's service (testkit's, internal/fakereceiver): it
// verifies each forward with forwardSecret and answers the scripted
// statuses first, 2xx after (answers: none, 2xx from the first).
func receiver(t *testing.T, answers ...int) *testkit.Receiver {
	t.Helper()
	return testkit.StartReceiver(t, testkit.ReceiverConfig{
		Verifier:    testkit.Verifier(t, signature.SchemeStandard, forwardSecret),
		Answers:     answers,
		OtherEvents: true, // disbursement status changes too
	})
}

// outcomes collects what the worker reports.
type outcomes struct {
	mu  sync.Mutex
	all []forward.Event
}

func (o *outcomes) observe(ev forward.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.all = append(o.all, ev)
}

func (o *outcomes) list() []forward.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]forward.Outcome, len(o.all))
	for i, ev := range o.all {
		out[i] = ev.Outcome
	}
	return out
}

type bundle struct {
	store    *store.Store
	outcomes *outcomes
}

// setup migrates a schema of the test's own, opens a store on it whose
// forward jobs get maxAttempts, and starts a River client working the
// forward queue with short timings, forwarding to url as destination
// "default".
func setup(t *testing.T, maxAttempts int, url string) *bundle {
	t.Helper()
	return setupTraced(t, maxAttempts, url, nil)
}

// setupTraced is setup whose store and worker make their spans in spans
// (nil: the global provider's), the worker sending traceparent.
func setupTraced(t *testing.T, maxAttempts int, url string, spans *testkit.Spans) *bundle {
	t.Helper()
	return setupWith(t, maxAttempts, url, spans, nil)
}

// setupWith is setupTraced with edit, when not nil, changing the worker's
// configuration first.
func setupWith(t *testing.T, maxAttempts int, url string, spans *testkit.Spans, edit func(*forward.Config)) *bundle {
	t.Helper()
	dsn, _ := paylocktest.MigratedSchema(t)
	scfg := store.Config{URL: dsn, ForwardMaxAttempts: maxAttempts}
	var tp trace.TracerProvider
	var prop propagation.TextMapPropagator
	if spans != nil {
		tp, prop = spans.Provider, propagation.TraceContext{}
		scfg.TracerProvider = tp
	}
	st := paylocktest.OpenStore(t, scfg)
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, forwardSecret)
	if err != nil {
		t.Fatal(err)
	}
	o := &outcomes{}
	fcfg := forward.Config{
		Secret:         secrets[0],
		Destinations:   forward.Destinations{forward.DefaultDestination: url},
		Timeout:        300 * time.Millisecond,
		Backoff:        func(int) time.Duration { return 20 * time.Millisecond },
		Logger:         slog.New(slog.DiscardHandler),
		Observe:        o.observe,
		TracerProvider: tp,
		Propagator:     prop,
	}
	if edit != nil {
		edit(&fcfg)
	}
	if sh, ok := fcfg.Health.(*storeHealth); ok {
		sh.HealthStore = st.Outbox() // the test's own store
	}
	w, err := forward.New(fcfg, st.Payments())
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, st, w)
	return &bundle{store: st, outcomes: o}
}

// runWorker runs w in a River client of its own on st (a replica's), as
// "paylock worker" does, with short fetch intervals, until the test ends;
// w is closed after River stops (cleanups run last first).
func runWorker(t *testing.T, st *store.Store, w *forward.Worker) {
	t.Helper()
	t.Cleanup(func() { _ = w.Close() })
	rcfg := &river.Config{Logger: slog.New(slog.DiscardHandler), FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond}
	if err := w.AddTo(rcfg); err != nil {
		t.Fatal(err)
	}
	stop, err := st.StartJobs(context.Background(), rcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = stop(ctx)
	})
}

// storeHealth, as an edit's Config.Health, is the test's store's
// (setupWith fills it in).
type storeHealth struct{ forward.HealthStore }

func payment(id string) store.Payment {
	return store.Payment{
		Source:        "acme",
		TransactionID: id,
		Amount:        1999,
		Currency:      "EUR",
		Payload:       []byte(`{"id":"` + id + `","amount":19.99,"nested":{"k":[1,2]}}`),
		EventID:       "evt_" + id,
	}
}

func TestARecordedPaymentIsForwardedSignedWithTheSameIDOnEveryAttempt(t *testing.T) {
	t.Parallel()
	rc := receiver(t, 500, 500, 200)
	b := setup(t, 25, rc.URL+"/paylock")
	ctx := context.Background()

	rec, err := b.store.Payments().RecordPaymentForwarded(ctx, payment("tx-fwd-1"), forward.DefaultDestination)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "the delivered outcome", func() bool {
		o := b.outcomes.list()
		return len(o) > 0 && o[len(o)-1] == forward.OutcomeDelivered
	})
	time.Sleep(200 * time.Millisecond) // nothing more may come
	got := rc.Attempts()
	if len(got) != 3 {
		t.Fatalf("%d deliveries, want 3 (500, 500, 200)", len(got))
	}
	if want := []forward.Outcome{forward.OutcomeFailedAttempt, forward.OutcomeFailedAttempt, forward.OutcomeDelivered}; !reflect.DeepEqual(b.outcomes.list(), want) {
		t.Fatalf("outcomes %v, want %v", b.outcomes.list(), want)
	}
	wantID := store.PaymentForwardID("acme", "tx-fwd-1")
	for i, d := range got {
		if d.Err != nil {
			t.Errorf("delivery %d does not verify: %v", i, d.Err)
		}
		if id := d.Header.Get("webhook-id"); id != wantID {
			t.Errorf("delivery %d: webhook-id %q, want %q", i, id, wantID)
		}
		if string(d.Body) != string(got[0].Body) {
			t.Errorf("delivery %d's body differs from the first", i)
		}
		if ct := d.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("delivery %d: Content-Type %q", i, ct)
		}
	}

	var msg struct {
		Type string `json:"type"`
		Data struct {
			Source        string          `json:"source"`
			TransactionID string          `json:"transaction_id"`
			Amount        json.Number     `json:"amount"`
			Currency      string          `json:"currency"`
			EventID       string          `json:"event_id"`
			ReceivedAt    string          `json:"received_at"`
			Payload       json.RawMessage `json:"payload"`
		} `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(got[0].Body))
	dec.UseNumber()
	if err := dec.Decode(&msg); err != nil {
		t.Fatalf("body %s: %v", got[0].Body, err)
	}
	d := msg.Data
	if msg.Type != "payment.recorded" || d.Source != "acme" || d.TransactionID != "tx-fwd-1" || d.Amount.String() != "1999" ||
		d.Currency != "EUR" || d.EventID != "evt_tx-fwd-1" {
		t.Fatalf("body %s", got[0].Body)
	}
	at, err := time.Parse(time.RFC3339, d.ReceivedAt)
	if err != nil || !at.Equal(rec.ReceivedAt) {
		t.Errorf("received_at %q (%v), want %v in RFC 3339", d.ReceivedAt, err, rec.ReceivedAt)
	}
	var payload, stored any
	_ = json.Unmarshal(d.Payload, &payload)
	_ = json.Unmarshal(payment("tx-fwd-1").Payload, &stored)
	if !reflect.DeepEqual(payload, stored) {
		t.Errorf("payload %s, want the stored body %s", d.Payload, payment("tx-fwd-1").Payload)
	}
}

func TestAReceiverDownAtFirstGetsTheForwardWhenBack(t *testing.T) {
	t.Parallel()
	// A port nobody listens on yet: connections are refused.
	ln := testkit.Listen(t)
	addr := ln.Addr().String()
	ln.Close()
	b := setup(t, 25, "http://"+addr+"/paylock")
	ctx := context.Background()
	if _, err := b.store.Payments().RecordPaymentForwarded(ctx, payment("tx-down"), forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "two failed attempts", func() bool { return len(b.outcomes.list()) >= 2 })

	rc := receiver(t) // served on a port of its own too; the worker knows addr
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		testkit.Missing(t, "the port was taken meanwhile: %v", err)
	}
	srv := httptest.NewUnstartedServer(rc)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	testkit.WaitFor(t, 15*time.Second, "the delivery", func() bool { return len(rc.Attempts()) == 1 })
	testkit.WaitFor(t, 15*time.Second, "the delivered outcome", func() bool {
		o := b.outcomes.list()
		return o[len(o)-1] == forward.OutcomeDelivered
	})
	if err := rc.Attempts()[0].Err; err != nil {
		t.Fatalf("the delivery does not verify: %v", err)
	}
}

func TestASlowReceiverTimesOutAndIsTriedAgain(t *testing.T) {
	t.Parallel()
	rc := receiver(t)
	rc.DelayNext(time.Second) // past the 300ms timeout, once
	b := setup(t, 25, rc.URL)
	if _, err := b.store.Payments().RecordPaymentForwarded(context.Background(), payment("tx-slow"), forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "the delivered outcome", func() bool {
		o := b.outcomes.list()
		return len(o) > 0 && o[len(o)-1] == forward.OutcomeDelivered
	})
	if o := b.outcomes.list(); o[0] != forward.OutcomeFailedAttempt {
		t.Fatalf("outcomes %v: the slow answer should have failed the first attempt", o)
	}
	got := rc.Attempts()
	if len(got) != 2 || got[0].Header.Get("webhook-id") != got[1].Header.Get("webhook-id") {
		t.Fatalf("%d deliveries; want 2 with one webhook-id", len(got))
	}
}

func TestAForwardThatFailsEveryAttemptIsDiscardedAndCanBeRetried(t *testing.T) {
	t.Parallel()
	rc := receiver(t, 502, 502, 200)
	b := setup(t, 2, rc.URL)
	ctx := context.Background()
	if _, err := b.store.Payments().RecordPaymentForwarded(ctx, payment("tx-discard"), forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	var jobs []store.ForwardJob
	testkit.WaitFor(t, 15*time.Second, "the discarded job", func() bool {
		var err error
		jobs, err = b.store.Outbox().ForwardJobs(ctx, store.ForwardJobFilter{GivenUp: true})
		return err == nil && len(jobs) == 1
	})
	if want := []forward.Outcome{forward.OutcomeFailedAttempt, forward.OutcomeDiscarded}; !reflect.DeepEqual(b.outcomes.list(), want) {
		t.Fatalf("outcomes %v, want %v", b.outcomes.list(), want)
	}
	j := jobs[0]
	if j.State != "discarded" || j.Attempt != 2 || j.LastError == "" || j.FinalizedAt.IsZero() {
		t.Fatalf("discarded job %+v", j)
	}

	j, err := b.store.Outbox().RetryForward(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != "available" || j.MaxAttempts != 3 {
		t.Fatalf("retried job %+v: want available with one more attempt", j)
	}
	testkit.WaitFor(t, 15*time.Second, "the delivered outcome", func() bool {
		o := b.outcomes.list()
		return o[len(o)-1] == forward.OutcomeDelivered
	})
	if got := rc.Attempts(); len(got) != 3 || got[2].Header.Get("webhook-id") != got[0].Header.Get("webhook-id") {
		t.Fatalf("%d deliveries, want 3 with one webhook-id", len(got))
	}
	if jobs, _ := b.store.Outbox().ForwardJobs(ctx, store.ForwardJobFilter{GivenUp: true}); len(jobs) != 0 {
		t.Fatalf("given-up jobs after the retry: %+v", jobs)
	}
}

func TestARetryAfterPostponesTheNextAttempt(t *testing.T) {
	t.Parallel()
	rc := receiver(t, http.StatusTooManyRequests, 200) // Retry-After: 1
	b := setup(t, 25, rc.URL)
	start := time.Now()
	if _, err := b.store.Payments().RecordPaymentForwarded(context.Background(), payment("tx-429"), forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "two deliveries", func() bool { return len(rc.Attempts()) == 2 })
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("the second attempt came after %v, before the 1s Retry-After", waited)
	}
}

func TestDisbursementStatusChangesAreForwarded(t *testing.T) {
	t.Parallel()
	rc := receiver(t)
	b := setup(t, 25, rc.URL)
	ctx := context.Background()
	b.store.Disbursements().OnStatusChange(b.store.Outbox().ForwardStatusHook(forward.DefaultDestination))

	d, err := b.store.Disbursements().AcceptDisbursement(ctx, store.Disbursement{LoanID: "L-7", Tranche: 1, Amount: 500000, Currency: "EUR", EventID: "loan-evt-7"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.Disbursements().MarkSent(ctx, d.ID, "po_7", store.StatusSent); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.store.Disbursements().ApplyPayoutStatus(ctx, "pevt_7", "po_7", store.StatusPaid, ""); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "two deliveries", func() bool { return len(rc.Attempts()) == 2 })
	types := map[string]map[string]any{}
	for _, dl := range rc.Attempts() {
		if dl.Err != nil {
			t.Errorf("delivery does not verify: %v", dl.Err)
		}
		var msg struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(dl.Body, &msg); err != nil {
			t.Fatal(err)
		}
		types[msg.Type] = msg.Data
		status := msg.Data["status"].(string)
		if id := dl.Header.Get("webhook-id"); id != store.DisbursementForwardID("L-7", 1, store.DisbursementStatus(status)) {
			t.Errorf("%s: webhook-id %q", msg.Type, id)
		}
	}
	for _, status := range []string{"sent", "paid"} {
		data, ok := types["disbursement."+status]
		if !ok {
			t.Fatalf("no disbursement.%s forward among %v", status, types)
		}
		if data["loan_id"] != "L-7" || data["tranche"] != float64(1) || data["amount"] != float64(500000) || data["currency"] != "EUR" ||
			data["status"] != status || data["provider_ref"] != "po_7" || data["idempotency_key"] != "disburse-L-7-1" {
			t.Errorf("disbursement.%s data %v", status, data)
		}
	}
}

func TestNewRefusesAMissingSecret(t *testing.T) {
	t.Parallel()
	if _, err := forward.New(forward.Config{}, nil); err == nil {
		t.Fatal("a worker without a secret started")
	}
}

func TestAJobInsertedWithAURLIsStillForwardedThere(t *testing.T) {
	t.Parallel()
	rc := receiver(t)
	other := receiver(t)
	b := setup(t, 25, other.URL) // the configured destination is elsewhere
	ctx := context.Background()
	p, err := b.store.Payments().RecordPayment(ctx, payment("tx-legacy"))
	if err != nil {
		t.Fatal(err)
	}
	// A job as paylock inserted them before destinations were named.
	args := store.ForwardArgs{ID: store.PaymentForwardID(p.Source, p.TransactionID), Type: store.ForwardPaymentRecorded,
		URL: rc.URL + "/old", Source: p.Source, TransactionID: p.TransactionID}
	if _, err := b.store.JobClient().Insert(ctx, args, nil); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "the delivered outcome", func() bool {
		o := b.outcomes.list()
		return len(o) > 0 && o[len(o)-1] == forward.OutcomeDelivered
	})
	// Every attempt went to the job's own URL (more than one when an
	// attempt outlived the worker's 300ms timeout on a loaded machine),
	// none to the configured destination.
	got := rc.Attempts()
	if len(got) == 0 {
		t.Fatal("no delivery at the job's own URL")
	}
	for _, a := range got {
		if a.Err != nil || a.Header.Get("webhook-id") != args.ID {
			t.Fatalf("deliveries at the job's own URL: %+v", got)
		}
	}
	if n := len(other.Attempts()); n != 0 {
		t.Errorf("%d deliveries at the configured destination; want none", n)
	}
	b.outcomes.mu.Lock()
	defer b.outcomes.mu.Unlock()
	for _, ev := range b.outcomes.all {
		if ev.Destination != forward.LegacyDestination {
			t.Errorf("an attempt's destination %q, want %q", ev.Destination, forward.LegacyDestination)
		}
	}
}

func TestAJobNamingAnUnknownDestinationFailsItsAttemptAndIsTriedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, 2, receiver(t).URL)
	ctx := context.Background()
	if _, err := b.store.Payments().RecordPaymentForwarded(ctx, payment("tx-nowhere"), "gone"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "the discarded outcome", func() bool {
		o := b.outcomes.list()
		return len(o) > 0 && o[len(o)-1] == forward.OutcomeDiscarded
	})
	b.outcomes.mu.Lock()
	defer b.outcomes.mu.Unlock()
	if len(b.outcomes.all) != 2 || !errors.Is(b.outcomes.all[0].Err, forward.ErrNoDestination) || b.outcomes.all[0].Destination != "gone" {
		t.Fatalf("attempts %+v; want 2 failing with ErrNoDestination, naming \"gone\"", b.outcomes.all)
	}
}

func TestNewRefusesADestinationNoSinkTakes(t *testing.T) {
	t.Parallel()
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, forwardSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"ftp://user:hunter2@orders.internal/x", "orders.internal/paylock", "https://user:hunter2@/no-host"} {
		_, err := forward.New(forward.Config{Secret: secrets[0], Destinations: forward.Destinations{"acme": url}}, nil)
		if !errors.Is(err, forward.ErrConfig) || !strings.Contains(err.Error(), `"acme"`) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("destination %q: %v; want ErrConfig naming acme, without the password", url, err)
		}
	}
}
