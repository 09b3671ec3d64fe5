package forward_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/brokerdump"
	"github.com/paylock/paylock/internal/fakereceiver"
	"github.com/paylock/paylock/internal/natstest"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// The ordering tests record orderPayments payments and orderChanges
// changes of each (versions 1 to orderChanges), every job in the table
// before the workers start, then let DefaultConcurrency workers send them
// while a tenth of the first attempts fail.
const (
	orderPayments = 200
	orderChanges  = 4
)

// orderBundle is a store full of versioned forward jobs, and what starts
// a replica's workers on them (a store of its own, its own River client).
type orderBundle struct {
	store *store.Store
	start func(t *testing.T, url string, secret bool, wrap func(forward.Store) forward.Store)
}

// orderSetup migrates a schema of the test's own and records payments
// payments of source acme, each with its payment.recorded (version 1) and
// orderChanges-1 changes (payment.refunded, versions 2, 3, ...) forwarded
// to destination "default" in maxAttempts attempts at most, in the
// transactions that record them, as the pipeline does.
func orderSetup(t *testing.T, payments, maxAttempts int) *orderBundle {
	t.Helper()
	return orderSetupWith(t, payments, maxAttempts, false)
}

// orderSetupWith is orderSetup whose messages start in the outbox's
// express lane when express (store.Config.ExpressForwards), each replica
// started then running the lane's drainer (RunExpress) beside River.
func orderSetupWith(t *testing.T, payments, maxAttempts int, express bool) *orderBundle {
	t.Helper()
	ctx := context.Background()
	dsn, _ := paylocktest.MigratedSchema(t)
	st := paylocktest.OpenStore(t, store.Config{URL: dsn, ForwardMaxAttempts: maxAttempts, ExpressForwards: express})
	hook := st.Outbox().ForwardChangeHook(forward.DefaultDestination)
	for i := range payments {
		id := fmt.Sprintf("tx-order-%03d", i)
		if _, err := st.Payments().RecordPaymentForwarded(ctx, payment(id), forward.DefaultDestination); err != nil {
			t.Fatal(err)
		}
	}
	// The changes of every payment, version by version, each in its own
	// transaction as a recorded event makes it.
	for v := 2; v <= orderChanges; v++ {
		for i := range payments {
			id := fmt.Sprintf("tx-order-%03d", i)
			err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
				return hook(ctx, tx, store.Change{Source: "acme", TransactionID: id, EventID: fmt.Sprintf("evt_%s_%d", id, v),
					Message: "payment.refunded", Version: v})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	b := &orderBundle{store: st}
	b.start = func(t *testing.T, url string, signed bool, wrap func(forward.Store) forward.Store) {
		t.Helper()
		cfg := forward.Config{
			Destinations: forward.Destinations{forward.DefaultDestination: url},
			Timeout:      5 * time.Second,
			Backoff:      func(int) time.Duration { return 20 * time.Millisecond },
			Logger:       slog.New(slog.DiscardHandler),
		}
		if signed {
			secrets, err := signature.ParseSecrets(signature.SchemeStandard, forwardSecret)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Secret = secrets[0]
		}
		rst := paylocktest.OpenStore(t, store.Config{URL: dsn, ForwardMaxAttempts: maxAttempts})
		var fs forward.Store = rst.Payments()
		if wrap != nil {
			// The test's faults are the worker's reads of a payment: its
			// payment.recorded jobs carry no payment, as an older
			// paylock's do, so that the worker reads it (and those reads
			// fail as the test says).
			if _, err := rst.Pool().Exec(ctx, `UPDATE river_job SET args = args - 'payment' WHERE kind = 'forward'`); err != nil {
				t.Fatal(err)
			}
			fs = wrap(fs)
		}
		w, err := forward.New(cfg, fs)
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, rst, w)
		if express {
			runExpress(t, rst, w)
		}
	}
	return b
}

// runExpress runs w's express drainer on st until the test ends, stopped
// before River (cleanups run last first).
func runExpress(t *testing.T, st *store.Store, w *forward.Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.RunExpress(ctx, st.Outbox()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunExpress: %v", err)
		}
	})
}

