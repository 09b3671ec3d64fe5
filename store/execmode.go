package store

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ExecMode is how the store's queries reach the server: pgx's query
// execution modes, by the names pgx's default_query_exec_mode uses.
//
// The pooled modes, ExecExec and ExecSimpleProtocol, are for a pooler in
// transaction mode (PgBouncer pool_mode=transaction, before 1.21 unable to
// track prepared statements): each transaction may run on another server
// connection, so the store keeps no session state there. No statement is
// prepared by name, and the pool's sessions are opened without the
// statement_timeout, lock_timeout and idle_in_transaction_session_timeout
// parameters (PgBouncer refuses such startup parameters, and applying them
// to a shared server connection would be wrong anyway): set those on the
// role or database (ALTER ROLE ... SET statement_timeout = '5s'), where
// every server connection picks them up. Migrate needs Config.MigrateURL
// then: its advisory lock is held by a session.
//
// synchronous_commit=on is a session parameter too. In the pooled modes the
// recording INSERT still sets it for its own transaction, so every payment
// (and whatever RecordPaymentFunc's fn writes with it) commits durably; the
// store's other writes (disbursements, webhook events) do not, and need
// synchronous_commit left on (the server's default) or set on the role or
// database.
type ExecMode string

// The execution modes.
const (
	ExecCacheStatement ExecMode = "cache_statement" // pgx's default: named prepared statements, cached per connection
	ExecCacheDescribe  ExecMode = "cache_describe"  // unnamed statements, descriptions cached per connection
	ExecDescribeExec   ExecMode = "describe_exec"   // describe, then execute, each time
	ExecExec           ExecMode = "exec"            // pooled: one round trip, unnamed statement, text-format parameters
	ExecSimpleProtocol ExecMode = "simple_protocol" // pooled: the simple protocol, parameters interpolated by pgx
)

var execModes = map[ExecMode]pgx.QueryExecMode{
	ExecCacheStatement: pgx.QueryExecModeCacheStatement,
	ExecCacheDescribe:  pgx.QueryExecModeCacheDescribe,
	ExecDescribeExec:   pgx.QueryExecModeDescribeExec,
	ExecExec:           pgx.QueryExecModeExec,
	ExecSimpleProtocol: pgx.QueryExecModeSimpleProtocol,
}

// ParseExecMode returns the ExecMode named s ("" is the zero ExecMode).
func ParseExecMode(s string) (ExecMode, error) {
	if _, ok := execModes[ExecMode(s)]; !ok && s != "" {
		return "", fmt.Errorf("store: unknown exec mode %q (want cache_statement, cache_describe, describe_exec, exec or simple_protocol)", s)
	}
	return ExecMode(s), nil
}

// pooledMode reports whether m keeps no state in the session between
// transactions, as a pooler in transaction mode requires.
func pooledMode(m pgx.QueryExecMode) bool {
	return m == pgx.QueryExecModeExec || m == pgx.QueryExecModeSimpleProtocol
}
