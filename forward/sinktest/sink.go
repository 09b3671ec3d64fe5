package sinktest

import (
	"bytes"
	"context"
	"errors"
	"strconv"
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

// runSink runs the cases on the sink alone.
func runSink(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := context.Background()
	deliver := func(t *testing.T, m forward.Message) ([]Received, error) {
		t.Helper()
		n := len(h.Received())
		err := s.Deliver(ctx, m)
		return since(h, n), err
	}
	t.Run("a message arrives once with its headers and body", func(t *testing.T) {
		m := message(t, "sink-accepted", true)
		got, err := deliver(t, m)
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
		got, err := deliver(t, m)
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
		got, err := deliver(t, m)
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
		got, err := deliver(t, m)
		if err == nil || errors.Is(err, forward.ErrPermanent) {
			t.Fatalf("Deliver to a destination refusing for now: %v; want an error, not forward.ErrPermanent", err)
		}
		checkArrived(t, h, got, m, false)
		if got, err = deliver(t, m); err != nil {
			t.Fatalf("Deliver once the destination takes it again: %v", err)
		}
		checkArrived(t, h, got, m, true)
	})
	t.Run("a permanent refusal says so", func(t *testing.T) {
		if h.RefusePermanently == nil {
			t.Skip("nothing this kind of destination answers is permanent")
		}
		m := message(t, "sink-permanent", true)
		h.RefusePermanently()
		_, err := deliver(t, m)
		if !errors.Is(err, forward.ErrPermanent) {
			t.Fatalf("Deliver to a destination refusing for good: %v; want forward.ErrPermanent", err)
		}
	})
}