// completed counts the forward jobs River completed.
func (b *orderBundle) completed(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.store.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = 'forward' AND state = 'completed'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// flakyReads fails, at random, a tenth of the first payment reads of each
// payment: the payment.recorded (version 1) of those payments fails its
// first attempt, as when the database hiccups, while their later versions
// need no read.
type flakyReads struct {
	forward.Store
	mu    sync.Mutex
	tried map[string]bool
}

var errFlakyRead = errors.New("a read failed on purpose")

func (f *flakyReads) Payment(ctx context.Context, source, tx string) (store.Payment, error) {
	f.mu.Lock()
	first := !f.tried[tx]
	f.tried[tx] = true
	f.mu.Unlock()
	if first && rand.IntN(10) == 0 {
		return store.Payment{}, errFlakyRead
	}
	return f.Store.Payment(ctx, source, tx)
}

func flaky(s forward.Store) forward.Store { return &flakyReads{Store: s, tried: map[string]bool{}} }

// checkOrder fails t when a payment's messages were not held in version
// order, or not all of them arrived.
func checkOrder(t *testing.T, o brokerdump.Order) {
	t.Helper()
	if o.Payments != orderPayments || o.Versioned < orderPayments*orderChanges {
		t.Errorf("%d messages of %d payments, want %d of %d", o.Versioned, o.Payments, orderPayments*orderChanges, orderPayments)
	}
	if o.Inversions != 0 {
		t.Errorf("%d messages after a higher version of their payment, %d payments inverted (first: %s); want none",
			o.Inversions, o.Inverted, o.Example)
	}
}

// TestAPaymentsMessagesReachAReceiverInVersionOrder: two replicas' workers
// send 200 payments × 4 versions to a receiver that fails a tenth of the
// first attempts; it records every payment's versions in order.
func TestAPaymentsMessagesReachAReceiverInVersionOrder(t *testing.T) {
	t.Parallel()
	rc := testkit.StartReceiver(t, testkit.ReceiverConfig{
		Verifier:      testkit.Verifier(t, signature.SchemeStandard, forwardSecret),
		FailFirstRate: 0.1,
		OtherEvents:   true,
	})
	b := orderSetup(t, orderPayments, 25)
	// Two replicas, DefaultConcurrency workers each.
	b.start(t, rc.URL+"/paylock", true, nil)
	b.start(t, rc.URL+"/paylock", true, nil)
	testkit.WaitFor(t, 3*time.Minute, "every message processed", func() bool {
		return rc.Stats().WebhookIDs == orderPayments*orderChanges
	})
	s, n := checkReceivedInOrder(t, rc)
	t.Logf("%d first attempts failed; %d messages delivered", s.FailedFirst, n)
}

// checkReceivedInOrder checks that rc failed some first attempts and
// holds every payment's versions in order, and returns its stats and how
// many messages it holds.
func checkReceivedInOrder(t *testing.T, rc *testkit.Receiver) (fakereceiver.Stats, int) {
	t.Helper()
	s := rc.Stats()
	if s.FailedFirst == 0 {
		t.Fatal("no first attempt failed: the receiver's faults did not happen")
	}
	msgs := make([]brokerdump.Message, 0, s.WebhookIDs)
	for _, a := range rc.Arrivals() {
		msgs = append(msgs, brokerdump.Message{ID: a.WebhookID,
			Body: fmt.Appendf(nil, `{"data":{"source":%q,"transaction_id":%q,"version":%d}}`, a.Source, a.TransactionID, a.Version)})
	}
	checkOrder(t, brokerdump.CheckOrder(msgs))
	if s.Inversions != 0 {
		t.Errorf("the receiver counted %d inversions, want 0", s.Inversions)
	}
	return s, len(msgs)
}

// TestAPaymentsMessagesReachAReceiverInVersionOrderThroughTheExpressLane
// is TestAPaymentsMessagesReachAReceiverInVersionOrder with the messages
// starting in the outbox's express lane: each replica's drainer sends
// them, the first attempts the receiver fails are handed over to River,
// and a payment's later versions follow them there. Every message
// arrives, in version order, and the lane is left empty.
func TestAPaymentsMessagesReachAReceiverInVersionOrderThroughTheExpressLane(t *testing.T) {
	t.Parallel()
	rc := testkit.StartReceiver(t, testkit.ReceiverConfig{
		Verifier:      testkit.Verifier(t, signature.SchemeStandard, forwardSecret),
		FailFirstRate: 0.1,
		OtherEvents:   true,
	})
	b := orderSetupWith(t, orderPayments, 25, true)
	ctx := context.Background()
	var lane int
	if err := b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM forward_express`).Scan(&lane); err != nil {
		t.Fatal(err)
	}
	if lane != orderPayments*orderChanges || b.jobs(t) != 0 {
		t.Fatalf("%d rows in the express lane and %d River jobs, want %d and none", lane, b.jobs(t), orderPayments*orderChanges)
	}
	b.start(t, rc.URL+"/paylock", true, nil)
	b.start(t, rc.URL+"/paylock", true, nil)
	testkit.WaitFor(t, 3*time.Minute, "every message processed and the lane empty", func() bool {
		if err := b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM forward_express`).Scan(&lane); err != nil {
			t.Fatal(err)
		}
		return rc.Stats().WebhookIDs == orderPayments*orderChanges && lane == 0
	})
	s, n := checkReceivedInOrder(t, rc)
	handed := b.jobs(t)
	if handed == 0 {
		t.Fatal("no message was handed over to River: the lane's failures were not")
	}
	t.Logf("%d first attempts failed; %d messages handed over to River; %d delivered", s.FailedFirst, handed, n)
}

