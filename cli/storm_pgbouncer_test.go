package cli

import (
	"fmt"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/scaletest"
	"github.com/paylock/paylock/internal/testkit"
)

// serverTimeouts are the session settings paylock sends as startup
// parameters when it talks to Postgres directly. Behind a transaction
// pooler they are the database's (or role's) defaults instead.
var serverTimeouts = map[string]string{
	"statement_timeout":                   "5s",
	"lock_timeout":                        "2s",
	"idle_in_transaction_session_timeout": "10s",
}

// TestPgBouncerStormWithFailoverRecordsEachPaymentOnce: three replicas
// reach Postgres through PgBouncer in transaction pooling mode
// (PAYLOCK_DB_EXEC_MODE=exec, and simple_protocol in the full form), and
// migrate together over PAYLOCK_MIGRATE_DATABASE_URL, a direct connection.
// During the storm every server session of the database is terminated (a
// Postgres restart as the pooler sees it) and PgBouncer itself is killed
// and restarted. Every payment is recorded exactly once; a COMMIT whose
// answer died with PgBouncer is answered 503 and its retry duplicate, so
// a payment may have no processed answer but never two.
func TestPgBouncerStormWithFailoverRecordsEachPaymentOnce(t *testing.T) {
	pgb := scaletest.PgBouncerEnv(t)
	modes := []string{"exec"}
	if !testing.Short() {
		modes = append(modes, "simple_protocol")
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			db := pgb.Database(t, serverTimeouts)
			env := stormEnv(t, db.Pooled)
			env["REDIS_URL"] = testkit.RedisURL(t)
			env["PAYLOCK_DB_EXEC_MODE"] = mode
			env["PAYLOCK_MIGRATE_DATABASE_URL"] = db.Direct
			reps := startServeReplicas(t, 3, env)
			slowInserts(t, db.Direct, 50*time.Millisecond, 1500*time.Millisecond)

			s := storm{
				txPrefix: "tx-pgbouncer-" + mode, deliveries: 6, interval: 60 * time.Millisecond,
				before: 1500 * time.Millisecond, tail: 1500 * time.Millisecond, maxTxs: 3000,
			}
			s.faults = func(t *testing.T, _ func(func(string) bool) string) string {
				n := db.TerminateBackends(t)
				time.Sleep(1500 * time.Millisecond)
				took := pgb.Crash(t)
				desc := fmt.Sprintf("%d server sessions terminated behind PgBouncer; 1.5s later PgBouncer SIGKILLed and restarted (%s)", n, took.Round(100*time.Millisecond))
				if !testing.Short() {
					time.Sleep(1500 * time.Millisecond)
					desc += fmt.Sprintf("; 1.5s later %d server sessions terminated again", db.TerminateBackends(t))
				}
				return desc
			}
			o := runStorm(t, reps, s)
			verdict(t, "pgbouncer "+mode, reps, db.Direct, s, o, false)
		})
	}
}
