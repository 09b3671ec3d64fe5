package forward_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/store"
)

func TestNewRouterRefusesBadPolicies(t *testing.T) {
	t.Parallel()
	const httpURL, natsURL = "https://ledger.example/hooks", "nats://127.0.0.1:4222/payments"
	cases := []struct {
		name   string
		url    string
		policy forward.Policy
		want   error
	}{
		{"a type pattern with a glob inside", httpURL, forward.Policy{Types: []string{"payment.*.opened"}}, forward.ErrTypePattern},
		{"a type no message has", httpURL, forward.Policy{Types: []string{"paymnet.*"}}, forward.ErrTypePattern},
		{"upper case in a type", httpURL, forward.Policy{Types: []string{"Payment.recorded"}}, forward.ErrTypePattern},
		{"a filter that does not parse", httpURL, forward.Policy{Filter: "data.amount >= "}, forward.ErrFilter},
		{"a filter that is not a condition", httpURL, forward.Policy{Filter: `"yes"`}, forward.ErrFilter},
		{"a filter calling what does not exist", httpURL, forward.Policy{Filter: "nosuch(data)"}, forward.ErrFilter},
		{"a retry step of zero", httpURL, forward.Policy{Retry: []time.Duration{time.Second, 0}}, forward.ErrRetry},
		{"negative max attempts", httpURL, forward.Policy{MaxAttempts: -1}, forward.ErrRetry},
		{"a header paylock sets itself", httpURL, forward.Policy{Headers: map[string]forward.HeaderValue{"Webhook-Signature": {Value: "x"}}}, forward.ErrHeader},
		{"a header holding a line break", httpURL, forward.Policy{Headers: map[string]forward.HeaderValue{"X-Key": {Value: "a\r\nb"}}}, forward.ErrHeader},
		{"negative concurrency", httpURL, forward.Policy{Concurrency: -1}, forward.ErrConfig},
		{"negative rate", httpURL, forward.Policy{Rate: -0.5}, forward.ErrConfig},
		{"secrets_env on a broker", natsURL, forward.Policy{SecretsEnv: "LEDGER_FORWARD_SECRETS"}, forward.ErrConfig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := forward.NewRouter(forward.Destinations{"ledger": c.url}, map[string]forward.Policy{"ledger": c.policy}, true)
			if !errors.Is(err, c.want) || !errors.Is(err, forward.ErrConfig) || !strings.Contains(err.Error(), `"ledger"`) {
				t.Errorf("NewRouter: %v, want an error wrapping %v and ErrConfig, naming the destination", err, c.want)
			}
		})
	}
	t.Run("a policy without a URL", func(t *testing.T) {
		_, err := forward.NewRouter(forward.Destinations{}, map[string]forward.Policy{"ledger": {}}, true)
		if !errors.Is(err, forward.ErrUnknownDestination) {
			t.Errorf("NewRouter: %v, want ErrUnknownDestination", err)
		}
	})
	t.Run("forwarding to a destination that is not defined", func(t *testing.T) {
		r, err := forward.NewRouter(forward.Destinations{"ledger": httpURL}, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Check([]string{"ledger", "analytics"}); !errors.Is(err, forward.ErrUnknownDestination) || !strings.Contains(err.Error(), `"analytics"`) {
			t.Errorf("Check: %v, want ErrUnknownDestination naming analytics", err)
		}
	})
}

