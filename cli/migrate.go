package cli

import (
	"context"
	"fmt"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/store"
)

// migrateCommand is "paylock migrate".
var migrateCommand = Command[noOpts]{
	Name: "paylock migrate", Usage: flagsUsage("migrate"), ArgsIgnored: true, New: newNoOpts,
	Run: func(ctx context.Context, b *Base, _ noOpts) error { return migrate(ctx, &b.Config) },
}

// storeConfig is the store's configuration: the database's, with the
// attempts of the forward jobs it inserts.
func (c *Config) storeConfig() store.Config {
	sc := c.Database.store(c.Forward.MaxAttempts, c.Forward.Express)
	sc.DeliveryLogCap = c.DeliveryLog.Cap // 0 (keep none): serve gives the handler no log
	sc.DeliveryLogCapBytes = c.DeliveryLog.CapBytes
	sc.TracerProvider = c.Telemetry.tracerProvider() // no-op with tracing off: River's jobs untraced, at no cost
	return sc
}

// migrate applies the migrations, over PAYLOCK_MIGRATE_DATABASE_URL alone
// when it is set (DATABASE_URL may be a pooler that cannot hold the
// migration's session lock).
func migrate(ctx context.Context, cfg *Config) error {
	sc := cfg.storeConfig()
	if cfg.Database.MigrateURL != "" {
		sc.URL, sc.ExecMode, sc.MaxConns = cfg.Database.MigrateURL, "", 2
	}
	st, err := store.Open(ctx, sc)
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Migrate(ctx)
}

// openStoreMigrated opens the store and, unless PAYLOCK_MIGRATE=false,
// migrates it: what serve, worker and reconcile payments do first. With a
// forward URL, every disbursement status change it makes is forwarded.
func openStoreMigrated(ctx context.Context, cfg *Config) (*store.Store, error) {
	st, err := store.Open(ctx, cfg.storeConfig())
	if err != nil {
		return nil, err
	}
	if cfg.Forward.URL != "" {
		// Every process that changes a disbursement's status (serve's
		// payout notifications, the payout worker) forwards the change, to
		// PAYLOCK_FORWARD_URL's destination.
		st.Disbursements().OnStatusChange(st.Outbox().ForwardStatusHook(forward.DefaultDestination))
	}
	if cfg.Database.Migrate {
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			return nil, fmt.Errorf("migrate: %w", err)
		}
	}
	return st, nil
}