// jobs counts the forward jobs in River, whatever their state.
func (b *orderBundle) jobs(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.store.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = 'forward'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// refusingKafka refuses, at random, a tenth of the produce requests of a
// kfake cluster as a broker would for now (TOPIC_AUTHORIZATION_FAILED):
// the jobs whose records they carried fail their attempt. The cluster
// takes the others.
func refusingKafka(t *testing.T, topic string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var mu sync.Mutex
	refused := 0
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if rand.IntN(10) != 0 {
			return nil, nil, false
		}
		refused++
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, p := range rt.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
				t.Partitions = append(t.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	return c
}

func TestAPaymentsMessagesAreHeldInVersionOrderOnAKafkaPartition(t *testing.T) {
	t.Parallel()
	for _, express := range []bool{false, true} {
		t.Run(laneName(express), func(t *testing.T) {
			t.Parallel()
			const topic = "payments"
			c := refusingKafka(t, topic)
			b := orderSetupWith(t, orderPayments, 25, express)
			b.start(t, "kafka://"+strings.Join(c.ListenAddrs(), ",")+"/"+topic, false, flaky)
			testkit.WaitFor(t, 3*time.Minute, "every message completed", func() bool {
				return b.completedMessages(t) == orderPayments*orderChanges
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			msgs, err := brokerdump.Kafka(ctx, c.ListenAddrs(), topic)
			if err != nil {
				t.Fatal(err)
			}
			parts := map[string]int32{}
			for _, m := range msgs {
				if p, ok := parts[m.Key]; ok && p != m.Partition {
					t.Fatalf("payment %s on partitions %d and %d", m.Key, p, m.Partition)
				}
				parts[m.Key] = m.Partition
			}
			checkOrder(t, brokerdump.CheckOrder(msgs))
		})
	}
}

func TestAPaymentsMessagesAreHeldInVersionOrderInANATSStream(t *testing.T) {
	t.Parallel()
	for _, express := range []bool{false, true} {
		t.Run(laneName(express), func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t)
			b := orderSetupWith(t, orderPayments, 25, express)
			b.start(t, srv.URL+"/paylock.order?stream=ORDER&create=true", false, flaky)
			testkit.WaitFor(t, 3*time.Minute, "every message completed", func() bool {
				return b.completedMessages(t) == orderPayments*orderChanges
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			msgs, err := brokerdump.NATS(ctx, srv.URL, "ORDER")
			if err != nil {
				t.Fatal(err)
			}
			checkOrder(t, brokerdump.CheckOrder(msgs))
		})
	}
}

// laneName names a subtest by where its messages start: River, or the
// express lane (whose drainer delivers a claim's messages to a broker in
// one batch: BatchSink).
func laneName(express bool) string {
	if express {
		return "express"
	}
	return "river"
}

// completedMessages counts the messages delivered: River's completed jobs
// and what the express lane delivered (forward_messages).
func (b *orderBundle) completedMessages(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.store.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM forward_messages WHERE state = 'completed'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// downReads fails every payment read while down is set: a payment's
// payment.recorded fails every attempt.
type downReads struct {
	forward.Store
	mu   sync.Mutex
	down bool
}

func (d *downReads) Payment(ctx context.Context, source, tx string) (store.Payment, error) {
	d.mu.Lock()
	down := d.down
	d.mu.Unlock()
	if down {
		return store.Payment{}, errFlakyRead
	}
	return d.Store.Payment(ctx, source, tx)
}

func (d *downReads) set(down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = down
}

func TestAGivenUpVersionHoldsTheLaterOnesUntilItIsRetried(t *testing.T) {
	t.Parallel()
	rc := testkit.StartReceiver(t, testkit.ReceiverConfig{
		Verifier: testkit.Verifier(t, signature.SchemeStandard, forwardSecret), OtherEvents: true})
	b := orderSetup(t, 1, 2)
	reads := &downReads{down: true}
	b.start(t, rc.URL+"/paylock", true, func(s forward.Store) forward.Store { reads.Store = s; return reads })
	ctx := context.Background()

	jobs := func() map[int]store.ForwardJob {
		t.Helper()
		all, err := b.store.Outbox().ForwardJobs(ctx, store.ForwardJobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		byVersion := map[int]store.ForwardJob{}
		for _, j := range all {
			byVersion[j.Args.Version()] = j
		}
		return byVersion
	}
	testkit.WaitFor(t, time.Minute, "every version given up", func() bool {
		js := jobs()
		for v := 1; v <= orderChanges; v++ {
			if !js[v].GivenUp() {
				return false
			}
		}
		return true
	})
	js := jobs()
	if js[1].State != "discarded" {
		t.Errorf("version 1: %s, want discarded after its attempts", js[1].State)
	}
	for v := 2; v <= orderChanges; v++ {
		if j := js[v]; j.State != "cancelled" || !strings.Contains(j.LastError, "held behind a given-up earlier version") || j.Attempt > 1 {
			t.Errorf("version %d: %s after %d attempts (%q), want cancelled as held, without a delivery attempt", v, j.State, j.Attempt, j.LastError)
		}
	}
	if n := len(rc.Arrivals()); n != 0 {
		t.Fatalf("%d messages reached the receiver while version 1 was given up, want none", n)
	}

	reads.set(false)
	if _, err := b.store.Outbox().RetryForward(ctx, js[1].ID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, time.Minute, "every version delivered", func() bool { return len(rc.Arrivals()) >= orderChanges })
	var got []int
	for _, a := range rc.Arrivals() {
		got = append(got, a.Version)
	}
	if fmt.Sprint(got) != "[1 2 3 4]" {
		t.Errorf("versions arrived %v after the retry of version 1, want [1 2 3 4]", got)
	}
}