func TestTypesAndFilterDecideWhatADestinationTakes(t *testing.T) {
	t.Parallel()
	r, err := forward.NewRouter(forward.Destinations{"ledger": "https://l.example/", "refunds": "https://r.example/", "all": "https://a.example/"},
		map[string]forward.Policy{
			"ledger":  {Types: []string{"payment.*"}, Filter: `data.amount >= 1000 && data.currency in ["EUR", "USD"]`},
			"refunds": {Types: []string{"payment.refunded", "payment.dispute.*"}},
		}, true)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		dest, typ string
		data      map[string]any
		want      bool
	}{
		{"ledger", "payment.recorded", map[string]any{"amount": 1999.0, "currency": "EUR"}, true},
		{"ledger", "payment.recorded", map[string]any{"amount": 999.0, "currency": "EUR"}, false},
		{"ledger", "payment.recorded", map[string]any{"amount": 1999.0, "currency": "GBP"}, false},
		{"ledger", "payment.recorded", map[string]any{"currency": "EUR"}, false}, // no amount: the filter fails, refusing
		{"ledger", "disbursement.paid", map[string]any{"amount": 5000.0, "currency": "EUR"}, false},
		{"refunds", "payment.refunded", nil, true},
		{"refunds", "payment.dispute.opened", nil, true},
		{"refunds", "payment.recorded", nil, false},
		{"all", "order.paid", nil, true},
	}
	for _, c := range cases {
		if got := r.Takes(c.dest, c.typ, c.data); got != c.want {
			t.Errorf("%s takes %s %v: %v, want %v", c.dest, c.typ, c.data, got, c.want)
		}
	}
}

// A payment.recorded message is routed just before its payment is
// recorded (its ReceivedAt zero), so that the recording statement inserts
// it; a filter that names received_at asks to route it once recorded
// (store.ErrRouteAfterRecord), and then sees it.
func TestAFilterOnReceivedAtRoutesThePaymentAsRecorded(t *testing.T) {
	t.Parallel()
	r, err := forward.NewRouter(forward.Destinations{"ledger": "https://l.example/", "recent": "https://r.example/"},
		map[string]forward.Policy{
			"ledger": {Filter: `data.amount >= 1000`},
			"recent": {Filter: `data.received_at >= "2026-12-01"`},
		}, true)
	if err != nil {
		t.Fatal(err)
	}
	p := store.Payment{Source: "acme", TransactionID: "tx-1", Amount: 1999, Currency: "EUR", Payload: []byte(`{}`)}
	a := store.ForwardArgs{ID: store.PaymentForwardID("acme", "tx-1"), Type: store.ForwardPaymentRecorded, Source: "acme", TransactionID: "tx-1"}
	if got, err := r.Route([]string{"ledger"})(context.Background(), a, &p); err != nil || len(got) != 1 || got[0].Destination != "ledger" {
		t.Errorf("ledger before the record: %v, %v: want it routed there", got, err)
	}
	if got, err := r.Route([]string{"ledger", "recent"})(context.Background(), a, &p); !errors.Is(err, store.ErrRouteAfterRecord) {
		t.Errorf("a filter on received_at before the record: %v, %v: want ErrRouteAfterRecord", got, err)
	}
	for at, want := range map[string][]string{"2026-12-06T10:00:00Z": {"ledger", "recent"}, "2026-11-30T10:00:00Z": {"ledger"}} {
		p.ReceivedAt, _ = time.Parse(time.RFC3339, at)
		got, err := r.Route([]string{"ledger", "recent"})(context.Background(), a, &p)
		var names []string
		for _, t := range got {
			names = append(names, t.Destination)
		}
		if err != nil || !slices.Equal(names, want) {
			t.Errorf("received at %s: %v, %v: want %v", at, names, err, want)
		}
	}
}

