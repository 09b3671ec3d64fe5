package store

import (
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// JobClient returns the store's insert-only River client over its pool (it
// works no jobs), for tools that read and manage River's jobs through
// River's own API, such as River UI on the admin listener. Insert jobs
// through the Store's methods, which insert them in the transactions that
// create their rows.
func (s *Store) JobClient() *river.Client[pgx.Tx] { return s.jobs }
