package provider

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// ErrRefused is wrapped by an EventLister's error for a request the
// provider's API refused (a 4xx: a wrong key, a bad parameter): trying
// again will not help.
var ErrRefused = errors.New("provider: the provider's API refused the request")

// A Lister is a Provider whose API can list past events, so that paylock
// can find the payments whose webhooks it never received (package
// reconcile). Implementing it is optional.
type Lister interface {
	// NewLister returns the lister of one source, or a *SettingError for
	// settings New would refuse too.
	NewLister(cfg ListerConfig) (EventLister, error)
}

// ListerConfig is what a source's EventLister is built from.
type ListerConfig struct {
	// Source and Settings are the source's, as given to New.
	Source   string
	Settings Settings
	// URL is the API's base URL; "" is the provider's own.
	URL string
	// Key is the API's secret key. It never appears in an error.
	Key string
	// HTTP is the client the API is called with; nil is a client with a
	// 30s timeout.
	HTTP *http.Client
}

// An EventLister lists the events of one source that its adapter records.
type EventLister interface {
	// List calls fn with each event created at or after since, as the
	// provider's API gives them (an event may come twice). It returns
	// fn's error, or the API's: a refused request (a wrong key) wraps
	// ErrRefused.
	List(ctx context.Context, since time.Time, fn func(ListedEvent) error) error
}

// ListedEvent is one event of a provider's API.
type ListedEvent struct {
	// ID is the provider's event id (evt_...).
	ID string
	// Ref is what the event is about: the transaction id its payment
	// will be recorded under.
	Ref string
	// Body is the event as a webhook carries it: what the source's
	// adapter reads.
	Body []byte
}
