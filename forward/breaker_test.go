package forward_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/store"
)

// opsEvents returns the operator events the receiver processed, as
// "type>destination".
func opsEvents(r *testkit.Receiver) []string {
	var out []string
	for _, a := range r.Attempts() {
		if a.Status < 200 || a.Status > 299 {
			continue
		}
		var m struct {
			Type string                       `json:"type"`
			Data store.ForwardedOperatorEvent `json:"data"`
		}
		if json.Unmarshal(a.Body, &m) == nil {
			out = append(out, m.Type+">"+m.Data.Destination)
		}
	}
	return out
}

// A destination that answers 500 is parked after park_after failures: its
// jobs wait without spending attempts (none is discarded, though each has
// a bounded number), the other destination of the same messages gets them all
// meanwhile, and once a probe succeeds every waiting message is delivered,
// each payment's in order; the operations destination hears each move.
func TestASickDestinationIsParkedHarmsNobodyAndIsDeliveredInOrderWhenBack(t *testing.T) {
	t.Parallel()
	ledger, crm, ops := receiver(t), receiver(t), receiver(t)
	crm.SickFor(time.Hour) // until the test says
	reg := prometheus.NewRegistry()
	metrics := forward.NewMetrics(reg)
	dests := forward.Destinations{"ledger": ledger.URL, "crm": crm.URL, "ops": ops.URL}
	policies := map[string]forward.Policy{
		"crm": {Retry: []time.Duration{200 * time.Millisecond}, MaxAttempts: 100, Probe: 200 * time.Millisecond},
	}
	b, r := routedSetup(t, dests, policies, func(c *forward.Config) {
		c.Health, c.Operations, c.Moved, c.Observe = &storeHealth{}, "ops", metrics.Moved, metrics.Observe
	})
	route := r.Route([]string{"ledger", "crm"})
	const payments = 10
	for i := range payments {
		recordRouted(t, b.store, route, fmt.Sprintf("tx-sick-%d", i), 1000)
	}
	ctx := context.Background()
	health := func(ctx context.Context) store.DestinationHealth {
		hs, err := b.store.Outbox().DestinationHealth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if h.Destination == "crm" {
				return h
			}
		}
		return store.DestinationHealth{State: store.DestinationHealthy}
	}
	testkit.Eventually(t, 30*time.Second, "ledger has every message and crm is parked", func(ctx context.Context) error {
		if got := ledger.Stats().WebhookIDs; got < 2*payments {
			return fmt.Errorf("ledger has %d of %d", got, 2*payments)
		}
		if h := health(ctx); h.State != store.DestinationParked {
			return fmt.Errorf("crm is %s", h.State)
		}
		return nil
	})
	// While parked, nothing is spent: the attempts stay where they were.
	sickBefore := crm.Stats().Sick
	time.Sleep(time.Second)
	spent := crm.Stats().Sick
	if spent-sickBefore > 2 {
		t.Errorf("%d attempts reached the parked destination in a second, want at most its probes", spent-sickBefore)
	}
	jobs, err := b.store.Outbox().ForwardJobs(ctx, store.ForwardJobFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.GivenUp() {
			t.Errorf("job %d to %s given up (%s) while parked", j.ID, j.Args.Destination, j.State)
		}
	}

	crm.SickFor(0)
	testkit.Eventually(t, 30*time.Second, "crm back and every message delivered", func(ctx context.Context) error {
		if got := crm.Stats().WebhookIDs; got < 2*payments {
			return fmt.Errorf("crm has %d of %d (%s)", got, 2*payments, health(ctx).State)
		}
		return nil
	})
	st := crm.Stats()
	if st.Inversions != 0 || st.DuplicatePayments != 0 {
		t.Errorf("crm: %d inversions, %d duplicate payments; want each payment's messages once, in order", st.Inversions, st.DuplicatePayments)
	}
	if h := health(ctx); h.State != store.DestinationHealthy {
		t.Errorf("crm is %s after its recovery, want healthy", h.State)
	}
	jobs, err = b.store.Outbox().ForwardJobs(ctx, store.ForwardJobFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.GivenUp() {
			t.Errorf("job %d to %s given up (%s)", j.ID, j.Args.Destination, j.State)
		}
	}
	testkit.Eventually(t, 30*time.Second, "the operations destination heard each move", func(context.Context) error {
		got := opsEvents(ops)
		for _, want := range []string{"destination.failing>crm", "destination.parked>crm", "destination.recovered>crm"} {
			if !slices.Contains(got, want) {
				return fmt.Errorf("ops received %v, want %s", got, want)
			}
		}
		return nil
	})
	if got := opsEvents(ops); len(got) != 3 {
		t.Errorf("ops received %v, want one event per move", got)
	}
	for to, want := range map[string]float64{"failing": 1, "parked": 1, "healthy": 1} {
		if v := testutil.ToFloat64(metricsMoves(t, reg, "crm", to)); v != want {
			t.Errorf("paylock_forward_destination_moves_total{destination=crm,to=%s} = %v, want %v", to, v, want)
		}
	}
}

// A message whose last attempt fails is reported to the operations
// destination (message.exhausted), once, and never about an operator
// event itself.
func TestAnExhaustedMessageIsReportedToTheOperationsDestination(t *testing.T) {
	t.Parallel()
	dead, ops := receiver(t), receiver(t)
	dead.SickFor(time.Hour)
	dests := forward.Destinations{"dead": dead.URL, "ops": ops.URL}
	policies := map[string]forward.Policy{"dead": {MaxAttempts: 2, Retry: []time.Duration{10 * time.Millisecond}}}
	b, r := routedSetup(t, dests, policies, func(c *forward.Config) { c.Health, c.Operations = &storeHealth{}, "ops" })
	ctx := context.Background()
	if _, err := b.store.Payments().RecordPaymentFunc(ctx, payment("tx-dead"), b.store.Outbox().ForwardRecordHookTo(r.Route([]string{"dead"}))); err != nil {
		t.Fatal(err)
	}
	var got store.ForwardedOperatorEvent
	testkit.Eventually(t, 30*time.Second, "message.exhausted at ops", func(context.Context) error {
		for _, a := range ops.Attempts() {
			var m struct {
				Type string                       `json:"type"`
				Data store.ForwardedOperatorEvent `json:"data"`
			}
			if json.Unmarshal(a.Body, &m) == nil && m.Type == forward.EventMessageExhausted {
				got = m.Data
				return nil
			}
		}
		return fmt.Errorf("ops received %v", opsEvents(ops))
	})
	if got.Destination != "dead" || got.MessageID != store.PaymentForwardID("acme", "tx-dead") || got.MessageType != "payment.recorded" ||
		got.Attempts != 2 || got.TransactionID != "tx-dead" || got.LastError == "" {
		t.Errorf("message.exhausted says %+v", got)
	}
}

// metricsMoves gathers the moves counter of destination d to state to.
func metricsMoves(t *testing.T, reg *prometheus.Registry, d, to string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	for _, mf := range mfs {
		if mf.GetName() != "paylock_forward_destination_moves_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["destination"] == d && labels["to"] == to {
				c.Add(m.GetCounter().GetValue())
			}
		}
	}
	return c
}
