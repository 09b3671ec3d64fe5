package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// pg reaches the shared server: admin is DATABASE_URL (any database but the
// benchmark's), bench the benchmark's own database on the same server.
type pg struct {
	admin string
	bench string
	name  string
}

func newPG(admin, name string) (*pg, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	u.Path = "/" + name
	return &pg{admin: admin, bench: u.String(), name: name}, nil
}

func (p *pg) exec(ctx context.Context, dsn, sql string, args ...any) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	_, err = c.Exec(ctx, sql, args...)
	return err
}

func (p *pg) query(ctx context.Context, dsn, sql string, dst []any, args ...any) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	return c.QueryRow(ctx, sql, args...).Scan(dst...)
}

// create makes the benchmark database, dropping a leftover of the same name.
func (p *pg) create(ctx context.Context) error {
	if err := p.drop(ctx); err != nil {
		return err
	}
	return p.exec(ctx, p.admin, "CREATE DATABASE "+pgx.Identifier{p.name}.Sanitize())
}

// drop removes the benchmark database, disconnecting whoever is left.
func (p *pg) drop(ctx context.Context) error {
	return p.exec(ctx, p.admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{p.name}.Sanitize()+" WITH (FORCE)")
}

// truncate empties payments, so every run starts from the same table.
func (p *pg) truncate(ctx context.Context) error {
	// River's jobs too: a forward scenario leaves one per payment.
	return p.exec(ctx, p.bench, "TRUNCATE payments, river_job RESTART IDENTITY")
}

// rows counts the payments whose transaction id starts with prefix.
func (p *pg) rows(ctx context.Context, prefix string) (int64, error) {
	var n int64
	err := p.query(ctx, p.bench, "SELECT count(*) FROM payments WHERE starts_with(transaction_id, $1)", []any{&n}, prefix)
	return n, err
}

// xacts is the benchmark database's transaction counters.
type xacts struct{ Commit, Rollback int64 }

// xacts waits (at most 10 s) until no session is connected to the benchmark
// database, so that every backend has flushed its statistics on exit, and
// reads the database's committed and rolled-back transactions. It reads
// them from the admin database, whose own transactions are not counted.
func (p *pg) xacts(ctx context.Context) (xacts, error) {
	c, err := pgx.Connect(ctx, p.admin)
	if err != nil {
		return xacts{}, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", p.name).Scan(&n); err != nil {
			return xacts{}, err
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return xacts{}, fmt.Errorf("%d sessions still connected to %s after 10s", n, p.name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var x xacts
	if _, err := c.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return xacts{}, err
	}
	err = c.QueryRow(ctx, "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1", p.name).
		Scan(&x.Commit, &x.Rollback)
	return x, err
}

// serverInfo describes the server for the report.
func (p *pg) serverInfo(ctx context.Context) (version, settings string, err error) {
	var maxConns, fsync, syncCommit, sharedBuffers string
	err = p.query(ctx, p.admin, `SELECT current_setting('server_version'), current_setting('max_connections'),
		current_setting('fsync'), current_setting('synchronous_commit'), current_setting('shared_buffers')`,
		[]any{&version, &maxConns, &fsync, &syncCommit, &sharedBuffers})
	settings = fmt.Sprintf("max_connections=%s, fsync=%s, synchronous_commit=%s, shared_buffers=%s",
		maxConns, fsync, syncCommit, sharedBuffers)
	return version, settings, err
}

// sessions counts the sessions connected to the whole server.
func (p *pg) sessions(ctx context.Context) (n, max int, err error) {
	err = p.query(ctx, p.admin, `SELECT count(*)::int, current_setting('max_connections')::int
		- current_setting('superuser_reserved_connections')::int FROM pg_stat_activity WHERE backend_type = 'client backend'`,
		[]any{&n, &max})
	return n, max, err
}

// backends returns the pids of the sessions connected to the benchmark
// database (those of the replica under load).
func (p *pg) backends(ctx context.Context) ([]int, error) {
	c, err := pgx.Connect(ctx, p.admin)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	rows, err := c.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'", p.name)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

// waitForRoom waits (at most 2 minutes) until the shared server has room
// for need more sessions and a margin for everyone else, so that pgbench
// neither fails nor takes the last connections from other users.
func (p *pg) waitForRoom(ctx context.Context, need int) error {
	const margin = 8
	deadline := time.Now().Add(2 * time.Minute)
	logged := false
	for {
		n, limit, err := p.sessions(ctx)
		if err != nil {
			return err
		}
		if n+need+margin <= limit {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres has had %d of %d sessions in use for 2 minutes; pgbench needs %d more: run again when the server is quieter", n, limit, need)
		}
		if !logged {
			logf("postgres has %d of %d sessions in use; waiting for room for pgbench's %d", n, limit, need)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
