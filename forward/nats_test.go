package forward_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/paylock/paylock/forward/sinktest"
	"github.com/paylock/paylock/internal/natstest"
)

func init() {
	harnesses["nats"] = natsHarness
}

// natsDestination is a JetStream stream on a throwaway nats-server, and a
// plain subscriber on its subject that sees every publish (those the
// stream refuses too). To refuse, it moves the stream off the subject and
// answers the publish itself with a JetStream error, as a stream that
// cannot take it would; it puts the stream back before answering the
// last refusal, so the next publish finds it.
type natsDestination struct {
	t       testing.TB
	js      jetstream.JetStream
	stream  jetstream.StreamConfig
	mu      sync.Mutex
	got     []sinktest.Received
	refuse  int
	forGood bool
}

// natsSync is the subject Received asks on, through the subscriber, to
// know it has seen every publish the sink made before: one subscription
// handles its messages in the order the server routed them.
const natsSync = "paylock.sync"

// natsRefusal is the JetStream error a refused publish gets: a stream that
// is unavailable for now, or (forGood) one that never takes a message
// this large.
func natsRefusal(forGood bool) []byte {
	if forGood {
		return []byte(`{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"}}`)
	}
	return []byte(`{"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}`)
}

func (d *natsDestination) receive(m *nats.Msg) {
	if m.Subject == natsSync {
		_ = m.Respond(nil) // every earlier publish has been seen
		return
	}
	h := map[string]string{}
	for k, v := range m.Header {
		h[strings.ToLower(k)] = v[0]
	}
	d.mu.Lock()
	refused, forGood := d.refuse > 0 || d.forGood, d.forGood
	if d.forGood {
		d.forGood = false
	} else if d.refuse > 0 {
		d.refuse--
	}
	last := refused && d.refuse == 0 && !d.forGood
	d.got = append(d.got, sinktest.Received{Header: h, Body: m.Data, Accepted: !refused})
	d.mu.Unlock()
	if !refused {
		return // the stream answers
	}
	if last {
		d.park(false)
	}
	_ = m.Respond(natsRefusal(forGood))
}

// park moves the stream off its subject (or back onto it).
func (d *natsDestination) park(away bool) {
	cfg := d.stream
	if away {
		cfg.Subjects = []string{cfg.Subjects[0] + ".parked"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.js.UpdateStream(ctx, cfg); err != nil {
		d.t.Errorf("update stream %s: %v", cfg.Name, err)
	}
}

func (d *natsDestination) refuseNext(n int, forGood bool) {
	d.mu.Lock()
	d.refuse += n
	d.forGood = d.forGood || forGood
	d.mu.Unlock()
	d.park(true)
}

// natsHarness starts a nats-server, a stream SINKTEST on subject
// paylock.sinktest and the subscriber (of paylock.>) that records what
// arrives.
func natsHarness(t *testing.T) sinktest.Harness {
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	d := &natsDestination{t: t, js: js, stream: jetstream.StreamConfig{Name: "SINKTEST", Subjects: []string{"paylock.sinktest"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, d.stream); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("paylock.>", d.receive); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sinktest.Harness{
		URL: srv.URL + "/paylock.sinktest?stream=SINKTEST",
		Received: func() []sinktest.Received {
			if _, err := nc.Request(natsSync, nil, 5*time.Second); err != nil {
				t.Errorf("the subscriber did not catch up: %v", err)
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			return append([]sinktest.Received(nil), d.got...)
		},
		Refuse:            func(n int) { d.refuseNext(n, false) },
		RefusePermanently: func() { d.refuseNext(0, true) },
	}
}
