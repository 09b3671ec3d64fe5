package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/paylock/paylock/internal/testkit"
)

// laneArgsOf reads what the express lane's rows of a payment carry, as
// stored: each row's destination, the received_at its args hold, and
// whether the row was written by the transaction that wrote the payment.
func laneArgsOf(t *testing.T, b *bundle, source, txID string) map[string]string {
	t.Helper()
	rows, err := b.admin.Query(context.Background(), `
		SELECT e.destination, convert_from(e.args, 'UTF8')::jsonb #>> '{payment,received_at}', e.xmin::text = p.xmin::text
		FROM forward_express e JOIN payments p ON p.source = e.source AND p.transaction_id = e.transaction_id
		WHERE e.source = $1 AND e.transaction_id = $2`, source, txID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var dest, at string
		var sameTx bool
		if err := rows.Scan(&dest, &at, &sameTx); err != nil {
			t.Fatal(err)
		}
		if !sameTx {
			t.Errorf("%s/%s's row to %s was not written by the transaction that recorded the payment", source, txID, dest)
		}
		out[dest] = at
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// storedAt parses a received_at as a lane row's args hold it.
func storedAt(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("received_at %q: %v", s, err)
	}
	return at
}

// A payment whose messages the express lane takes all is recorded with
// one statement in autocommit, as an unforwarded one is: no BEGIN, no
// COMMIT, the lane's rows inserted by the statement that inserts the
// payment. A redelivery inserts no second row. The claim gives the
// message the received_at the payment was recorded with, and the trace
// context of the delivery.
func TestARecordWhoseMessagesTheLaneTakesIsOneStatement(t *testing.T) {
	t.Parallel()
	for _, mode := range []ExecMode{"", ExecExec, ExecSimpleProtocol} {
		t.Run(cmp.Or(string(mode), "default"), func(t *testing.T) {
			t.Parallel()
			testOneStatementRecord(t, mode)
		})
	}
}

func testOneStatementRecord(t *testing.T, mode ExecMode) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	b := setup(t, func(c *Config) {
		c.ExpressForwards, c.ForwardMaxAttempts, c.TracerProvider, c.ExecMode = true, 7, tp, mode
	})
	b.store.Outbox().Route("stripe", func(context.Context, ForwardArgs, *Payment) ([]ForwardTarget, error) {
		return []ForwardTarget{{Destination: "ledger", Fingerprint: "fp-ledger"}, {Destination: "analytics"}}, nil
	})
	ctx, delivery := tp.Tracer("test").Start(context.Background(), "delivery")
	rec, err := b.store.Payments().RecordPayment(ctx, stripePayment("lane-1"))
	delivery.End()
	if err != nil {
		t.Fatal(err)
	}
	// otelpgx names a statement's span (and its prepare's, once per
	// connection) by its first word.
	var statements []string
	for _, s := range spans.Ended() {
		if s.SpanContext().TraceID() == delivery.SpanContext().TraceID() && s.Name() != "delivery" &&
			s.Name() != "pool.acquire" && !strings.HasPrefix(s.Name(), "paylock.") {
			statements = append(statements, s.Name())
		}
	}
	if len(statements) == 0 || slices.ContainsFunc(statements, func(n string) bool { return n != "WITH" }) {
		t.Fatalf("the record's database spans %q: want its one statement (WITH ins AS (INSERT ...)), no BEGIN, no COMMIT", statements)
	}
	if got := laneArgsOf(t, b, "stripe", "lane-1"); len(got) != 2 || !storedAt(t, got["ledger"]).Equal(rec.ReceivedAt) ||
		!storedAt(t, got["analytics"]).Equal(rec.ReceivedAt) {
		t.Fatalf("lane rows %v: want ledger's and analytics', carrying the received_at recorded, %v", got, rec.ReceivedAt)
	}
	if _, err := b.store.Payments().RecordPayment(context.Background(), stripePayment("lane-1")); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the redelivery: %v, want ErrDuplicate", err)
	}
	if n := b.laneRows(t); n != 2 {
		t.Fatalf("%d lane rows after the redelivery, want the first delivery's 2", n)
	}
	ms := claim(t, b, 10, time.Minute)
	if len(ms) != 2 {
		t.Fatalf("claimed %d messages, want 2", len(ms))
	}
	for _, m := range ms {
		carried, ok := m.Args.CarriedPayment()
		if !ok || !carried.ReceivedAt.Equal(rec.ReceivedAt) || carried.Amount != rec.Amount || string(carried.Payload) == "" {
			t.Errorf("%s's message carries %+v (%v), want the payment as recorded at %v", m.Args.Destination, carried, ok, rec.ReceivedAt)
		}
		if tp := m.Trace["traceparent"]; !strings.Contains(tp, delivery.SpanContext().TraceID().String()) {
			t.Errorf("%s's message has traceparent %q, want one in the delivery's trace", m.Args.Destination, tp)
		}
	}
}

