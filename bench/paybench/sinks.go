package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// Forward throughput by sink (section 5): paylock's forward worker, in
// process, on River over the benchmark server, delivering to each kind of
// destination on this machine: paybench's own http receiver (204 to every
// POST, signed forwards), a throwaway nats-server with JetStream (a file
// stream paylock creates), and a three-broker in-process Kafka cluster
// (franz-go's kfake: no real Kafka here). Per repetition and sink, in
// rotating order:
//
//   - drain: SinkBacklog payments are recorded with their forward jobs
//     before the worker starts; payments/s is the backlog over the time
//     until the last delivery;
//   - lag: with the worker running, payments are recorded at SinkRate per
//     second for Measure/2; the lag of each is from its COMMIT to its
//     delivery (the sink's ack), p50 and p99.

// sinkRun is one repetition of one sink.
type sinkRun struct {
	Sink           string
	Rep            int
	Backlog        int
	Drain          time.Duration
	PerSec         float64
	Paced          int // payments recorded in the lag phase
	Rate           int
	LagP50, LagP99 time.Duration
	Failed         int // failed attempts over both phases
}

// sinkDest is one destination of the section.
type sinkDest struct {
	Name, URL string
	Signed    bool
	close     func()
}

const sinkDestination = "bench" // the destination's name in the jobs

// startSinkDests starts the three destinations (nats-server in dir).
func startSinkDests(dir string) ([]sinkDest, error) {
	recv, err := startForwardReceiver()
	if err != nil {
		return nil, err
	}
	dests := []sinkDest{{Name: "http", URL: "http://" + recv.Addr + "/paylock", Signed: true, close: func() { _ = recv.Close() }}}
	stopNATS, natsAddr, err := startNATSServer(dir)
	if err != nil {
		closeSinkDests(dests)
		return nil, err
	}
	dests = append(dests, sinkDest{Name: "nats", URL: "nats://" + natsAddr + "/paybench.payments?stream=PAYBENCH&create=true", close: stopNATS})
	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, "paybench-payments"))
	if err != nil {
		closeSinkDests(dests)
		return nil, err
	}
	dests = append(dests, sinkDest{Name: "kafka", URL: "kafka://" + strings.Join(kc.ListenAddrs(), ",") + "/paybench-payments", close: kc.Close})
	return dests, nil
}

func closeSinkDests(dests []sinkDest) {
	for _, d := range dests {
		d.close()
	}
}

// startNATSServer runs nats-server -js on a free loopback port, storing in
// dir, until stop.
func startNATSServer(dir string) (stop func(), addr string, err error) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		bin = "/usr/sbin/nats-server"
		if _, serr := os.Stat(bin); serr != nil {
			return nil, "", errors.New("nats-server not installed (apt-get install nats-server)")
		}
	}
	if addr, err = freeAddr(); err != nil {
		return nil, "", err
	}
	host, port, _ := net.SplitHostPort(addr)
	logf, err := os.Create(filepath.Join(dir, "nats-server.log"))
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, "-a", host, "-p", port, "-js", "-sd", filepath.Join(dir, "nats"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, "", err
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() }
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return stop, addr, nil
		}
	}
	stop()
	return nil, "", errors.New("nats-server not listening after 10s")
}

// runSinks creates a database of its own, runs every repetition of every
// sink and drops it.
func runSinks(ctx context.Context, c runConfig, dir string, r *results) (err error) {
	db, err := newPG(c.DatabaseURL, c.DBName+"_sinks")
	if err != nil {
		return err
	}
	if err := db.create(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.drop(context.WithoutCancel(ctx))) }()
	st, err := store.Open(ctx, store.Config{URL: db.bench})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	dests, err := startSinkDests(dir)
	if err != nil {
		return err
	}
	defer closeSinkDests(dests)
	for rep := range c.Reps {
		for i := range dests {
			d := dests[(i+rep)%len(dests)]
			run, err := runSinkOnce(ctx, c, st, db, d, rep)
			if err != nil {
				return fmt.Errorf("sink %s, repetition %d: %w", d.Name, rep+1, err)
			}
			r.Sinks = append(r.Sinks, run)
			logf("sink %s rep %d: %.0f payments/s, lag p99 %s", d.Name, rep+1, run.PerSec, ms(run.LagP99))
		}
	}
	return nil
}

