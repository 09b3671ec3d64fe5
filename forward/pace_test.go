package forward_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// peakServer answers 204 after delay and keeps the most deliveries it
// had in flight at once.
type peakServer struct {
	inFlight, peak, got atomic.Int64
	url                 string
}

func startPeakServer(t *testing.T, delay time.Duration) *peakServer {
	t.Helper()
	s := &peakServer{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
		}
		time.Sleep(delay)
		s.got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(ts.Close)
	s.url = ts.URL
	return s
}

// startReplicas starts n forward workers, each with a River client of its
// own on st (as n replicas), forwarding to dests under policies, each
// with the pacer pacer(i) returns (nil: none).
func startReplicas(t *testing.T, st *store.Store, n int, dests forward.Destinations, policies map[string]forward.Policy,
	pacer func(i int) forward.Pacer, fallback func(string)) {
	t.Helper()
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, forwardSecret)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		w, err := forward.New(forward.Config{Secret: secrets[0], Destinations: dests, Policies: policies, Timeout: 5 * time.Second,
			Logger: slog.New(slog.DiscardHandler), Pacer: pacer(i), PaceFallback: fallback}, st.Payments())
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, st, w)
	}
}

// oneAtATime sets up a schema of the test's own with n payments (ids
// prefix-i) forwarded to destination "one", concurrency 1, a peakServer
// answering after delay.
func oneAtATime(t *testing.T, delay time.Duration, prefix string, n int) (*store.Store, *peakServer, forward.Destinations, map[string]forward.Policy) {
	t.Helper()
	dsn, _ := paylocktest.MigratedSchema(t)
	st := paylocktest.OpenStore(t, store.Config{URL: dsn, ForwardMaxAttempts: 5})
	srv := startPeakServer(t, delay)
	dests := forward.Destinations{"one": srv.url}
	policies := map[string]forward.Policy{"one": {Concurrency: 1}}
	r, err := forward.NewRouter(dests, policies, true)
	if err != nil {
		t.Fatal(err)
	}
	recordTo(t, st, r, "one", prefix, n)
	return st, srv, dests, policies
}

// recordTo records n payments forwarded to destination.
func recordTo(t *testing.T, st *store.Store, r *forward.Router, destination, prefix string, n int) {
	t.Helper()
	route := r.Route([]string{destination})
	for i := range n {
		if _, err := st.Payments().RecordPaymentFunc(context.Background(), payment(fmt.Sprintf("%s-%d", prefix, i)),
			st.Outbox().ForwardRecordHookTo(route)); err != nil {
			t.Fatal(err)
		}
	}
}

// A destination's concurrency holds across replicas that share a pacer:
// two replicas, concurrency 1, never two deliveries in flight at once.
func TestADestinationsConcurrencyHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	// Enough deliveries, each long enough, that two replicas pacing each
	// on its own (concurrency 1 apiece) are all but sure to overlap.
	const n = 32
	st, srv, dests, policies := oneAtATime(t, 60*time.Millisecond, "tx-pace", n)
	prefix := testkit.Key(t, "pace") + ":"
	startReplicas(t, st, 2, dests, policies, func(int) forward.Pacer { return lock.NewPacer(testkit.Redis(t), prefix) }, nil)
	testkit.Eventually(t, 30*time.Second, "every payment delivered", func(context.Context) error {
		if got := srv.got.Load(); got < n {
			return fmt.Errorf("%d delivered", got)
		}
		return nil
	})
	if p := srv.peak.Load(); p != 1 {
		t.Errorf("concurrency 1 over two replicas: %d deliveries in flight at once", p)
	}
}

// failingPacer cannot answer, as when Redis is down.
type failingPacer struct{ calls atomic.Int64 }

var errPacerDown = errors.New("the pacer's Redis is down")

func (p *failingPacer) Acquire(context.Context, string, int, float64, time.Duration) (func(), time.Duration, error) {
	p.calls.Add(1)
	return nil, 0, errPacerDown
}

// When the shared pacer cannot answer, each replica paces on its own:
// nothing is held back for good, the replica's own cap holds, and every
// fallback is reported.
func TestADestinationIsPacedByItsReplicaWhenThePacerFails(t *testing.T) {
	t.Parallel()
	const n = 8
	st, srv, dests, policies := oneAtATime(t, 20*time.Millisecond, "tx-fallback", n)
	pacer := &failingPacer{}
	var mu sync.Mutex
	fallbacks := map[string]int{}
	startReplicas(t, st, 1, dests, policies, func(int) forward.Pacer { return pacer }, func(d string) {
		mu.Lock()
		defer mu.Unlock()
		fallbacks[d]++
	})
	testkit.Eventually(t, 30*time.Second, "every payment delivered", func(context.Context) error {
		if got := srv.got.Load(); got < n {
			return fmt.Errorf("%d delivered", got)
		}
		return nil
	})
	if p := srv.peak.Load(); p != 1 {
		t.Errorf("concurrency 1 in the replica's own pacing: %d in flight at once", p)
	}
	mu.Lock()
	defer mu.Unlock()
	if fallbacks["one"] < n || pacer.calls.Load() < n {
		t.Errorf("%d fallbacks reported for %d pacer calls, want one per delivery at least (%d)", fallbacks["one"], pacer.calls.Load(), n)
	}
}
