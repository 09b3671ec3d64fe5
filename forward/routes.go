package forward

import (
	"errors"
	"fmt"
)

// Routes are where a deployment's forwards go: its destinations by name,
// and the destinations of each payment source that forwards.
type Routes struct {
	Destinations Destinations
	// Policies are the destinations' routing and delivery settings (the
	// sources file's destinations); a destination without one takes the
	// zero Policy.
	Policies map[string]Policy
	// BySource is each forwarding source's first destination: where a
	// replay of its payments goes (paylock forward replay, the console).
	BySource map[string]string // source name -> destination name
	// ForwardTo is every destination of each forwarding source, in order
	// (forward_to; else BySource's alone).
	ForwardTo map[string][]string
	// Router routes each message to the destinations of ForwardTo that
	// take it; nil until the caller builds it (NewRouter).
	Router *Router
	// Operations is the destination of the operator events
	// (Config.Operations); "": none.
	Operations string
}

// SourceURL is a payment source and its own forward URL ("": none).
type SourceURL struct {
	Source string
	URL    string
}

// ErrDestinationTaken is wrapped by the *DestinationError of NewRoutes: a
// source's own URL would be the destination named after the source, and
// the name is already another URL's.
var ErrDestinationTaken = errors.New("forward: destination name taken by another URL")

// DestinationError names the source whose destination name is taken.
type DestinationError struct {
	Source string
}

func (e *DestinationError) Error() string {
	return fmt.Sprintf("%v: %q", ErrDestinationTaken, e.Source)
}

func (e *DestinationError) Unwrap() error { return ErrDestinationTaken }

// NewRoutes names the destinations: defaultURL ("": none) is
// DefaultDestination, where the sources without a URL of their own
// forward; a source with one is the destination named after it. A source
// named "default" whose URL is not defaultURL would make the name mean two
// places: a *DestinationError.
func NewRoutes(defaultURL string, sources []SourceURL) (Routes, error) {
	r := Routes{Destinations: Destinations{}, BySource: map[string]string{}, Policies: map[string]Policy{}, ForwardTo: map[string][]string{}}
	if defaultURL != "" {
		r.Destinations[DefaultDestination] = defaultURL
	}
	for _, s := range sources {
		switch {
		case s.URL == "" && defaultURL != "":
			r.BySource[s.Source] = DefaultDestination
		case s.URL != "":
			if u, taken := r.Destinations[s.Source]; taken && u != s.URL {
				return Routes{}, &DestinationError{Source: s.Source}
			}
			r.Destinations[s.Source] = s.URL
			r.BySource[s.Source] = s.Source
		}
	}
	for src, d := range r.BySource {
		r.ForwardTo[src] = []string{d}
	}
	return r, nil
}
