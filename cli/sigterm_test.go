package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// holdFirst is a receiver's front that holds the first forward it gets
// until release is closed, after closing held; the others pass at once.
type holdFirst struct {
	once          sync.Once
	held, release chan struct{}
}

func (h *holdFirst) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := false
		h.once.Do(func() { first = true })
		if first {
			close(h.held)
			<-h.release
		}
		next.ServeHTTP(w, r)
	})
}

// serveUntil runs serve with env until the returned stop is called (as
// SIGTERM does: Main cancels serve's context on it); stop returns serve's
// error.
func serveUntil(t *testing.T, env map[string]string) (base string, stop func() error) {
	t.Helper()
	cfg, _, err := loadConfig("serve", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	ln := testkit.Listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler), ln, nil) }()
	base = "http://" + ln.Addr().String()
	testkit.WaitReady(t, base+"/healthz", 30*time.Second, nil)
	var once sync.Once
	var serr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case serr = <-done:
			case <-time.After(60 * time.Second):
				serr = fmt.Errorf("serve did not return within 60s of its SIGTERM")
			}
		})
		return serr
	}
	t.Cleanup(func() { stop() })
	return base, stop
}

// TestSIGTERMWithForwardsMidAttemptAndPaymentsQueuedLosesAndDoublesNothing:
// serve gets SIGTERM while a forward is mid-attempt (the receiver holds
// it open) and while payments wait in the batcher behind a slow insert.
// Every delivery answered 2xx is recorded; the deliveries that were not
// are sent again to a restarted serve (as a PSP retries); in the end each
// payment is recorded once and forwarded once, under its own webhook-id.
func TestSIGTERMWithForwardsMidAttemptAndPaymentsQueuedLosesAndDoublesNothing(t *testing.T) {
	t.Parallel()
	hold := &holdFirst{held: make(chan struct{}), release: make(chan struct{})}
	rc := testkit.StartReceiver(t, testkit.ReceiverConfig{
		Verifier: testkit.Verifier(t, signature.SchemeStandard, forwardSecret), Front: hold.wrap,
	})
	released := sync.OnceFunc(func() { close(hold.release) })
	t.Cleanup(released)
	key := testkit.Key(t, "")
	app := "sigterm-" + key[len(key)-8:] // within application_name's 63 bytes
	// Credentials in the URL keep net/http's client (fastHTTP), whose
	// attempt a hard stop would cancel mid-flight; fasthttp's ends at its
	// deadline whatever the stop, so it could not tell the two apart.
	env := forwardEnv(t, strings.Replace(rc.URL, "http://", "http://sigterm:test@", 1))
	env["DATABASE_URL"] += "&application_name=" + app
	env["PAYLOCK_FORWARD_MAX_ATTEMPTS"] = "5"
	// The forwards counted are River's jobs, each held mid-attempt.
	env["PAYLOCK_FORWARD_EXPRESS"] = "false"
	env["PAYLOCK_BATCH_WRITERS"] = "1"
	env["PAYLOCK_BATCH_STALL"] = "off"
	db := testkit.Connect(t, env["DATABASE_URL"])
	base, stop := serveUntil(t, env)

	const n = 20
	tx := func(i int) string { return fmt.Sprintf("tx-sigterm-%02d", i) }
	pay := func(i int) (int, error) {
		res, err := http.Post(base+"/webhooks/payments", "application/json",
			strings.NewReader(fmt.Sprintf(`{"transaction_id":%q,"amount":%d,"currency":"EUR"}`, tx(i), 100+i)))
		if err != nil {
			return 0, err
		}
		res.Body.Close()
		return res.StatusCode, nil
	}
	// Payment 0 is recorded; its forward is held mid-attempt.
	if code, err := pay(0); code != http.StatusOK {
		t.Fatalf("payment 0: %d %v", code, err)
	}
	select {
	case <-hold.held:
	case <-time.After(30 * time.Second):
		t.Fatal("payment 0's forward never reached the receiver")
	}
	// Payment 1's insert sleeps on the server, holding the only writer;
	// the others queue in the batcher behind it.
	testkit.SlowInsert{Slow: 3 * time.Second, SlowWhere: fmt.Sprintf("NEW.transaction_id = '%s'", tx(1))}.Install(t, db)
	codes := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Go(func() { codes[1], errs[1] = pay(1) })
	testkit.WaitFor(t, 30*time.Second, "payment 1's insert sleeping", func() bool { return testkit.Sleeping(t, db, app) == 1 })
	for i := 2; i < n; i++ {
		wg.Go(func() { codes[i], errs[i] = pay(i) })
	}
	rdb := testkit.Redis(t)
	prefix := env["PAYLOCK_LOCK_PREFIX"]
	testkit.WaitFor(t, 30*time.Second, "every delivery in flight (holding its lock)", func() bool {
		keys, err := rdb.Keys(context.Background(), prefix+"*"+tx(0)[:len(tx(0))-2]+"*").Result()
		if err != nil {
			return false
		}
		inflight := 0
		for _, k := range keys {
			if !strings.Contains(k, tx(0)) {
				inflight++
			}
		}
		return inflight >= n-1
	})

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }() // SIGTERM
	wg.Wait()
	released() // the held forward's attempt ends after the signal
	if err := <-stopped; err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	answered := 0
	for i := 1; i < n; i++ {
		recorded := testkit.PaymentRows(t, db, tx(i))
		if errs[i] == nil && codes[i] >= 200 && codes[i] < 300 {
			answered++
			if recorded != 1 {
				t.Errorf("%s answered %d but %d rows are stored: a 2xx must mean recorded", tx(i), codes[i], recorded)
			}
		}
	}
	t.Logf("during shutdown: %d of %d queued deliveries answered 2xx", answered, n-1)

	// Restarted, it gets again what was not answered 2xx, and forwards.
	base, _ = serveUntil(t, env)
	for i := 1; i < n; i++ {
		if errs[i] == nil && codes[i] >= 200 && codes[i] < 300 {
			continue
		}
		if code, err := pay(i); code != http.StatusOK {
			t.Fatalf("%s sent again after the restart: %d %v", tx(i), code, err)
		}
	}
	want := map[string]bool{}
	for i := range n {
		want[store.PaymentForwardID("payments", tx(i))] = true
		if rows := testkit.PaymentRows(t, db, tx(i)); rows != 1 {
			t.Errorf("%s: %d rows, want 1", tx(i), rows)
		}
	}
	testkit.WaitFor(t, 60*time.Second, "every payment forwarded", func() bool { return len(idCounts(rc)) >= n })
	for id, count := range idCounts(rc) {
		if !want[id] || count != 1 {
			t.Errorf("webhook-id %s delivered %d times (one of ours: %v); want each payment's once", id, count, want[id])
		}
	}
	if jobs := testkit.Count(t, db, "SELECT count(*) FROM river_job WHERE kind = 'forward'"); jobs != n {
		t.Errorf("%d forward jobs, want %d", jobs, n)
	}
}
