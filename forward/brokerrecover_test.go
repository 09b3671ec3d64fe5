package forward_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/brokerdump"
	"github.com/paylock/paylock/internal/natstest"
)

// deliverEventually delivers m as the worker would: each failed attempt
// must be one the job retries (not ErrPermanent), and the attempts go on
// until one succeeds or the bound passes.
func deliverEventually(t *testing.T, s forward.Sink, m forward.Message, bound time.Duration) {
	t.Helper()
	if err := retryDeliver(s, m, bound); err != nil {
		t.Fatal(err)
	}
}

// retryDeliver is deliverEventually's loop, for other goroutines.
func retryDeliver(s forward.Sink, m forward.Message, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		err := s.Deliver(context.Background(), m)
		if err == nil {
			return nil
		}
		if errors.Is(err, forward.ErrPermanent) {
			return fmt.Errorf("deliver %s: %w; want a failed attempt the job retries", m.ID, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("deliver %s still failing after %s: %w", m.ID, bound, err)
		}
		time.Sleep(50 * time.Millisecond) // the job's backoff
	}
}

// natsUsers writes a nats-server configuration accepting these
// user/password pairs.
func natsUsers(t *testing.T, path string, pairs ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("authorization {\n  users = [\n")
	for i := 0; i < len(pairs); i += 2 {
		fmt.Fprintf(&b, "    {user: %q, password: %q}\n", pairs[i], pairs[i+1])
	}
	b.WriteString("  ]\n}\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A credential rotation: the server restarts knowing only the new user,
// rejects the sink's old credentials twice in a row (nats.go closes the
// connection for good), and then restarts accepting old and new. The
// sink dials again; every message is in the stream once.
func TestNATSSinkRedialsAfterItsConnectionClosedDuringACredentialRotation(t *testing.T) {
	t.Parallel()
	conf := filepath.Join(t.TempDir(), "users.conf")
	natsUsers(t, conf, "paylock", "old-pass")
	srv := natstest.Start(t, "-c", conf)
	withOld := "nats://paylock:old-pass@" + strings.TrimPrefix(srv.URL, "nats://")
	s := openSink(t, withOld+"/paylock.payments?stream=PAYMENTS&create=true&insecure=true", time.Second)
	var want []string
	for i := range 10 {
		m := brokerMessage(fmt.Sprintf("tx-%d", i))
		want = append(want, m.ID)
		if i == 4 {
			srv.Kill()
			natsUsers(t, conf, "paylock-next", "new-pass")
			srv.Restart(t)
			// The sink's reconnects are refused until nats.go gives up.
			for deadline := time.Now().Add(15 * time.Second); srv.LogCount("authentication error") < 2; {
				if err := s.Deliver(context.Background(), m); err == nil || errors.Is(err, forward.ErrPermanent) {
					t.Fatalf("Deliver with credentials the server no longer takes: %v; want a failed attempt", err)
				}
				if time.Now().After(deadline) {
					t.Fatal("the server did not refuse the sink's old credentials twice within 15s")
				}
			}
			srv.Kill()
			natsUsers(t, conf, "paylock", "old-pass", "paylock-next", "new-pass")
			srv.Restart(t)
		}
		deliverEventually(t, s, m, 20*time.Second)
	}
	if got := streamIDs(t, withOld, "PAYMENTS"); !slices.Equal(got, want) {
		t.Errorf("the stream holds %v; want %v, each once", got, want)
	}
}

// fakeNATS is a NATS server as far as a client's first connection goes
// (INFO advertising advertise as connect_urls, PONG to its PING), which
// then drops it and refuses every later connection, counting them.
type fakeNATS struct {
	ln      net.Listener
	refused atomic.Int32
}

func startFakeNATS(t *testing.T, advertise string) *fakeNATS {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	f := &fakeNATS{ln: ln}
	go func() {
		for first := true; ; first = false {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !first {
				f.refused.Add(1)
				_ = c.Close()
				continue
			}
			fmt.Fprintf(c, "INFO {\"server_id\":\"fake\",\"version\":\"2.10.0\",\"proto\":1,\"headers\":true,\"max_payload\":1048576,\"connect_urls\":[%q]}\r\n", advertise)
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					break
				}
				if strings.HasPrefix(line, "PING") {
					_, _ = c.Write([]byte("PONG\r\n"))
					break
				}
			}
			_ = c.Close()
		}
	}()
	return f
}

