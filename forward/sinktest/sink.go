package sinktest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/signature"
)

// message is a signed (or, with sign false, unsigned) message of the table.
func message(t *testing.T, id string, sign bool) forward.Message {
	t.Helper()
	now := time.Now()
	body := []byte(`{"type":"payment.recorded","data":{"source":"sinktest","transaction_id":"` + id + `","amount":1999}}`)
	m := forward.Message{ID: id, Type: "payment.recorded", Timestamp: now, Key: "sinktest:" + id, Body: body,
		Header: map[string]string{forward.HeaderID: id, forward.HeaderTimestamp: strconv.FormatInt(now.Unix(), 10)}}
	if sign {
		h := signature.Sign(signature.SchemeStandard, secret(t), id, now, body)
		m.Header[forward.HeaderSignature] = h.Get(signature.HeaderWebhookSignature)
	}
	return m
}

// open opens the sink of h's URL, closed when the test ends.
func open(t *testing.T, h Harness) forward.Sink {
	t.Helper()
	s, err := forward.OpenSink(h.URL, forward.SinkConfig{Timeout: 5 * time.Second, TLS: h.TLS})
	if err != nil {
		t.Fatalf("OpenSink(%s): %v", forward.Redact(h.URL), err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// checkArrived checks that got is exactly m, arrived once and accepted
// as h says.
func checkArrived(t *testing.T, h Harness, got []Received, m forward.Message, accepted bool) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("the destination received %d messages, want 1", len(got))
	}
	r := got[0]
	if r.Accepted != accepted {
		t.Errorf("the destination's verdict: accepted %v, want %v", r.Accepted, accepted)
	}
	for _, k := range []string{forward.HeaderID, forward.HeaderTimestamp, forward.HeaderSignature} {
		if r.Header[k] != m.Header[k] {
			t.Errorf("header %s: %q arrived, %q was sent", k, r.Header[k], m.Header[k])
		}
	}
	if !bytes.Equal(r.Body, m.Body) {
		t.Errorf("body %q arrived, %q was sent", r.Body, m.Body)
	}
	if h.Keyed && r.Key != m.Key {
		t.Errorf("key %q arrived, %q was sent", r.Key, m.Key)
	}
}

// sinkUnder is the sink under test and its harness.
type sinkUnder struct {
	h Harness
	s forward.Sink
}

// deliver delivers m and returns what the destination received meanwhile.
func (u sinkUnder) deliver(t *testing.T, m forward.Message) ([]Received, error) {
	t.Helper()
	n := len(u.h.Received())
	err := u.s.Deliver(context.Background(), m)
	return since(u.h, n), err
}

// runSink runs the cases on the sink alone: those of every sink, then
// each capability's or its absence's, as caps says.
func runSink(t *testing.T, h Harness, caps forward.Capabilities) {
	u := sinkUnder{h: h, s: open(t, h)}
	t.Run("a message arrives once with its headers and body", func(t *testing.T) {
		m := message(t, "sink-accepted", true)
		got, err := u.deliver(t, m)
		if err != nil {
			t.Fatalf("Deliver to a destination that takes it: %v", err)
		}
		checkArrived(t, h, got, m, true)
		if err := verify(t, got[0]); err != nil {
			t.Errorf("the message's signature does not verify as it arrived: %v", err)
		}
	})
	t.Run("an unsigned message arrives without a signature", func(t *testing.T) {
		m := message(t, "sink-unsigned", false)
		got, err := u.deliver(t, m)
		if err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		checkArrived(t, h, got, m, true)
		if sig, ok := got[0].Header[forward.HeaderSignature]; ok {
			t.Errorf("an unsigned message arrived with webhook-signature %q", sig)
		}
	})
	t.Run("a message's trace context arrives with it", func(t *testing.T) {
		m := message(t, "sink-traced", true)
		m.Header["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		m.Header["tracestate"] = "paylock=sinktest"
		got, err := u.deliver(t, m)
		if err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		checkArrived(t, h, got, m, true)
		for _, k := range []string{"traceparent", "tracestate"} {
			if got[0].Header[k] != m.Header[k] {
				t.Errorf("header %s: %q arrived, %q was sent: a sink sends every header of the message", k, got[0].Header[k], m.Header[k])
			}
		}
		if err := verify(t, got[0]); err != nil {
			t.Errorf("with trace headers, the signature does not verify: %v", err)
		}
	})
	t.Run("a refusal is an error that may be retried", func(t *testing.T) {
		m := message(t, "sink-refused", true)
		h.Refuse(1)
		got, err := u.deliver(t, m)
		if !errors.Is(err, forward.ErrRejected) || errors.Is(err, forward.ErrPermanent) {
			t.Fatalf("Deliver to a destination refusing for now: %v; want an error wrapping forward.ErrRejected, not forward.ErrPermanent", err)
		}
		checkArrived(t, h, got, m, false)
		if got, err = u.deliver(t, m); err != nil {
			t.Fatalf("Deliver once the destination takes it again: %v", err)
		}
		checkArrived(t, h, got, m, true)
	})
	if caps.PermanentRefusals {
		t.Run("a permanent refusal says so", u.permanentRefusal)
	} else {
		t.Run("no refusal is permanent", u.noPermanentRefusal)
	}
	if caps.OrderedPerKey {
		t.Run("messages of one key arrive in the order they were delivered, in one lane", u.orderedPerKey)
	} else {
		t.Run("messages of one key delivered at once each arrive once", u.atOnce)
	}
	if _, ok := u.s.(forward.BatchSink); ok {
		t.Run("a batch delivers each of its messages once, one outcome each", u.batch)
	}
	if caps.Network {
		t.Run("a destination that does not answer is a failed attempt, not an error at opening", u.silentDestination)
	} else {
		t.Run("a destination that is not there is refused at opening", u.absentDestination)
	}
}

// batch: a BatchSink's DeliverBatch takes five messages of different
// keys, answers one outcome each, and each arrives once with its headers
// and body.
func (u sinkUnder) batch(t *testing.T) {
	bs := u.s.(forward.BatchSink)
	n := len(u.h.Received())
	sent := make([]forward.Message, 5)
	for i := range sent {
		sent[i] = message(t, "sink-batch-"+strconv.Itoa(i), true)
		sent[i].Key = "sinktest:batch-" + strconv.Itoa(i)
	}
	errs := bs.DeliverBatch(context.Background(), sent)
	if len(errs) != len(sent) {
		t.Fatalf("DeliverBatch returned %d outcomes for %d messages", len(errs), len(sent))
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
	got := since(u.h, n)
	for _, m := range sent {
		arrived := byID(u.h, m.ID)
		if len(arrived) != 1 {
			t.Errorf("%s arrived %d times, want once", m.ID, len(arrived))
			continue
		}
		checkArrived(t, u.h, arrived, m, true)
	}
	if len(got) != len(sent) {
		t.Errorf("%d messages arrived, want %d", len(got), len(sent))
	}
}

// permanentRefusal: a sink declaring PermanentRefusals says so.
func (u sinkUnder) permanentRefusal(t *testing.T) {
	m := message(t, "sink-permanent", true)
	u.h.RefusePermanently()
	got, err := u.deliver(t, m)
	if !errors.Is(err, forward.ErrPermanent) {
		t.Fatalf("Deliver to a destination refusing for good: %v; want forward.ErrPermanent", err)
	}
	checkArrived(t, u.h, got, m, false)
}

// noPermanentRefusal: a sink without PermanentRefusals returns
// forward.ErrRejected, never forward.ErrPermanent, for refusal after
// refusal (each of the harness's kinds of refusal).
func (u sinkUnder) noPermanentRefusal(t *testing.T) {
	const n = 6
	u.h.Refuse(n)
	for i := range n {
		m := message(t, "sink-never-permanent-"+strconv.Itoa(i), true)
		got, err := u.deliver(t, m)
		if !errors.Is(err, forward.ErrRejected) || errors.Is(err, forward.ErrPermanent) {
			t.Errorf("refusal %d: Deliver returned %v; the sink declares no PermanentRefusals: want forward.ErrRejected, never forward.ErrPermanent", i+1, err)
			continue
		}
		checkArrived(t, u.h, got, m, false)
	}
}

// orderedPerKey: a sink declaring OrderedPerKey keeps the messages of
// each of three keys, delivered interleaved, in their order, in one lane.
func (u sinkUnder) orderedPerKey(t *testing.T) {
	n := len(u.h.Received())
	var sent []forward.Message
	for i := range 3 {
		for _, key := range []string{"a", "b", "c"} {
			m := message(t, "sink-ordered-"+key+strconv.Itoa(i), true)
			m.Key = "sinktest:ordered-" + key
			if err := u.s.Deliver(context.Background(), m); err != nil {
				t.Fatalf("Deliver %s: %v", m.ID, err)
			}
			sent = append(sent, m)
		}
	}
	checkOrdered(t, u.h, since(u.h, n), sent)
}

// atOnce: a sink without OrderedPerKey promises no order, only that
// messages of one key delivered at once each arrive once.
func (u sinkUnder) atOnce(t *testing.T) {
	n := len(u.h.Received())
	sent := make([]forward.Message, 6)
	errs := make([]error, len(sent))
	var wg sync.WaitGroup
	for i := range sent {
		sent[i] = message(t, "sink-at-once-"+strconv.Itoa(i), true)
		sent[i].Key = "sinktest:at-once"
		wg.Go(func() { errs[i] = u.s.Deliver(context.Background(), sent[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Deliver at once: %v", err)
	}
	got := since(u.h, n)
	for _, m := range sent {
		var once []Received
		for _, r := range got {
			if r.Header[forward.HeaderID] == m.ID {
				once = append(once, r)
			}
		}
		checkArrived(t, u.h, once, m, true)
	}
}

// silentDestination: a sink declaring Network opens a destination nobody
// answers at without waiting on it, and fails a Deliver to it within its
// timeout, with an error that is tried again.
func (u sinkUnder) silentDestination(t *testing.T) {
	nowhere := elsewhere(t, u.h.URL, closedAddr(t))
	timeout := time.Second
	s, err := forward.OpenSink(nowhere, forward.SinkConfig{Timeout: timeout, TLS: u.h.TLS})
	if err != nil {
		t.Fatalf("OpenSink of a destination nobody answers at: %v; opening must not wait on the network", err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	start := time.Now()
	err = s.Deliver(context.Background(), message(t, "sink-nowhere", true))
	if err == nil || errors.Is(err, forward.ErrPermanent) {
		t.Errorf("Deliver to a destination nobody answers at: %v; want an error that is tried again, not forward.ErrPermanent", err)
	}
	if took := time.Since(start); took > timeout+10*time.Second {
		t.Errorf("Deliver took %s with a timeout of %s: it must give up within its timeout", took.Round(time.Millisecond), timeout)
	}
}

// absentDestination: a sink without Network finds its destination when it
// opens, or fails.
func (u sinkUnder) absentDestination(t *testing.T) {
	nowhere := elsewhere(t, u.h.URL, "nowhere.invalid")
	s, err := forward.OpenSink(nowhere, forward.SinkConfig{Timeout: time.Second})
	if err == nil {
		_ = s.Close()
		t.Fatalf("OpenSink of %s succeeded; a sink without Network finds its destination when it opens, or fails", forward.Redact(nowhere))
	}
}

// checkOrdered checks that every message sent arrived once, accepted, and
// that the messages of each key arrived in the order they were sent, all
// in one lane.
func checkOrdered(t *testing.T, h Harness, got []Received, sent []forward.Message) {
	t.Helper()
	pos := map[string]int{}
	for i, r := range got {
		if _, dup := pos[r.Header[forward.HeaderID]]; dup {
			t.Errorf("%s arrived twice", r.Header[forward.HeaderID])
		}
		pos[r.Header[forward.HeaderID]] = i
	}
	last := map[string]forward.Message{} // by key
	for _, m := range sent {
		i, ok := pos[m.ID]
		if !ok {
			t.Errorf("%s (key %s) never arrived", m.ID, m.Key)
			continue
		}
		checkArrived(t, h, got[i:i+1], m, true)
		prev, ok := last[m.Key]
		last[m.Key] = m
		if !ok {
			continue
		}
		if pos[prev.ID] > i {
			t.Errorf("key %s: %s arrived before %s, delivered after it", m.Key, m.ID, prev.ID)
		}
		if lane, prevLane := got[i].Lane, got[pos[prev.ID]].Lane; lane != prevLane {
			t.Errorf("key %s: %s is in lane %q, %s in lane %q: a key's messages share one lane", m.Key, m.ID, lane, prev.ID, prevLane)
		}
	}
}

// elsewhere is rawURL with its host replaced by host: the same kind of
// destination at a place where there is none.
func elsewhere(t *testing.T, rawURL, host string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		t.Fatalf("the harness's URL %s has no host to replace (%v)", forward.Redact(rawURL), err)
	}
	u.Host = host
	return u.String()
}

// closedAddr is a loopback host:port nothing listens on (one that was
// listened on and closed).
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
