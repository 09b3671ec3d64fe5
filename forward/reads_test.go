package forward

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

func readsSecret(t *testing.T) signature.Secret {
	t.Helper()
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, "whsec_"+base64.StdEncoding.EncodeToString([]byte("reads-test-secret-0123456789")))
	if err != nil {
		t.Fatal(err)
	}
	return secrets[0]
}

// gatedStore answers Payment once gate is closed, and records the most
// calls it had in flight at once.
type gatedStore struct {
	gate           chan struct{}
	entered        chan struct{}
	inFlight, most atomic.Int32
}

func (g *gatedStore) Payment(ctx context.Context, source, tx string) (store.Payment, error) {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	g.entered <- struct{}{}
	<-g.gate
	return store.Payment{Source: source, TransactionID: tx}, nil
}

func (g *gatedStore) ForwardsBefore(context.Context, int64, store.ForwardArgs) (store.EarlierForwards, error) {
	return store.EarlierForwards{}, nil
}

// TestReadsCapsThePaymentReadsInFlight: with Config.Reads 2, eight
// workers' reads reach the store two at a time, and every one is answered;
// a read waiting for a slot gives up with its context.
func TestReadsCapsThePaymentReadsInFlight(t *testing.T) {
	t.Parallel()
	const workers = 8
	g := &gatedStore{gate: make(chan struct{}), entered: make(chan struct{}, workers)}
	w, err := New(Config{Concurrency: workers, Reads: 2, Destinations: Destinations{DefaultDestination: "http://127.0.0.1:1/"}, Secret: readsSecret(t)}, g)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := range workers {
		wg.Go(func() {
			_, err := w.st.Payment(ctx, "payments", fmt.Sprintf("tx-%d", i))
			errs <- err
		})
	}
	<-g.entered
	<-g.entered // both slots taken; the other six wait

	errGiveUp := errors.New("client gone")
	gone, cancel := context.WithCancelCause(ctx)
	cancel(errGiveUp)
	if _, err := w.st.Payment(gone, "payments", "tx-gone"); !errors.Is(err, errGiveUp) {
		t.Errorf("a read waiting for a slot with its context done: %v, want %v", err, errGiveUp)
	}

	close(g.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if most := g.most.Load(); most != 2 {
		t.Errorf("%d reads in flight at once; want 2 (Config.Reads)", most)
	}
}