// sinkObserver notes when each webhook-id was delivered.
type sinkObserver struct {
	mu        sync.Mutex
	delivered map[string]time.Time
	failed    int
	all       chan struct{} // closed once want deliveries are in
	want      int
}

func (o *sinkObserver) observe(ev forward.Event) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if ev.Outcome != forward.OutcomeDelivered {
		o.failed++
		return
	}
	if _, dup := o.delivered[ev.WebhookID]; !dup {
		o.delivered[ev.WebhookID] = now
		if len(o.delivered) == o.want {
			close(o.all)
		}
	}
}

// await waits until want payments are delivered in all, or timeout.
func (o *sinkObserver) await(ctx context.Context, want int, timeout time.Duration) error {
	o.mu.Lock()
	o.want, o.all = want, make(chan struct{})
	if len(o.delivered) >= want {
		close(o.all)
	}
	all := o.all
	o.mu.Unlock()
	select {
	case <-all:
		return nil
	case <-time.After(timeout):
		o.mu.Lock()
		defer o.mu.Unlock()
		return fmt.Errorf("%d of %d payments delivered after %s", len(o.delivered), want, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runSinkOnce measures one sink: the drain of a backlog, then the lag at a
// steady rate.
func runSinkOnce(ctx context.Context, c runConfig, st *store.Store, db *pg, d sinkDest, rep int) (sinkRun, error) {
	run := sinkRun{Sink: d.Name, Rep: rep + 1, Backlog: c.SinkBacklog, Rate: c.SinkRate}
	if err := db.truncate(ctx); err != nil {
		return run, err
	}
	prefix := fmt.Sprintf("%s-%d-", d.Name, rep)
	if _, err := recordPayments(ctx, st, prefix+"b-", c.SinkBacklog, 0); err != nil {
		return run, err
	}
	obs := &sinkObserver{delivered: map[string]time.Time{}}
	stop, err := startSinkWorker(ctx, c, st, d, obs)
	if err != nil {
		return run, err
	}
	defer stop()
	start := time.Now()
	if err := obs.await(ctx, c.SinkBacklog, 3*time.Minute); err != nil {
		return run, err
	}
	run.Drain = time.Since(start)
	run.PerSec = float64(c.SinkBacklog) / run.Drain.Seconds()
	run.Paced = max(1, int(float64(c.SinkRate)*(c.Measure/2).Seconds()))
	committed, err := recordPayments(ctx, st, prefix+"p-", run.Paced, c.SinkRate)
	if err != nil {
		return run, err
	}
	if err := obs.await(ctx, c.SinkBacklog+run.Paced, 3*time.Minute); err != nil {
		return run, err
	}
	obs.mu.Lock()
	lags := make([]time.Duration, 0, len(committed))
	for id, at := range committed {
		lags = append(lags, obs.delivered[id].Sub(at))
	}
	run.Failed = obs.failed
	obs.mu.Unlock()
	slices.Sort(lags)
	run.LagP50, run.LagP99 = percentile(lags, 50), percentile(lags, 99)
	return run, nil
}

// startSinkWorker starts the forward worker to d on River, as `paylock
// worker` runs it (the forward queue's own fetch cooldown, the forward
// timeout 10s) with PAYLOCK_FORWARD_CONCURRENCY=c.SinkConcurrency.
func startSinkWorker(ctx context.Context, c runConfig, st *store.Store, d sinkDest, obs *sinkObserver) (stop func(), err error) {
	quiet := slog.New(slog.DiscardHandler)
	cfg := forward.Config{Destinations: forward.Destinations{sinkDestination: d.URL}, Concurrency: c.SinkConcurrency,
		Timeout: 10 * time.Second, Logger: quiet, Observe: obs.observe}
	if d.Signed {
		secrets, err := signature.ParseSecrets(signature.SchemeStandard, forwardSecret)
		if err != nil {
			return nil, err
		}
		cfg.Secret = secrets[0]
	}
	w, err := forward.New(cfg, st.Payments())
	if err != nil {
		return nil, err
	}
	rcfg := &river.Config{Logger: quiet, FetchPollInterval: 5 * time.Second, FetchCooldown: 100 * time.Millisecond}
	if err := w.AddTo(rcfg); err != nil {
		_ = w.Close()
		return nil, err
	}
	stopJobs, err := st.StartJobs(ctx, rcfg)
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = stopJobs(sctx)
		_ = w.Close()
	}, nil
}

// recordPayments records n payments forwarded to the bench destination,
// transaction ids prefix0..., as fast as 16 writers go (rate 0) or at rate
// per second, and returns each one's webhook-id and COMMIT time.
func recordPayments(ctx context.Context, st *store.Store, prefix string, n, rate int) (map[string]time.Time, error) {
	var (
		mu   sync.Mutex
		out  = make(map[string]time.Time, n)
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 16)
	)
	start := time.Now()
	for i := range n {
		if rate > 0 {
			if wait := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); wait > 0 {
				time.Sleep(wait) // the pacing of the offered load
			}
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			tx := fmt.Sprintf("%s%d", prefix, i)
			p := store.Payment{Source: "paybench", TransactionID: tx, Amount: 1999, Currency: "EUR", EventID: "evt_" + tx,
				Payload: []byte(`{"id":"` + tx + `"}`)}
			_, err := st.Payments().RecordPaymentForwarded(ctx, p, sinkDestination)
			at := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out[store.PaymentForwardID("paybench", tx)] = at
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// sinkSection is section 5 of the report.
func (rp *report) sinkSection() {
	r := rp.r
	if len(r.Sinks) == 0 {
		return
	}
	c := r.Config
	rp.p("## 5. Forward throughput by sink")
	rp.p("")
	rp.p("paylock's forward worker (in process, on River over the same Postgres, PAYLOCK_FORWARD_CONCURRENCY=%d,", c.SinkConcurrency)
	rp.p("the forward queue's fetch cooldown %s as in `paylock worker`) delivering to each kind of destination on this", forward.FetchCooldown)
	rp.p("machine: paybench's http receiver (204 to every signed POST), a throwaway `nats-server -js` (a file")
	rp.p("stream paylock creates; complete on the PubAck) and a three-broker in-process Kafka cluster (franz-go's")
	rp.p("kfake, no real Kafka here; idempotent producer, acks=all). **payments/s**: a backlog of %d recorded", c.SinkBacklog)
	rp.p("payments drained (from the worker's start to the last ack); **lag**: payments then recorded at %d/s", c.SinkRate)
	rp.p("for %s, from each one's COMMIT to the sink's ack. Medians over %d repetitions (sinks in rotating order).", c.Measure/2, c.Reps)
	rp.p("The ceiling they share: River fetches at most PAYLOCK_FORWARD_CONCURRENCY jobs per fetch cooldown, %d", int(float64(c.SinkConcurrency)/forward.FetchCooldown.Seconds()))
	rp.p("jobs/s here; a sink near it is bounded by the queue, not by its broker.")
	rp.p("")
	rp.p("| sink | payments/s (drain) | lag p50 | lag p99 | failed attempts |")
	rp.p("| --- | ---: | ---: | ---: | ---: |")
	for _, name := range []string{"http", "nats", "kafka"} {
		var per, p50, p99, failed []float64
		for _, s := range r.Sinks {
			if s.Sink == name {
				per = append(per, s.PerSec)
				p50 = append(p50, float64(s.LagP50))
				p99 = append(p99, float64(s.LagP99))
				failed = append(failed, float64(s.Failed))
			}
		}
		if len(per) == 0 {
			continue
		}
		rp.p("| %s | %.0f | %s | %s | %.0f |", name, median(per), ms(time.Duration(median(p50))), ms(time.Duration(median(p99))), median(failed))
	}
	rp.p("")
}