// A batch of payments whose messages the lane takes is one statement in
// autocommit: each new payment's rows inserted with it, none for a
// payment the arbiter held (a redelivery in the batch), none for a
// payment whose route took nothing.
func TestABatchWhoseMessagesTheLaneTakesInsertsThemWithThePayments(t *testing.T) {
	t.Parallel()
	b := expressSetup(t)
	ps := b.store.Payments()
	if ps.batch == nil {
		t.Fatal("the store does not batch: Config.BatchMax must default above 1 for this test")
	}
	ctx := context.Background()
	if _, err := ps.RecordPayment(ctx, stripePayment("lane-b0")); err != nil {
		t.Fatal(err)
	}
	b.store.Outbox().Route("stripe", func(_ context.Context, a ForwardArgs, _ *Payment) ([]ForwardTarget, error) {
		if a.TransactionID == "lane-none" {
			return nil, nil
		}
		return []ForwardTarget{{Destination: "ledger"}, {Destination: "analytics"}}, nil
	})
	var items []batchItem
	for _, id := range []string{"lane-b0", "lane-b1", "lane-b2", "lane-none"} {
		p := stripePayment(id).withSource()
		if id == "lane-b2" {
			p.Account = "acct_eu" // the statement of a batch that names accounts
		}
		if p.lane = ps.outbox.prerouteRecorded(ctx, p); p.lane == nil {
			t.Fatalf("%s: no lane rows made before the record", id)
		}
		items = append(items, batchItem{p: p, fn: ps.outbox.recordHook("stripe", nil)})
	}
	before, _ := batchRows(t, ps)
	outs := recordAsBatch(ps, items)
	if !errors.Is(outs[0].err, ErrDuplicate) {
		t.Errorf("lane-b0 again: %v, want ErrDuplicate", outs[0].err)
	}
	for i, o := range outs[1:] {
		if o.err != nil || o.rec.lane != nil {
			t.Errorf("%s: %v (lane %v), want recorded, no lane on the payment returned", items[i+1].p.TransactionID, o.err, o.rec.lane)
		}
	}
	if statements, _ := batchRows(t, ps); statements != before+1 {
		t.Errorf("%d statements, want one", statements-before)
	}
	if got := laneArgsOf(t, b, "stripe", "lane-b0"); len(got) != 2 {
		t.Errorf("lane-b0's rows %v: want its first record's two only", got)
	}
	for i, id := range []string{"lane-b1", "lane-b2"} {
		at := outs[i+1].rec.ReceivedAt
		if got := laneArgsOf(t, b, "stripe", id); len(got) != 2 || !storedAt(t, got["ledger"]).Equal(at) || !storedAt(t, got["analytics"]).Equal(at) {
			t.Errorf("%s's rows %v: want ledger's and analytics', carrying the received_at recorded, %v", id, got, at)
		}
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM payments WHERE transaction_id = 'lane-b2' AND account = 'acct_eu'`); n != 1 {
		t.Errorf("lane-b2 recorded with its account: %d rows, want 1", n)
	}
	if got := laneArgsOf(t, b, "stripe", "lane-none"); len(got) != 0 {
		t.Errorf("lane-none's rows %v: want none, its route took nothing", got)
	}
	if n := b.laneRows(t); n != 6 {
		t.Errorf("%d lane rows, want 6", n)
	}
}

// A route that needs the payment as recorded (ErrRouteAfterRecord: a
// filter that reads received_at) routes it in the recording transaction,
// where the payment it is given carries its received_at.
func TestARouteThatNeedsThePaymentAsRecordedRoutesInTheTransaction(t *testing.T) {
	t.Parallel()
	b := expressSetup(t)
	var saw []time.Time
	b.store.Outbox().Route("stripe", func(_ context.Context, _ ForwardArgs, p *Payment) ([]ForwardTarget, error) {
		if p.ReceivedAt.IsZero() {
			return nil, ErrRouteAfterRecord
		}
		saw = append(saw, p.ReceivedAt)
		return []ForwardTarget{{Destination: "ledger"}}, nil
	})
	rec, err := b.store.Payments().RecordPayment(context.Background(), stripePayment("lane-after"))
	if err != nil {
		t.Fatal(err)
	}
	if len(saw) != 1 || !saw[0].Equal(rec.ReceivedAt) {
		t.Fatalf("the route saw %v, want the payment once, as recorded at %v", saw, rec.ReceivedAt)
	}
	got := laneArgsOf(t, b, "stripe", "lane-after")
	if at, err := time.Parse(time.RFC3339Nano, got["ledger"]); len(got) != 1 || err != nil || !at.Equal(rec.ReceivedAt) {
		t.Fatalf("lane rows %v: want ledger's, carrying the received_at the payment was recorded with, %v", got, rec.ReceivedAt)
	}
}

// A route that fails records nothing new and tells the sender to retry
// (ErrUnavailable), as it did in the recording transaction; a redelivery
// of a payment already recorded is still answered as a duplicate.
func TestARouteThatFailsRecordsNothingNewAndLeavesDuplicatesAlone(t *testing.T) {
	t.Parallel()
	b := expressSetup(t)
	ctx := context.Background()
	if _, err := b.store.Payments().RecordPayment(ctx, stripePayment("lane-before")); err != nil {
		t.Fatal(err)
	}
	b.store.Outbox().Route("stripe", func(context.Context, ForwardArgs, *Payment) ([]ForwardTarget, error) {
		return nil, errors.New("no routes today")
	})
	if _, err := b.store.Payments().RecordPayment(ctx, stripePayment("lane-fail")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("record with a failing route: %v, want ErrUnavailable", err)
	}
	if _, err := b.store.Payments().Payment(ctx, "stripe", "lane-fail"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the payment whose route failed: %v, want ErrNotFound", err)
	}
	if _, err := b.store.Payments().RecordPayment(ctx, stripePayment("lane-before")); !errors.Is(err, ErrDuplicate) {
		t.Errorf("a redelivery with the route failing: %v, want ErrDuplicate", err)
	}
}

// The statement writes a received_at as encoding/json writes the time
// (time.RFC3339Nano in UTC): what a body rendered after the record would
// say, byte for byte.
func TestTheRecordedReceivedAtIsWrittenAsEncodingJSONWritesIt(t *testing.T) {
	t.Parallel()
	b := expressSetup(t)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		paris = time.FixedZone("CET", 3600)
	}
	for _, at := range []time.Time{
		time.Date(2026, 12, 6, 13, 14, 34, 123456000, time.UTC),
		time.Date(2026, 12, 6, 13, 14, 34, 120000000, time.UTC),
		time.Date(2026, 12, 6, 13, 14, 30, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 100000, time.UTC),
		time.Date(2026, 6, 30, 23, 59, 59, 1000, paris),
		time.Date(2026, 3, 29, 2, 30, 10, 0, paris),
	} {
		var got string
		if err := b.admin.QueryRow(context.Background(), `SELECT `+receivedAtText("$1::timestamptz"), at).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := at.UTC().Format(time.RFC3339Nano); got != want {
			t.Errorf("%v written as %q, want %q", at, got, want)
		}
	}
}

// testRender renders a payment.recorded message as package forward's
// RecordedBody does, in the shape that matters here: the received_at,
// then the payload.
func testRender(a ForwardArgs, p Payment) ([]byte, error) {
	return json.Marshal(struct {
		Type string `json:"type"`
		Data struct {
			TransactionID string          `json:"transaction_id"`
			Amount        int64           `json:"amount"`
			ReceivedAt    string          `json:"received_at"`
			Payload       json.RawMessage `json:"payload"`
		} `json:"data"`
	}{Type: a.Type, Data: struct {
		TransactionID string          `json:"transaction_id"`
		Amount        int64           `json:"amount"`
		ReceivedAt    string          `json:"received_at"`
		Payload       json.RawMessage `json:"payload"`
	}{p.TransactionID, p.Amount, p.ReceivedAt.UTC().Format(time.RFC3339Nano), p.Payload}})
}

// Under a renderer, a payment's lane rows carry the body of its message,
// rendered once before the record, the received_at recorded written in:
// the body the renderer makes of the payment as recorded, byte for byte.
// Their args then carry no payment. A payment too large to carry has no
// body (its message is built when sent, from the payment read).
func TestRenderedLaneRowsCarryTheBodyOfThePaymentAsRecorded(t *testing.T) {
	t.Parallel()
	b := expressSetup(t)
	b.store.Outbox().Route("stripe", func(context.Context, ForwardArgs, *Payment) ([]ForwardTarget, error) {
		return []ForwardTarget{{Destination: "ledger"}, {Destination: "analytics"}}, nil
	})
	var renders atomic.Int32
	b.store.Outbox().Render(func(a ForwardArgs, p Payment) ([]byte, error) {
		renders.Add(1)
		return testRender(a, p)
	})
	ctx := context.Background()
	recs := map[string]Payment{}
	for i := range 20 {
		rec, err := b.store.Payments().RecordPayment(ctx, stripePayment(fmt.Sprintf("body-%02d", i)))
		if err != nil {
			t.Fatal(err)
		}
		recs[rec.TransactionID] = rec
	}
	if renders.Load() != 20 {
		t.Errorf("%d renders, want one per payment (20), whatever its destinations", renders.Load())
	}
	large := stripePayment("body-large")
	large.Payload = []byte(`{"pad":"` + strings.Repeat("x", CarriedPayloadMax) + `"}`)
	if _, err := b.store.Payments().RecordPayment(ctx, large); err != nil {
		t.Fatal(err)
	}
	ms := claim(t, b, 100, time.Minute)
	if len(ms) != 42 {
		t.Fatalf("claimed %d messages, want 42", len(ms))
	}
	for _, m := range ms {
		if m.Args.TransactionID == "body-large" {
			if m.Body != nil {
				t.Errorf("%s's message to %s has a body: want none, its payload is too large to carry", m.Args.TransactionID, m.Args.Destination)
			}
			continue
		}
		rec := recs[m.Args.TransactionID]
		want, err := testRender(m.Args, rec)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Body) != string(want) {
			t.Errorf("%s's message to %s has the body\n%s\nwant\n%s", m.Args.TransactionID, m.Args.Destination, m.Body, want)
		}
		if m.Args.Payment != nil {
			t.Errorf("%s's message to %s carries its payment in its args as well as its body", m.Args.TransactionID, m.Args.Destination)
		}
	}
}

// births collects what a TakeExpress gets.
type births struct {
	mu sync.Mutex
	ms []ExpressMessage
}

func (b *births) take(ms []ExpressMessage) {
	b.mu.Lock()
	b.ms = append(b.ms, ms...)
	b.mu.Unlock()
}

func (b *births) took() []ExpressMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.ms
	b.ms = nil
	return out
}

// A process that takes its lane rows at birth (TakeExpress) gets the
// rows its recording statements insert once they committed, claimed for
// its lease: the messages a claim would return, byte for byte, which no
// claim returns until they are given back. A duplicate gives nothing.
// Without a taker, the rows wait for a claim again.
func TestRowsTakenAtBirthAreTheTakersAlone(t *testing.T) {
	t.Parallel()
	b := expressSetup(t)
	ctx := context.Background()
	got := &births{}
	out := b.store.Outbox()
	out.TakeExpress(time.Minute, got.take)
	for _, render := range []bool{true, false} {
		id := fmt.Sprintf("birth-%v", render)
		out.Render(nil)
		if render {
			out.Render(testRender)
		}
		rec, err := b.store.Payments().RecordPayment(ctx, stripePayment(id))
		if err != nil {
			t.Fatal(err)
		}
		born := got.took()
		if len(born) != 2 {
			t.Fatalf("%s: %d messages taken at birth, want 2 (ledger's, analytics')", id, len(born))
		}
		if ms := claim(t, b, 10, time.Minute); len(ms) != 0 {
			t.Fatalf("%s: a claim got %d messages taken at birth, want none", id, len(ms))
		}
		if _, err := b.store.Payments().RecordPayment(ctx, stripePayment(id)); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("%s again: %v, want ErrDuplicate", id, err)
		}
		if again := got.took(); len(again) != 0 {
			t.Fatalf("%s again: %d messages taken, want none", id, len(again))
		}
		ids := make([]int64, len(born))
		for i, m := range born {
			ids[i] = m.ID
			if m.Claims != 1 || m.Held || m.MaxAttempts != 7 {
				t.Errorf("%s to %s: claims %d, held %v, max attempts %d; want 1, false, 7", id, m.Args.Destination, m.Claims, m.Held, m.MaxAttempts)
			}
			if render {
				want, err := testRender(m.Args, rec)
				if err != nil {
					t.Fatal(err)
				}
				if string(m.Body) != string(want) {
					t.Errorf("%s to %s: body\n%s\nwant\n%s", id, m.Args.Destination, m.Body, want)
				}
			} else if carried, ok := m.Args.CarriedPayment(); !ok || !carried.ReceivedAt.Equal(rec.ReceivedAt) || m.Body != nil {
				t.Errorf("%s to %s carries %+v (%v), body %q: want the payment as recorded at %v, no body", id, m.Args.Destination, carried, ok, m.Body, rec.ReceivedAt)
			}
		}
		if err := out.ReleaseExpress(ctx, ids, 0); err != nil {
			t.Fatal(err)
		}
		claimed := claim(t, b, 10, time.Minute)
		if len(claimed) != 2 {
			t.Fatalf("%s: claimed %d messages once given back, want 2", id, len(claimed))
		}
		for _, c := range claimed {
			i := slices.IndexFunc(born, func(m ExpressMessage) bool { return m.ID == c.ID })
			if i < 0 {
				t.Fatalf("%s: claimed message %d, not one taken at birth", id, c.ID)
			}
			m := born[i]
			if string(c.Body) != string(m.Body) || c.Args.Destination != m.Args.Destination || c.Args.Fingerprint != m.Args.Fingerprint ||
				c.Trace["traceparent"] != m.Trace["traceparent"] || !c.CreatedAt.Equal(m.CreatedAt) {
				t.Errorf("%s to %s: claimed %+v, taken at birth %+v: want the same message", id, m.Args.Destination, c, m)
			}
			if cp, ok := c.Args.CarriedPayment(); ok {
				if mp, _ := m.Args.CarriedPayment(); !cp.ReceivedAt.Equal(mp.ReceivedAt) || string(cp.Payload) != string(mp.Payload) {
					t.Errorf("%s to %s: claimed payment %+v, taken at birth %+v", id, m.Args.Destination, cp, mp)
				}
			}
		}
		claim(t, b, 0, time.Minute, ids...)
	}
	out.TakeExpress(0, nil)
	if _, err := b.store.Payments().RecordPayment(ctx, stripePayment("birth-none")); err != nil {
		t.Fatal(err)
	}
	if born := got.took(); len(born) != 0 {
		t.Fatalf("%d messages taken with no taker, want none", len(born))
	}
	if ms := claim(t, b, 10, time.Minute); len(ms) != 2 {
		t.Fatalf("claimed %d messages with no taker, want 2", len(ms))
	}
}
