package forward_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/natstest"
)

// brokerMessage is an unsigned message of transaction tx, as the worker
// sends it to a broker without PAYLOCK_FORWARD_SECRETS.
func brokerMessage(tx string) forward.Message {
	now := time.Now()
	id := "pay_" + tx
	return forward.Message{ID: id, Type: "payment.recorded", Timestamp: now, Key: "acme:" + tx,
		Body:   []byte(`{"type":"payment.recorded","data":{"source":"acme","transaction_id":"` + tx + `"}}`),
		Header: map[string]string{forward.HeaderID: id, forward.HeaderTimestamp: now.Format(time.RFC3339)}}
}

func openSink(t *testing.T, url string, timeout time.Duration) forward.Sink {
	t.Helper()
	s, err := forward.OpenSink(url, forward.SinkConfig{Timeout: timeout})
	if err != nil {
		t.Fatalf("OpenSink(%s): %v", forward.Redact(url), err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// streamIDs returns the Nats-Msg-Id of every message in stream name.
func streamIDs(t *testing.T, url, name string) []string {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
	}
	return ids
}

func TestNATSStoresARetriedMessageOnceByItsWebhookID(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := openSink(t, srv.URL+"/paylock.payments?stream=PAYMENTS&create=true", 5*time.Second)
	m := brokerMessage("tx-1")
	for attempt := range 3 {
		m.Header[forward.HeaderTimestamp] = time.Now().Add(time.Duration(attempt) * time.Second).Format(time.RFC3339)
		if err := s.Deliver(context.Background(), m); err != nil {
			t.Fatalf("attempt %d: %v", attempt+1, err)
		}
	}
	if ids := streamIDs(t, srv.URL, "PAYMENTS"); len(ids) != 1 || ids[0] != m.ID {
		t.Errorf("the stream holds %v; want %s once", ids, m.ID)
	}
}

func TestNATSSubjectNoStreamTakesIsARetryableErrorSayingSo(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := openSink(t, "nats://paylock:hunter2@"+strings.TrimPrefix(srv.URL, "nats://")+"/paylock.nowhere?insecure=true", 5*time.Second)
	err := s.Deliver(context.Background(), brokerMessage("tx-1"))
	if err == nil || errors.Is(err, forward.ErrPermanent) || !strings.Contains(err.Error(), "no JetStream stream takes subject") ||
		strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Deliver to a subject without a stream: %v; want a retryable error saying so, without the password", err)
	}
}

func TestNATSDeliveryFailsWhileTheServerIsDownAndResumesOnItsStore(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := openSink(t, srv.URL+"/paylock.payments?stream=PAYMENTS&create=true", time.Second)
	if err := s.Deliver(context.Background(), brokerMessage("tx-1")); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := s.Deliver(context.Background(), brokerMessage("tx-2")); err == nil || errors.Is(err, forward.ErrPermanent) {
		t.Fatalf("Deliver while the server is down: %v; want a retryable error", err)
	}
	srv.Restart(t)
	m := brokerMessage("tx-2")
	deadline := time.Now().Add(15 * time.Second)
	for err := s.Deliver(context.Background(), m); err != nil; err = s.Deliver(context.Background(), m) {
		if time.Now().After(deadline) {
			t.Fatalf("Deliver after the restart: %v", err)
		}
	}
	ids := streamIDs(t, srv.URL, "PAYMENTS")
	if len(ids) != 2 || ids[0] != "pay_tx-1" || ids[1] != "pay_tx-2" {
		t.Errorf("the stream holds %v; want pay_tx-1 (kept across the kill) then pay_tx-2, once each", ids)
	}
}

func TestKafkaRecordsOfOnePaymentShareAPartitionInOrder(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, "payments"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := openSink(t, "kafka://"+strings.Join(c.ListenAddrs(), ",")+"/payments", 5*time.Second)
	for i := range 6 {
		m := brokerMessage("tx-" + string(rune('a'+i%2)))
		m.ID = m.ID + "-" + string(rune('0'+i))
		m.Header[forward.HeaderID] = m.ID
		if err := s.Deliver(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("payments"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	partition := map[string]int32{}
	order := map[string][]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for n := 0; n < 6; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of 6 records: %v", n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			key := string(r.Key)
			if p, seen := partition[key]; seen && p != r.Partition {
				t.Errorf("key %s on partitions %d and %d", key, p, r.Partition)
			}
			partition[key] = r.Partition
			for _, h := range r.Headers {
				if h.Key == forward.HeaderID {
					order[key] = append(order[key], string(h.Value))
				}
			}
		})
	}
	want := map[string][]string{"acme:tx-a": {"pay_tx-a-0", "pay_tx-a-2", "pay_tx-a-4"}, "acme:tx-b": {"pay_tx-b-1", "pay_tx-b-3", "pay_tx-b-5"}}
	for k, ids := range want {
		if strings.Join(order[k], ",") != strings.Join(ids, ",") {
			t.Errorf("key %s: webhook-ids %v, want %v in this order", k, order[k], ids)
		}
	}
}

func TestBrokerURLsAreCheckedWithoutPrintingCredentials(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"nats://u:hunter2@127.0.0.1:4222/", "subject"},
		{"nats://u:hunter2@127.0.0.1:4222/paylock.*", "wildcards"},
		{"nats://127.0.0.1:4222/paylock?create=true&token=hunter2", "stream=NAME"},
		{"nats://127.0.0.1:4222/paylock?stream=A.B&token=hunter2", "stream"},
		{"kafka://u:hunter2@k1:9092/", "topic"},
		{"kafka://k1:9092/pay ments?password=hunter2", "topic"},
		{"kafka://k1:9092/payments?sasl=gssapi&user=u&password=hunter2", "sasl"},
		{"kafka://k1:9092,/payments", "absolute"},
		{"kafka://k1:9092/payments?create=maybe&password=hunter2", "create"},
	} {
		err := forward.CheckURL(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("CheckURL(%q) = %v; want an error saying %q, without the secret", c.in, err, c.want)
		}
	}
	for _, ok := range []string{"nats://127.0.0.1:4222,127.0.0.1:4223/paylock.payments?stream=PAYMENTS&create=true&duplicates=10m",
		"nats://t0ken@nats.internal:4222/paylock.payments?tls=true", "kafka://u:p@k1:9092,k2:9092/payments?sasl=scram-sha-512&tls=true&create=true"} {
		if err := forward.CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q) = %v", ok, err)
		}
	}
	for in, want := range map[string]string{
		"kafka://paylock:hunter2@k1:9092,k2:9092/payments":     "kafka://paylock:xxxxx@k1:9092,k2:9092/payments",
		"nats://127.0.0.1:4222/paylock?token=hunter2&stream=P": "nats://127.0.0.1:4222/paylock?stream=xxxxx&token=xxxxx",
	} {
		if got := forward.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNATSCredentialsComeFromTheURLAndAreNeverPrinted(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t, "--user", "paylock", "--pass", "s3cret-pass")
	hostport := strings.TrimPrefix(srv.URL, "nats://")
	good := openSink(t, "nats://paylock:s3cret-pass@"+hostport+"/paylock.payments?stream=PAYMENTS&create=true&insecure=true", 5*time.Second)
	if err := good.Deliver(context.Background(), brokerMessage("tx-1")); err != nil {
		t.Fatalf("Deliver with the server's user and password: %v", err)
	}
	bad := openSink(t, "nats://"+hostport+"/paylock.payments?user=paylock&password=wrong-hunter2&insecure=true", time.Second)
	err := bad.Deliver(context.Background(), brokerMessage("tx-2"))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Deliver with a wrong password: %v; want an error without the password", err)
	}
}

func TestKafkaSASLCredentialsComeFromTheURLAndAreNeverPrinted(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "payments"), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "paylock", "s3cret-pass"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	good := openSink(t, "kafka://paylock:s3cret-pass@"+addr+"/payments?sasl=scram-sha-256&insecure=true", 5*time.Second)
	if err := good.Deliver(context.Background(), brokerMessage("tx-1")); err != nil {
		t.Fatalf("Deliver with the cluster's user and password: %v", err)
	}
	bad := openSink(t, "kafka://paylock:wrong-hunter2@"+addr+"/payments?sasl=scram-sha-256&insecure=true", 2*time.Second)
	err = bad.Deliver(context.Background(), brokerMessage("tx-2"))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Deliver with a wrong password: %v; want an error without the password", err)
	}
}
