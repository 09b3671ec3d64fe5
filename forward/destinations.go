package forward

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/paylock/paylock/store"
)

// Destinations are where forwards go, by name: a job names its destination
// (store.ForwardArgs.Destination), never its URL, so that no URL (nor its
// credentials) is written into the job table, and a destination's URL may
// change without touching the jobs that name it.
//
// DefaultDestination is PAYLOCK_FORWARD_URL; a source with a forward_url of
// its own is the destination named after the source.
type Destinations map[string]string

// DefaultDestination is the name of PAYLOCK_FORWARD_URL's destination, where
// disbursement status changes and the payments of sources without a
// forward_url of their own go.
const DefaultDestination = "default"

// LegacyDestination is the Event.Destination of a job inserted before
// destinations were named, which carries its URL instead (and whose URL is
// none of the configured destinations').
const LegacyDestination = "(url)"

// Names returns the destinations' names, sorted.
func (d Destinations) Names() []string { return slices.Sorted(maps.Keys(d)) }

// Redacted returns the destinations with their URLs fit to print (Redact).
func (d Destinations) Redacted() map[string]string {
	out := make(map[string]string, len(d))
	for name, u := range d {
		out[name] = Redact(u)
	}
	return out
}

// ErrNoDestination means a job names a destination this process does not
// have: the configuration changed since the job was inserted, or another
// replica runs another one. The attempt fails and is tried again.
var ErrNoDestination = errors.New("forward: no such destination here")

// sinkSet holds a worker's open sinks: one per destination, opened by New,
// and one per URL of the older jobs that carry a URL instead of a name,
// opened on first use. It is safe for concurrent use.
type sinkSet struct {
	cfg   SinkConfig
	dests Destinations
	named map[string]Sink // by destination name; read-only after openSinks
	// signed is whether the worker signs: an older job's http URL is not
	// opened without it.
	signed bool

	mu     sync.Mutex
	byURL  map[string]Sink // older jobs' URLs
	closed bool
}

// openSinks opens every destination's sink, each with its policy's
// timeout when it has one. Its errors wrap ErrConfig and
// name the destination, its URL redacted.
func openSinks(dests Destinations, policies map[string]Policy, cfg SinkConfig) (*sinkSet, error) {
	s := &sinkSet{cfg: cfg, dests: dests, named: map[string]Sink{}, byURL: map[string]Sink{}}
	for _, name := range dests.Names() {
		own := cfg
		if t := policies[name].Timeout; t > 0 {
			own.Timeout = t
		}
		sink, err := OpenSink(dests[name], own)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("%w: destination %q (%s): %v", ErrConfig, name, Redact(dests[name]), err)
		}
		s.named[name] = sink
	}
	return s, nil
}

// resolve returns the sink of a's destination and the destination's name
// (LegacyDestination for an older job's URL that no destination has).
// Errors wrap ErrNoDestination.
func (s *sinkSet) resolve(a store.ForwardArgs) (Sink, string, error) {
	if a.Destination != "" {
		if sink, ok := s.named[a.Destination]; ok {
			return sink, a.Destination, nil
		}
		return nil, a.Destination, fmt.Errorf("%w: %q (destinations: %v)", ErrNoDestination, a.Destination, s.dests.Names())
	}
	if a.URL == "" {
		return nil, "", fmt.Errorf("%w: the job names no destination", ErrNoDestination)
	}
	for _, name := range s.dests.Names() {
		if s.dests[name] == a.URL {
			return s.named[name], name, nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, LegacyDestination, fmt.Errorf("%w: the worker is stopping", ErrNoDestination)
	}
	if sink, ok := s.byURL[a.URL]; ok {
		return sink, LegacyDestination, nil
	}
	if NeedsSignature(a.URL) && !s.signed {
		return nil, LegacyDestination, fmt.Errorf("%w: the job's URL %s takes signed messages only, and this worker has no secret", ErrNoDestination, Redact(a.URL))
	}
	sink, err := OpenSink(a.URL, s.cfg)
	if err != nil {
		return nil, LegacyDestination, fmt.Errorf("%w: the job's URL %s: %v", ErrNoDestination, Redact(a.URL), err)
	}
	s.byURL[a.URL] = sink
	return sink, LegacyDestination, nil
}

// close closes every sink opened, once, and returns their errors joined.
func (s *sinkSet) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, sink := range s.named {
		errs = append(errs, sink.Close())
	}
	for _, sink := range s.byURL {
		errs = append(errs, sink.Close())
	}
	s.byURL = map[string]Sink{}
	return errors.Join(errs...)
}
