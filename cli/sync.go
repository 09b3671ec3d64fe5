package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/store"
)

// apiOf is the status API of src, a source whose provider has one: its
// base URL (api_url; else, for a provider.GlobalKeyed one (stripe),
// PAYLOCK_STRIPE_API_URL; else "", the provider's own) and its secret key
// (the variable api_key_env names; else, for a GlobalKeyed provider,
// STRIPE_API_KEY; "" when neither is set). A set api_key_env whose
// variable is empty is an error naming the variable, never its value.
func apiOf(cfg Config, src handler.Source) (url, key string, err error) {
	if p, ok := provider.Lookup(src.Provider); ok {
		if _, global := p.(provider.GlobalKeyed); global {
			url, key = cfg.Reconcile.StripeURL, cfg.Reconcile.stripeKey
		}
	}
	if raw, ok := src.Settings[provider.KeyAPIURL]; ok {
		if err := json.Unmarshal(raw, &url); err != nil {
			return "", "", fmt.Errorf("source %q: %s: want a URL", src.Name, provider.KeyAPIURL)
		}
	}
	if raw, ok := src.Settings[provider.KeyAPIKeyEnv]; ok {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return "", "", fmt.Errorf("source %q: %s: want a variable name", src.Name, provider.KeyAPIKeyEnv)
		}
		getenv := cfg.getenv
		if getenv == nil {
			getenv = func(string) string { return "" }
		}
		if key = getenv(name); key == "" {
			return "", "", fmt.Errorf("source %q: %s (%s) is empty: it must hold the provider's secret API key", src.Name, name, provider.KeyAPIKeyEnv)
		}
	}
	return url, key, nil
}

// paymentSync is the sync of sources through h: a status API for each
// source whose provider has one (provider.Syncer) and a key for it
// (apiOf), the confirmed answers of each whose provider takes them
// (provider.Confirmer).
func paymentSync(cfg Config, sources []handler.Source, h *handler.Handler, logger *slog.Logger) (*reconcile.Sync, error) {
	s := &reconcile.Sync{Handler: h, Fetchers: map[string]provider.Fetcher{}, Confirmers: map[string]reconcile.Confirmer{}}
	for _, src := range sources {
		s.Sources = append(s.Sources, src.Name)
		p, ok := provider.Lookup(src.Provider)
		if !ok {
			continue
		}
		if c, ok := p.(provider.Confirmer); ok {
			s.Confirmers[src.Name] = reconcile.Confirmer{Provider: c, Settings: src.Settings}
		}
		f := src.Fetcher
		if f == nil {
			var err error
			if f, err = fetcherOf(cfg, src); err != nil {
				return nil, err
			}
		}
		if f == nil {
			logger.Debug("a source without an API key is not synced", slog.String("source", src.Name))
			continue
		}
		s.Fetchers[src.Name] = f
	}
	return s, nil
}

// fetcherOf is the status API of src (apiOf), nil when its provider has
// none (provider.Syncer) or it has no key.
func fetcherOf(cfg Config, src handler.Source) (provider.Fetcher, error) {
	p, ok := provider.Lookup(src.Provider)
	if !ok {
		return nil, nil
	}
	sy, ok := p.(provider.Syncer)
	if !ok {
		return nil, nil
	}
	url, key, err := apiOf(cfg, src)
	if err != nil || key == "" {
		return nil, err
	}
	f, err := sy.NewFetcher(provider.ListerConfig{Source: src.Name, Settings: src.Settings, URL: url, Key: key})
	if err != nil {
		return nil, fmt.Errorf("source %q: %w", src.Name, err)
	}
	return f, nil
}

// withFetchers gives each source whose provider has a status API its
// fetcher (fetcherOf): the pipeline fetches with it the payments a
// notifier source's webhooks name (provider.Notifier).
func withFetchers(cfg Config, sources []handler.Source) error {
	for i := range sources {
		if sources[i].Fetcher != nil {
			continue
		}
		f, err := fetcherOf(cfg, sources[i])
		if err != nil {
			return err
		}
		sources[i].Fetcher = f
	}
	return nil
}

// syncAdmin is s as the admin API's PaymentSync.
type syncAdmin struct{ s *reconcile.Sync }

func (a syncAdmin) Sync(ctx context.Context, source, txID string) (admin.SyncOutcome, error) {
	r, err := a.s.Payment(ctx, source, txID)
	return outcomeOf(r), err
}

func (a syncAdmin) Confirm(ctx context.Context, source string, answer []byte) (admin.SyncOutcome, error) {
	r, err := a.s.Confirm(ctx, source, answer)
	return outcomeOf(r), err
}

func outcomeOf(r reconcile.SyncResult) admin.SyncOutcome {
	return admin.SyncOutcome{Result: r.Result, TransactionID: r.Ref, ProviderStatus: r.ProviderStatus}
}

// janitor is serve's and the worker's sync of unsettled payments
// (PAYLOCK_SYNC_PENDING_AFTER), and of the payments of stuck orders when
// orders are on; nil when that is off, or no source has a status API
// (logged).
func janitor(cfg Config, s *reconcile.Sync, st *store.Store, logger *slog.Logger) *reconcile.Janitor {
	if cfg.Reconcile.SyncPendingAfter == 0 {
		return nil
	}
	if len(s.Fetchers) == 0 {
		logger.Warn("PAYLOCK_SYNC_PENDING_AFTER is set, but no source has a status API (a stripe source with api_key_env, or STRIPE_API_KEY): nothing to sync")
		return nil
	}
	logger.Info("syncing unsettled payments periodically on the River leader",
		slog.Duration("pending_after", cfg.Reconcile.SyncPendingAfter), slog.Float64("rate", cfg.Reconcile.SyncRate))
	j := &reconcile.Janitor{Sync: s, Payments: st.Payments(), PendingAfter: cfg.Reconcile.SyncPendingAfter,
		Rate: cfg.Reconcile.SyncRate, Logger: logger}
	// With orders on, it also looks for the payments of the orders still
	// awaiting payment that no payment names (docs/checkout.md).
	if cfg.Orders.Interval > 0 {
		if specs, err := sourceShapes(cfg); err == nil {
			j.Orders, j.OrderPointers = st.Orders(), orderPointers(specs)
		}
	}
	return j
}
