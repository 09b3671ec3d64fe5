package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/provider"
)

// Errors of Sync's methods (each wrapped with the *problem.Problem its
// answer is), besides the handler's (handler.ErrUnknownSource
// for a source it was not given) and the adapter's.
var (
	// ErrNoAPI: the source's provider has no status API (provider.Syncer)
	// or the source has no key for it; no payment of it can be synced.
	ErrNoAPI = errors.New("reconcile: the source has no status API to sync from")
	// ErrNoConfirm: the source's provider takes no confirmed answer
	// (provider.Confirmer).
	ErrNoConfirm = errors.New("reconcile: the source takes no confirmed answer")
	// ErrProvider wraps the error of a provider's API that did not answer
	// (a network error, a 5xx, a refused key): nothing was recorded.
	ErrProvider = errors.New("reconcile: the provider's API failed")
)

// Syncer is the part of *handler.Handler Sync uses.
type Syncer interface {
	Sync(ctx context.Context, source string, body []byte, how string) (handler.IngestResult, error)
}

// Sync asks a provider about one payment, or takes the provider's answer
// from the shop's backend, and records what it says through the pipeline a
// webhook takes (handler.Handler.Sync): the same adapter, lock, insert and
// forward hook. Whichever of a sync and the webhook comes first records;
// the other is a duplicate.
type Sync struct {
	Handler Syncer
	// Sources are the names of every source the handler serves: another
	// name is handler.ErrUnknownSource.
	Sources []string
	// Fetchers are the status APIs of the sources that have one, by
	// source name.
	Fetchers map[string]provider.Fetcher
	// Confirmers are the sources whose providers take a confirmed answer
	// (Adyen's), by source name.
	Confirmers map[string]Confirmer
}

// Confirmer is a source's provider.Confirmer with the source's settings.
type Confirmer struct {
	Provider provider.Confirmer
	Settings provider.Settings
}

// SyncResult is what one sync or confirm came to.
type SyncResult struct {
	// Result is the pipeline's: "processed" (recorded now), "duplicate"
	// (recorded already, by the webhook or an earlier sync), "ignored"
	// (the source records no event of that kind); or "not_final" when the
	// provider's state is not one to record yet (nothing was written).
	Result string
	// Ref is the payment's transaction id.
	Ref string
	// ProviderStatus is what the provider said: a PaymentIntent's status,
	// an Adyen resultCode.
	ProviderStatus string
}

func (s *Sync) known(source string) error {
	if !slices.Contains(s.Sources, source) {
		return fmt.Errorf("%w: %w: %q", problem.New(http.StatusNotFound, "not-found", "Not found", "source",
			"no source "+strconv.Quote(source)+" (PAYLOCK_SOURCES_FILE)"), handler.ErrUnknownSource, source)
	}
	return nil
}

// HasAPI reports whether source's payments can be synced.
func (s *Sync) HasAPI(source string) bool { _, ok := s.Fetchers[source]; return ok }

// Payment fetches the payment ref of source from its provider's API and
// records it. It returns ErrNoAPI for a source without a status API, an
// error wrapping provider.ErrNoSuchPayment when the provider knows no such
// payment, ErrProvider when the API failed, or the pipeline's error
// (store.ErrMismatch when paylock holds the payment with other content).
func (s *Sync) Payment(ctx context.Context, source, ref string) (SyncResult, error) {
	if err := s.known(source); err != nil {
		return SyncResult{}, err
	}
	f, ok := s.Fetchers[source]
	if !ok {
		return SyncResult{}, fmt.Errorf("%w: %w: %q", problem.New(http.StatusUnprocessableEntity, "no-sync", "Cannot sync this source", "source",
			"source "+strconv.Quote(source)+" has no status API to sync from: a stripe source with its api_key_env set"), ErrNoAPI, source)
	}
	body, status, err := f.Fetch(ctx, ref)
	switch {
	case errors.Is(err, provider.ErrNoSuchPayment):
		return SyncResult{}, fmt.Errorf("%w: %w", problem.New(http.StatusNotFound, "not-found", "Not found", "transaction_id",
			"the provider's API knows no payment "+strconv.Quote(ref)), err)
	case err != nil:
		return SyncResult{}, fmt.Errorf("%w: %w: %w", problem.New(http.StatusBadGateway, "provider-failed", "Provider API failed", "",
			"the provider's API did not answer; nothing was recorded (the reason is in paylock's log)"), ErrProvider, err)
	case body == nil:
		return SyncResult{Result: "not_final", Ref: ref, ProviderStatus: status}, nil
	}
	res, err := s.Handler.Sync(ctx, source, body, "synced")
	if err != nil {
		return SyncResult{}, err
	}
	return SyncResult{Result: res.Result, Ref: ref, ProviderStatus: status}, nil
}

// Confirm records the provider's synchronous answer about one payment of
// source, as the shop's backend received it. It returns ErrNoConfirm for
// a source whose provider takes none, the provider's *payload.Error for an
// answer it refuses, or the pipeline's error.
func (s *Sync) Confirm(ctx context.Context, source string, answer []byte) (SyncResult, error) {
	if err := s.known(source); err != nil {
		return SyncResult{}, err
	}
	c, ok := s.Confirmers[source]
	if !ok {
		return SyncResult{}, fmt.Errorf("%w: %w: %q", problem.New(http.StatusUnprocessableEntity, "no-sync", "Cannot sync this source", "source",
			"source "+strconv.Quote(source)+" takes no confirmed answer: an adyen source does; a source with a status API is synced"), ErrNoConfirm, source)
	}
	body, ref, status, err := c.Provider.ConfirmBody(c.Settings, answer)
	if err != nil {
		return SyncResult{}, err
	}
	if body == nil {
		return SyncResult{Result: "not_final", Ref: ref, ProviderStatus: status}, nil
	}
	res, err := s.Handler.Sync(ctx, source, body, "confirmed")
	if err != nil {
		return SyncResult{}, err
	}
	return SyncResult{Result: res.Result, Ref: ref, ProviderStatus: status}, nil
}