func TestAFingerprintSaysWhatADestinationIsNotItsSecrets(t *testing.T) {
	t.Parallel()
	fp := func(url string, p forward.Policy, signed bool) string {
		t.Helper()
		r, err := forward.NewRouter(forward.Destinations{"d": url}, map[string]forward.Policy{"d": p}, signed)
		if err != nil {
			t.Fatal(err)
		}
		return r.Fingerprint("d")
	}
	base := fp("https://l.example/hooks", forward.Policy{Headers: map[string]forward.HeaderValue{"X-Api-Key": {Env: "K", Value: "one"}}}, true)
	same := fp("https://l.example/hooks", forward.Policy{Headers: map[string]forward.HeaderValue{"X-Api-Key": {Env: "K", Value: "two"}}}, true)
	if base == "" || base != same {
		t.Errorf("a header's value changed the fingerprint: %q, %q", base, same)
	}
	for name, other := range map[string]string{
		"another URL":       fp("https://l.example/other", forward.Policy{Headers: map[string]forward.HeaderValue{"X-Api-Key": {Env: "K"}}}, true),
		"unsigned":          fp("https://l.example/hooks", forward.Policy{Headers: map[string]forward.HeaderValue{"X-Api-Key": {Env: "K"}}}, false),
		"its own secrets":   fp("https://l.example/hooks", forward.Policy{SecretsEnv: "L", Headers: map[string]forward.HeaderValue{"X-Api-Key": {Env: "K"}}}, true),
		"another header":    fp("https://l.example/hooks", forward.Policy{Headers: map[string]forward.HeaderValue{"X-Other": {Env: "K"}}}, true),
		"another filter":    fp("https://l.example/hooks", forward.Policy{Filter: "true", Headers: map[string]forward.HeaderValue{"X-Api-Key": {Env: "K"}}}, true),
		"another types set": fp("https://l.example/hooks", forward.Policy{Types: []string{"order.*"}, Headers: map[string]forward.HeaderValue{"X-Api-Key": {Env: "K"}}}, true),
	} {
		if other == base {
			t.Errorf("%s: same fingerprint %q", name, base)
		}
	}
	if strings.Contains(base, "one") || !strings.HasPrefix(base, "fp1_") {
		t.Errorf("fingerprint %q", base)
	}
}

// routedSetup starts a worker (setupWith) whose destinations are dests
// with policies, and returns it with the router the recording side uses,
// built from the same definitions.
func routedSetup(t *testing.T, dests forward.Destinations, policies map[string]forward.Policy, edit func(*forward.Config)) (*bundle, *forward.Router) {
	t.Helper()
	b := setupWith(t, 5, "http://127.0.0.1:1/unused", nil, func(c *forward.Config) {
		c.Destinations, c.Policies, c.Timeout = dests, policies, 5*time.Second
		if edit != nil {
			edit(c)
		}
	})
	r, err := forward.NewRouter(dests, policies, true)
	if err != nil {
		t.Fatal(err)
	}
	return b, r
}

