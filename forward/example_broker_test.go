package forward_test

import (
	"context"
	"fmt"
	"log"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A consumer of the payments paylock forwards to nats://…/paylock.payments
// (stream PAYMENTS): a durable JetStream consumer that handles each
// webhook-id once, however often it arrives, and acks after handling. (The
// example in docs/brokers.md; it is compiled here, not run.)
func Example_natsConsumer() {
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Drain()
	js, _ := jetstream.New(nc)
	cons, err := js.CreateOrUpdateConsumer(context.Background(), "PAYMENTS",
		jetstream.ConsumerConfig{Durable: "ledger", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		log.Fatal(err)
	}
	seen := map[string]bool{} // in a ledger: a UNIQUE webhook_id column, written with the effect
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if id := m.Headers().Get("webhook-id"); !seen[id] {
			seen[id] = true
			fmt.Printf("payment %s: %s\n", id, m.Data())
		}
		_ = m.Ack()
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Stop()
	select {}
}

// A consumer of the payments paylock forwards to kafka://…/payments: a
// consumer group that handles each webhook-id once (a record may come
// twice: a forward retried after its record was written) and commits after
// handling. A payment's records share its key, source:transaction_id, so
// they come in order. (The example in docs/brokers.md; compiled here, not run.)
func Example_kafkaConsumer() {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"), kgo.ConsumeTopics("payments"),
		kgo.ConsumerGroup("ledger"), kgo.DisableAutoCommit())
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	seen := map[string]bool{} // in a ledger: a UNIQUE webhook_id column, written with the effect
	for {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if id := string(h.Value); h.Key == "webhook-id" && !seen[id] {
					seen[id] = true
					fmt.Printf("payment %s (%s): %s\n", id, r.Key, r.Value)
				}
			}
		})
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			log.Fatal(err)
		}
	}
}
