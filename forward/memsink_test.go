package forward_test

import (
	"context"
	"errors"
	"maps"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/forward/sinktest"
)

// memtest is a sink for this package's tests only: a broker-like
// destination in memory that keeps each message's key, in one list in the
// order Deliver took them, and can refuse a message for good. It declares
// no Network (the conformance table checks that a destination that is not
// there is refused at opening, its in-process form of "does not answer")
// and no Signs (it takes unsigned messages, as a broker does).
func init() {
	forward.RegisterSink("memtest", forward.Capabilities{OrderedPerKey: true, PermanentRefusals: true}, openMem)
	harnesses["memtest"] = memHarness
}

var (
	memMu           sync.Mutex
	memDestinations = map[string]*memDestination{} // by URL host
	memNext         atomic.Int64
)

type memDestination struct {
	mu        sync.Mutex
	got       []sinktest.Received
	refuse    int
	permanent bool
}

type memSink struct{ d *memDestination }

func openMem(u *url.URL, _ forward.SinkConfig) (forward.Sink, error) {
	memMu.Lock()
	defer memMu.Unlock()
	d, ok := memDestinations[u.Host]
	if !ok {
		return nil, errors.New("no such memtest destination")
	}
	return memSink{d}, nil
}

func (s memSink) Deliver(_ context.Context, m forward.Message) error {
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	r := sinktest.Received{Header: maps.Clone(m.Header), Key: m.Key, Body: append([]byte(nil), m.Body...)}
	switch {
	case d.permanent:
		d.permanent = false
		d.got = append(d.got, r)
		return &forward.DeliveryError{Permanent: true, Reason: "the broker refused the message for good"}
	case d.refuse > 0:
		d.refuse--
		d.got = append(d.got, r)
		return &forward.DeliveryError{Reason: "the broker is busy"}
	}
	r.Accepted = true
	d.got = append(d.got, r)
	return nil
}

func (memSink) Close() error { return nil }

func memHarness(t *testing.T) sinktest.Harness {
	host := "d" + strconv.FormatInt(memNext.Add(1), 10)
	d := &memDestination{}
	memMu.Lock()
	memDestinations[host] = d
	memMu.Unlock()
	t.Cleanup(func() {
		memMu.Lock()
		delete(memDestinations, host)
		memMu.Unlock()
	})
	return sinktest.Harness{
		URL: "memtest://" + host + "/topic",
		Received: func() []sinktest.Received {
			d.mu.Lock()
			defer d.mu.Unlock()
			return append([]sinktest.Received(nil), d.got...)
		},
		Refuse: func(n int) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.refuse += n
		},
		RefusePermanently: func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.permanent = true
		},
		Keyed: true,
	}
}