// recordRouted records payment tx of amount with route (its
// payment.recorded), then its refund (payment.refunded, version 2) in
// a transaction of its own, as the pipeline does.
func recordRouted(t *testing.T, st *store.Store, route store.ForwardRouter, tx string, amount int64) {
	t.Helper()
	ctx := context.Background()
	p := payment(tx)
	p.Amount = amount
	if _, err := st.Payments().RecordPaymentFunc(ctx, p, st.Outbox().ForwardRecordHookTo(route)); err != nil {
		t.Fatal(err)
	}
	hook := st.Outbox().ForwardChangeHookTo(route)
	err := pgx.BeginFunc(ctx, st.Pool(), func(pt pgx.Tx) error {
		return hook(ctx, pt, store.Change{Source: "acme", TransactionID: tx, EventID: "evt_refund_" + tx, Message: "payment.refunded",
			State: lifecycle.State{Status: "refunded", Amount: amount, Currency: "EUR", AmountRefunded: amount}, Version: 2})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// jobsByDestination lists payment tx's forward jobs as "type>destination".
func jobsByDestination(t *testing.T, st *store.Store, tx string) []string {
	t.Helper()
	ctx := context.Background()
	jobs, err := st.Outbox().PaymentForwards(ctx, "acme", tx)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := st.Outbox().EventForwards(ctx, "acme", []string{"evt_refund_" + tx})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range append(jobs, changes...) {
		out = append(out, j.Args.Type+">"+j.Args.Destination)
	}
	slices.Sort(out)
	return out
}

// A filter on types and data sends each message only where it belongs,
// on every sink: two destinations on one harness, told apart by a header
// of their own.
func TestAFilterSendsEachMessageOnlyWhereItBelongsOnEverySink(t *testing.T) {
	t.Parallel()
	for _, scheme := range forward.Schemes() {
		newHarness, ok := harnesses[scheme]
		if !ok {
			t.Errorf("sink %q has no harness", scheme)
			continue
		}
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			dests := forward.Destinations{"ledger": h.URL, "refunds": h.URL}
			policies := map[string]forward.Policy{
				"ledger":  {Types: []string{"payment.*"}, Filter: "data.amount >= 1000", Headers: map[string]forward.HeaderValue{"X-Route": {Value: "ledger"}}},
				"refunds": {Types: []string{"payment.refunded"}, Headers: map[string]forward.HeaderValue{"X-Route": {Value: "refunds"}}},
			}
			b, r := routedSetup(t, dests, policies, func(c *forward.Config) { c.TLS = h.TLS })
			route := r.Route([]string{"ledger", "refunds"})
			recordRouted(t, b.store, route, "tx-big", 1999)
			recordRouted(t, b.store, route, "tx-small", 500)

			bigPay, bigRefund := store.PaymentForwardID("acme", "tx-big"), store.EventForwardID("acme", "evt_refund_tx-big")
			smallPay, smallRefund := store.PaymentForwardID("acme", "tx-small"), store.EventForwardID("acme", "evt_refund_tx-small")
			want := []string{bigPay + ">ledger", bigRefund + ">ledger", bigRefund + ">refunds", smallRefund + ">refunds"}
			slices.Sort(want)
			var got []string
			testkit.Eventually(t, 30*time.Second, "every routed message arrived", func(context.Context) error {
				got = got[:0]
				for _, m := range h.Received() {
					if m.Accepted {
						got = append(got, m.Header[forward.HeaderID]+">"+m.Header["x-route"])
					}
				}
				slices.Sort(got)
				if len(got) < len(want) {
					return fmt.Errorf("%d of %d", len(got), len(want))
				}
				return nil
			})
			if !slices.Equal(got, want) {
				t.Errorf("received %v, want %v (tx-small's payment.recorded goes nowhere: %s)", got, want, smallPay)
			}
			// A message a destination refuses is never enqueued for it.
			if jobs := jobsByDestination(t, b.store, "tx-small"); !slices.Equal(jobs, []string{"payment.refunded>refunds"}) {
				t.Errorf("tx-small's jobs: %v, want its refund's to refunds only", jobs)
			}
			if jobs := jobsByDestination(t, b.store, "tx-big"); !slices.Equal(jobs, []string{"payment.recorded>ledger", "payment.refunded>ledger", "payment.refunded>refunds"}) {
				t.Errorf("tx-big's jobs: %v", jobs)
			}
		})
	}
}

// Two destinations of one message retry on their own schedules, each
// with its own attempts.
func TestTwoDestinationsRetryIndependently(t *testing.T) {
	t.Parallel()
	fast := receiver(t, 503, 503, 503, 503, 503, 503)
	slow := receiver(t, 503, 503, 503, 503, 503, 503)
	dests := forward.Destinations{"fast": fast.URL, "slow": slow.URL}
	policies := map[string]forward.Policy{
		"fast": {Retry: []time.Duration{10 * time.Millisecond}, MaxAttempts: 3},
		"slow": {Retry: []time.Duration{time.Hour}, MaxAttempts: 20},
	}
	b, r := routedSetup(t, dests, policies, nil)
	ctx := context.Background()
	if _, err := b.store.Payments().RecordPaymentFunc(ctx, payment("tx-retry"), b.store.Outbox().ForwardRecordHookTo(r.Route([]string{"fast", "slow"}))); err != nil {
		t.Fatal(err)
	}
	var byDest map[string]store.ForwardJob
	testkit.Eventually(t, 30*time.Second, "fast given up after 3 attempts, slow waiting an hour after 1", func(ctx context.Context) error {
		jobs, err := b.store.Outbox().PaymentForwards(ctx, "acme", "tx-retry")
		if err != nil {
			return err
		}
		byDest = map[string]store.ForwardJob{}
		for _, j := range jobs {
			byDest[j.Args.Destination] = j
		}
		if f, s := byDest["fast"], byDest["slow"]; f.State != "discarded" || s.Attempt != 1 || s.State != "retryable" {
			return fmt.Errorf("fast %s after %d, slow %s after %d", f.State, f.Attempt, s.State, s.Attempt)
		}
		return nil
	})
	f, s := byDest["fast"], byDest["slow"]
	if f.Attempt != 3 || f.MaxAttempts != 3 || s.MaxAttempts != 20 {
		t.Errorf("fast: %d of %d attempts; slow: max %d", f.Attempt, f.MaxAttempts, s.MaxAttempts)
	}
	if wait := time.Until(s.ScheduledAt); wait < 50*time.Minute {
		t.Errorf("slow's next attempt in %v, want its schedule's hour", wait)
	}
	if f.Args.ID != s.Args.ID {
		t.Errorf("one message, two webhook-ids: %s, %s", f.Args.ID, s.Args.ID)
	}
	if got := len(fast.Attempts()); got != 3 {
		t.Errorf("fast received %d attempts, want 3", got)
	}
	if got := len(slow.Attempts()); got != 1 {
		t.Errorf("slow received %d attempts, want 1", got)
	}
}

// A job whose destination this replica defines otherwise (another URL) is
// never sent, by it, and is counted; so is one whose destination it lacks.
func TestAFingerprintMismatchIsNeverSentAndIsCounted(t *testing.T) {
	t.Parallel()
	theirs, mine := receiver(t), receiver(t)
	reg := prometheus.NewRegistry()
	metrics := forward.NewMetrics(reg)
	var calls atomic.Int64
	b := setupWith(t, 5, mine.URL, nil, func(c *forward.Config) {
		c.Destinations = forward.Destinations{"ledger": mine.URL}
		c.Mismatch = func(d string) { calls.Add(1); metrics.Mismatch(d) }
	})
	// The replica that recorded them knows ledger at another URL, and a
	// destination this one lacks.
	other, err := forward.NewRouter(forward.Destinations{"ledger": theirs.URL, "audit": theirs.URL}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.store.Payments().RecordPaymentFunc(ctx, payment("tx-fp"), b.store.Outbox().ForwardRecordHookTo(other.Route([]string{"ledger", "audit"}))); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "both jobs snoozed by this replica", func(ctx context.Context) error {
		jobs, err := b.store.Outbox().PaymentForwards(ctx, "acme", "tx-fp")
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if j.State != "scheduled" || j.Args.Fingerprint == "" {
				return fmt.Errorf("job to %s: %s", j.Args.Destination, j.State)
			}
		}
		if len(jobs) != 2 || calls.Load() < 2 {
			return fmt.Errorf("%d jobs, %d mismatches", len(jobs), calls.Load())
		}
		return nil
	})
	if n := len(mine.Attempts()) + len(theirs.Attempts()); n != 0 {
		t.Errorf("%d messages sent, want none", n)
	}
	if got := b.outcomes.list(); len(got) != 0 {
		t.Errorf("attempts %v, want none", got)
	}
	for _, d := range []string{"ledger", "audit"} {
		if v := testutil.ToFloat64(metricsMismatch(t, reg, d)); v < 1 {
			t.Errorf("paylock_forward_destination_mismatch_total{destination=%q} = %v", d, v)
		}
	}
}

