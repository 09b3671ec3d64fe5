package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrate applies the pending embedded migrations, then River's (its job
// tables, rivermigrate, direction up), both in the current schema (the first
// on search_path). Replicas may call it together: a Postgres session
// advisory lock, keyed by the current schema, held across both, lets one
// apply the migrations while the others wait (polling every second for up
// to 300 seconds, bounded by ctx) and then find nothing left to do.
// Migrations run in sessions of their own, never the pool's, with the pool's
// timeouts and parameters; one that needs longer raises them (SET LOCAL in a
// transaction, SET and RESET in a NO TRANSACTION migration) and the sessions
// are closed when Migrate returns, whatever a migration left set.
//
// A migration that fails on a transient condition (a lock it would not wait
// longer for, a timeout) returns an error wrapping ErrUnavailable, having
// changed nothing it did not record: calling Migrate again resumes.
//
// With Config.MigrateURL set, Migrate connects to that URL instead (the
// pool's timeouts, the URL's parameters). In a pooled exec mode MigrateURL
// is required: the session lock must stay on one server connection, which a
// pooler in transaction mode does not promise.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrate(ctx, latestVersion)
}

// latestVersion, as migrate's version, applies every migration.
const latestVersion = -1

// migrate applies the pending migrations up to version (latestVersion: all),
// then River's, under the schema's advisory lock.
func (s *Store) migrate(ctx context.Context, version int64) error {
	pool, err := s.migrationPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool) // closing it leaves the pool open
	defer db.Close()
	unlock, err := s.lockMigrations(ctx, db)
	if err != nil {
		return err
	}
	defer unlock()
	return applyMigrations(ctx, db, pool, version)
}

// migrationPool opens the connections Migrate works on, never the pool's:
// to Config.MigrateURL when it is set, else with the pool's settings.
func (s *Store) migrationPool(ctx context.Context) (*pgxpool.Pool, error) {
	var pcfg *pgxpool.Config
	switch {
	case s.cfg.MigrateURL != "":
		var err error
		pcfg, err = pgxpool.ParseConfig(s.cfg.MigrateURL)
		if err != nil {
			return nil, fmt.Errorf("store: migrate: parse Config.MigrateURL: %w", err)
		}
		setSessionParams(pcfg.ConnConfig, s.cfg)
	case s.pooled:
		return nil, errors.New("store: migrate: the exec mode is a pooled one (a pooler in transaction mode cannot hold the migration's session lock): set Config.MigrateURL (PAYLOCK_MIGRATE_DATABASE_URL) to a direct connection")
	default:
		// The pool's settings on connections of Migrate's own: a session a
		// migration changed must not go back to the pool.
		pcfg = s.pool.Config()
	}
	pcfg.MinConns, pcfg.MaxConns = 0, 3 // the lock's session, goose's and River's
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	return pool, nil
}

// lockMigrations takes the session advisory lock of the current schema on
// a connection of db's own, and returns what releases it (and closes the
// connection), even when ctx is done.
func (s *Store) lockMigrations(ctx context.Context, db *sql.DB) (unlock func(), err error) {
	var schema *string
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return nil, translate("migrate: current schema", err)
	}
	if schema == nil {
		return nil, errors.New("store: migrate: no schema on search_path exists")
	}
	h := fnv.New64a()
	h.Write([]byte("paylock.store.migrate:" + *schema))
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(int64(h.Sum64())),
		lock.WithLockTimeout(1, 300),
	)
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, translate("migrate: lock session", err)
	}
	if err := locker.SessionLock(ctx, conn); err != nil {
		conn.Close()
		return nil, translate("migrate: lock", err)
	}
	return func() {
		// Unlock even when ctx is done; closing the session would too.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CommitTimeout)
		defer cancel()
		_ = locker.SessionUnlock(uctx, conn)
		conn.Close()
	}, nil
}

// applyMigrations applies the embedded migrations up to version
// (latestVersion: all) with goose over db, then River's over pool, both in
// the current schema.
func applyMigrations(ctx context.Context, db *sql.DB, pool *pgxpool.Pool, version int64) error {
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	if version == latestVersion {
		_, err = provider.Up(ctx)
	} else {
		_, err = provider.UpTo(ctx, version)
	}
	if err != nil {
		return translate("migrate", err)
	}
	// River's tables, in the same schema: Schema "" leaves the choice to
	// search_path, as for ours.
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: discardLogger})
	if err != nil {
		return fmt.Errorf("store: migrate river: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return translate("migrate river", err)
	}
	return indexRiverJobs(ctx, pool)
}

// indexRiverJobs creates paylock's own indexes of River's job table
// (forwardOrderIndex, forwardWaitingIndex), once River's migrations made
// the table: it comes
// after them, so it is no goose migration (ours run first). It is asked
// for only when missing, so that a replica starting up takes no lock on
// river_job; building it (a scan of river_job, once) holds job inserts
// back for as long as the build takes.
func indexRiverJobs(ctx context.Context, pool *pgxpool.Pool) error {
	for _, ix := range []struct{ name, sql, needs string }{
		{forwardOrderIndex, forwardOrderIndexSQL, ""},     // the order per payment (outbox_order.go)
		{forwardWaitingIndex, forwardWaitingIndexSQL, ""}, // a destination's waiting jobs (outbox_health.go)
		// Every forward message, River's and the lane's (outbox_express.go):
		// once migration 00018 made the lane's tables.
		{forwardMessagesView, forwardMessagesViewSQL, "forward_sent"},
	} {
		exists, err := relationExists(ctx, pool, ix.name)
		if err != nil {
			return err
		}
		if exists {
			continue
		}
		if ix.needs != "" {
			ok, err := relationExists(ctx, pool, ix.needs)
			if err != nil {
				return err
			}
			if !ok {
				continue // a migration to an earlier version
			}
		}
		if _, err := pool.Exec(ctx, ix.sql); err != nil {
			return translate("migrate: create index "+ix.name, err)
		}
	}
	return nil
}

// relationExists reports whether the current schema has a table, index
// or view of that name.
func relationExists(ctx context.Context, pool *pgxpool.Pool, name string) (bool, error) {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass(quote_ident(current_schema()) || '.' || $1) IS NOT NULL`,
		name).Scan(&exists); err != nil {
		return false, translate("migrate: find "+name, err)
	}
	return exists, nil
}
