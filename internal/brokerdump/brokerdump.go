// Package brokerdump reads back what paylock's broker sinks wrote: every
// message of a NATS JetStream stream, or every record of a Kafka topic,
// with its webhook-id, Nats-Msg-Id, key and partition. Tests and the chaos
// scenarios (cmd/brokerdump) check with it that every payment arrived, how
// many times, and in version order (CheckOrder).
package brokerdump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Message is one message as the broker keeps it.
type Message struct {
	// ID is the webhook-id header.
	ID string `json:"id"`
	// MsgID is the Nats-Msg-Id header (NATS only).
	MsgID string `json:"msg_id,omitempty"`
	// Key is the record's key (Kafka only).
	Key       string `json:"key,omitempty"`
	Partition int32  `json:"partition"`
	Signed    bool   `json:"signed"`
	Body      []byte `json:"-"`
}

// NATS returns every message of stream name at the server url, in order.
func NATS(ctx context.Context, url, name string) ([]Message, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, fmt.Errorf("brokerdump: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("brokerdump: stream %s: %w", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []Message
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted
		}
		if err != nil {
			return nil, fmt.Errorf("brokerdump: message %d: %w", seq, err)
		}
		out = append(out, Message{ID: m.Header.Get("webhook-id"), MsgID: m.Header.Get(jetstream.MsgIDHeader),
			Signed: m.Header.Get("webhook-signature") != "", Body: m.Data})
	}
	return out, nil
}

// Kafka returns every record of topic at the brokers, partition by
// partition, each in offset order: it reads up to the end offsets it
// finds when it starts. opts are further client options (TLS, SASL).
func Kafka(ctx context.Context, brokers []string, topic string, opts ...kgo.Opt) ([]Message, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("brokerdump: end offsets of %s: %w", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	var out []Message
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("brokerdump: %d partitions not read to their end: %w", len(want), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset < end {
				out = append(out, kafkaMessage(r))
				if r.Offset+1 >= end {
					delete(want, r.Partition)
				}
			}
		})
	}
	return out, nil
}

func kafkaMessage(r *kgo.Record) Message {
	m := Message{Key: string(r.Key), Partition: r.Partition, Body: r.Value}
	for _, h := range r.Headers {
		switch strings.ToLower(h.Key) {
		case "webhook-id":
			m.ID = string(h.Value)
		case "webhook-signature":
			m.Signed = true
		}
	}
	return m
}

// Order is how a stream or topic kept each payment's messages: a payment's
// messages must be held in version order (data.version), since paylock
// sends version n+1 of a payment to a destination only after version n.
type Order struct {
	// Payments counts the payments (data.source, data.transaction_id)
	// whose messages carry a data.version; Versioned their messages.
	Payments  int `json:"payments"`
	Versioned int `json:"versioned"`
	// Inversions counts the messages held after a message of the same
	// payment with a higher version; Inverted the payments with one.
	Inversions int `json:"inversions"`
	Inverted   int `json:"inverted"`
	// Example names the first inverted payment and its versions as held,
	// "" when none is.
	Example string `json:"example,omitempty"`
}

// CheckOrder reads each message's body (paylock's {"type", "data"}) and
// checks, payment by payment, that the versions are non-decreasing in the
// order msgs holds them (NATS's stream order; Kafka's offset order, a
// payment's records being on one partition). Messages without a version
// are left out.
func CheckOrder(msgs []Message) Order {
	type key struct{ source, tx string }
	var o Order
	newest := map[key]int{}
	held := map[key][]int{}
	inverted := map[key]bool{}
	var first *key
	for _, m := range msgs {
		var b struct {
			Data struct {
				Source        string `json:"source"`
				TransactionID string `json:"transaction_id"`
				Version       int    `json:"version"`
			} `json:"data"`
		}
		if json.Unmarshal(m.Body, &b) != nil || b.Data.TransactionID == "" || b.Data.Version <= 0 {
			continue
		}
		k := key{b.Data.Source, b.Data.TransactionID}
		if _, seen := newest[k]; !seen {
			o.Payments++
		}
		o.Versioned++
		held[k] = append(held[k], b.Data.Version)
		if b.Data.Version < newest[k] {
			o.Inversions++
			if !inverted[k] {
				inverted[k] = true
				o.Inverted++
				if first == nil {
					first = &k
				}
			}
		}
		newest[k] = max(newest[k], b.Data.Version)
	}
	if first != nil {
		o.Example = fmt.Sprintf("%s/%s: versions %v", first.source, first.tx, held[*first])
	}
	return o
}