// metricsMismatch gathers the mismatch counter of destination d from reg.
func metricsMismatch(t *testing.T, reg *prometheus.Registry, d string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "paylock_forward_destination_mismatch_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "destination" && l.GetValue() == d {
					c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
					c.Add(m.GetCounter().GetValue())
					return c
				}
			}
		}
	}
	t.Fatalf("no paylock_forward_destination_mismatch_total{destination=%q}", d)
	return nil
}

// A job of an older paylock (no fingerprint, no policy) is still sent by
// a replica whose destination of that name has a policy now: the rolling
// upgrade.
func TestAnOlderJobWithoutFingerprintStillDelivers(t *testing.T) {
	t.Parallel()
	rcv := receiver(t)
	b := setupWith(t, 5, rcv.URL, nil, func(c *forward.Config) {
		c.Policies = map[string]forward.Policy{forward.DefaultDestination: {Types: []string{"payment.*"}, Retry: []time.Duration{10 * time.Millisecond}}}
	})
	if _, err := b.store.Payments().RecordPaymentForwarded(context.Background(), payment("tx-old"), forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the older job delivered", func(ctx context.Context) error {
		if len(rcv.Attempts()) != 1 {
			return fmt.Errorf("%d received", len(rcv.Attempts()))
		}
		return nil
	})
	jobs, err := b.store.Outbox().PaymentForwards(context.Background(), "acme", "tx-old")
	if err != nil || len(jobs) != 1 || jobs[0].Args.Fingerprint != "" {
		t.Fatalf("jobs %+v, %v: want one without a fingerprint", jobs, err)
	}
}