func TestNATSSinkIgnoresServersAServerAdvertises(t *testing.T) {
	t.Parallel()
	trap, err := net.Listen("tcp", "127.0.0.1:0") // where the advertised URL leads
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = trap.Close() })
	var trapped atomic.Int32
	go func() {
		for {
			c, err := trap.Accept()
			if err != nil {
				return
			}
			trapped.Add(1)
			_ = c.Close()
		}
	}()
	for _, c := range []struct {
		query   string
		trapped bool
	}{
		{query: "", trapped: false},
		{query: "&discovery=true", trapped: true},
	} {
		trapped.Store(0)
		fake := startFakeNATS(t, trap.Addr().String())
		s := openSink(t, "nats://paylock:hunter2@"+fake.ln.Addr().String()+"/paylock.payments?insecure=true"+c.query, 200*time.Millisecond)
		// Reconnects go round the pool: by the fake's third refusal the
		// client has tried every server in it.
		for deadline := time.Now().Add(15 * time.Second); fake.refused.Load() < 3; {
			_ = s.Deliver(context.Background(), brokerMessage("tx-1"))
			if time.Now().After(deadline) {
				t.Fatalf("%q: the client did not reconnect 3 times within 15s", c.query)
			}
		}
		if got := trapped.Load() > 0; got != c.trapped {
			t.Errorf("%q: the advertised server got a connection: %v, want %v", c.query, got, c.trapped)
		}
		_ = s.Close()
	}
}

func TestKafkaSinkProducesWithAcksAllAndIdempotence(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "payments"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var mu sync.Mutex
	var acks []int16
	var producerIDs []int64
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		mu.Lock()
		defer mu.Unlock()
		acks = append(acks, req.Acks)
		for _, tp := range req.Topics {
			for _, p := range tp.Partitions {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(p.Records); err == nil {
					producerIDs = append(producerIDs, b.ProducerID)
				}
			}
		}
		return nil, nil, false // the cluster appends it
	})
	s := openSink(t, "kafka://"+c.ListenAddrs()[0]+"/payments", 5*time.Second)
	for i := range 3 {
		if err := s.Deliver(context.Background(), brokerMessage(fmt.Sprintf("tx-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(acks) == 0 {
		t.Fatal("no produce request seen")
	}
	for i, a := range acks {
		if a != -1 {
			t.Errorf("produce request %d asks acks=%d; want -1 (all in-sync replicas)", i, a)
		}
	}
	for i, id := range producerIDs {
		if id < 0 {
			t.Errorf("batch %d has producer id %d; want an idempotent producer's (>= 0)", i, id)
		}
	}
}

// The broker restarts (kfake persisting to a directory, on the same
// ports) while four senders deliver: every message is in the topic once.
func TestKafkaSinkDeliversEveryMessageOnceAcrossABrokerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "payments"), kfake.DataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	addrs := c.ListenAddrs()
	var ports []int
	for _, a := range addrs {
		_, p, _ := net.SplitHostPort(a)
		var n int
		fmt.Sscan(p, &n)
		ports = append(ports, n)
	}
	var restarted *kfake.Cluster
	t.Cleanup(func() {
		if restarted != nil {
			restarted.Close()
		}
	})
	s := openSink(t, "kafka://"+strings.Join(addrs, ",")+"/payments", 10*time.Second)
	const senders, each = 4, 10
	var delivered atomic.Int32
	halfway := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	want := map[string]bool{}
	for g := range senders {
		for i := range each {
			want[fmt.Sprintf("pay_tx-%d-%d", g, i)] = true
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := retryDeliver(s, brokerMessage(fmt.Sprintf("tx-%d-%d", g, i)), 30*time.Second); err != nil {
					t.Error(err)
					once.Do(func() { close(halfway) })
					return
				}
				if delivered.Add(1) == senders*each/2 {
					once.Do(func() { close(halfway) })
				}
			}
		}()
	}
	<-halfway
	c.Close()
	restarted, err = kfake.NewCluster(kfake.NumBrokers(3), kfake.Ports(ports...), kfake.DataDir(dir))
	if err != nil {
		t.Fatalf("restart on ports %v: %v", ports, err)
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msgs, err := brokerdump.Kafka(ctx, addrs, "payments")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range msgs {
		seen[m.ID]++
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("%s is in the topic %d times, want once", id, seen[id])
		}
	}
	if len(msgs) != len(want) {
		t.Errorf("the topic holds %d records, want %d", len(msgs), len(want))
	}
}
