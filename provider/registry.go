package provider

import (
	"fmt"
	"regexp"
	"slices"
	"sync"
)

var (
	mu        sync.RWMutex
	providers = map[string]Provider{}
)

// name is what a provider may be called: the adapter value of the sources
// file.
var name = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Register makes p available under name, the value sources give as their
// adapter. It is meant to be called from the init function of p's package;
// it panics if p is nil, if name is not a lower-case token or if a provider
// is already registered under it, as database/sql's Register does. The
// names loans and payouts belong to paylock's own sources (package
// handler) and are never looked up here.
func Register(n string, p Provider) {
	mu.Lock()
	defer mu.Unlock()
	switch {
	case p == nil:
		panic("provider: Register of a nil provider " + n)
	case !name.MatchString(n):
		panic(fmt.Sprintf("provider: Register under %q: want a lower-case token (a-z, 0-9, _ and -)", n))
	}
	if _, dup := providers[n]; dup {
		panic("provider: Register called twice for provider " + n)
	}
	providers[n] = p
}

// Lookup returns the provider registered under name.
func Lookup(n string) (Provider, bool) {
	mu.RLock()
	defer mu.RUnlock()
	p, ok := providers[n]
	return p, ok
}

// Names returns the registered providers' names, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(providers))
	for n := range providers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