// Every filter example of docs/routing.md compiles.
func TestTheDocumentedFilterExamplesCompile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/routing.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "```text\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/routing.md has no ```text block of filter examples")
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		n++
		if _, err := forward.NewRouter(forward.Destinations{"d": "https://d.example/"}, map[string]forward.Policy{"d": {Filter: line}}, true); err != nil {
			t.Errorf("%q: %v", line, err)
		}
	}
	if n < 3 {
		t.Errorf("%d examples", n)
	}
}

// A destination's concurrency and rate hold in a replica: with
// concurrency 1 no two of its deliveries overlap; with rate 10/s, ten
// deliveries take most of a second; another destination is not held back.
func TestADestinationsConcurrencyAndRateHoldInAReplica(t *testing.T) {
	t.Parallel()
	type server struct {
		inFlight, peak atomic.Int64
		mu             sync.Mutex
		at             []time.Time
		url            string
	}
	start := func(delay time.Duration) *server {
		s := &server{}
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := s.inFlight.Add(1)
			defer s.inFlight.Add(-1)
			for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
			}
			s.mu.Lock()
			s.at = append(s.at, time.Now())
			s.mu.Unlock()
			time.Sleep(delay)
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(ts.Close)
		s.url = ts.URL
		return s
	}
	one, paced, free := start(50*time.Millisecond), start(0), start(50*time.Millisecond)
	dests := forward.Destinations{"one": one.url, "paced": paced.url, "free": free.url}
	policies := map[string]forward.Policy{"one": {Concurrency: 1}, "paced": {Rate: 10}}
	b, r := routedSetup(t, dests, policies, nil)
	route := r.Route([]string{"one", "paced", "free"})
	const n = 10
	for i := range n {
		if _, err := b.store.Payments().RecordPaymentFunc(context.Background(), payment(fmt.Sprintf("tx-limit-%d", i)), b.store.Outbox().ForwardRecordHookTo(route)); err != nil {
			t.Fatal(err)
		}
	}
	count := func(s *server) int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.at)
	}
	testkit.Eventually(t, 30*time.Second, "every destination got every payment", func(context.Context) error {
		if a, b, c := count(one), count(paced), count(free); a < n || b < n || c < n {
			return fmt.Errorf("one %d, paced %d, free %d", a, b, c)
		}
		return nil
	})
	if p := one.peak.Load(); p != 1 {
		t.Errorf("concurrency 1: %d deliveries in flight at once", p)
	}
	if p := free.peak.Load(); p < 2 {
		t.Errorf("the destination without a cap had at most %d in flight: held back by another's", p)
	}
	paced.mu.Lock()
	spread := paced.at[n-1].Sub(paced.at[0])
	paced.mu.Unlock()
	if spread < 800*time.Millisecond {
		t.Errorf("rate 10/s: %d deliveries within %v", n, spread)
	}
	// A receiver counts a delivery before it answers, the worker observes
	// the attempt after: wait for the last outcomes, then for any extra.
	testkit.Eventually(t, 10*time.Second, "every attempt observed", func(context.Context) error {
		if got := len(b.outcomes.list()); got < 3*n {
			return fmt.Errorf("%d attempts observed", got)
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond)
	if got := b.outcomes.list(); len(got) != 3*n {
		t.Errorf("%d attempts, want %d: a job held by a cap spends none", len(got), 3*n)
	}
}
