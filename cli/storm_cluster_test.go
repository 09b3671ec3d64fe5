package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/scaletest"
	"github.com/paylock/paylock/internal/testkit"
)

// TestClusterStormWithFailoverRecordsEachPaymentOnce: three replicas in
// PAYLOCK_REDIS_MODE=cluster take a duplicate storm while the master
// holding a fresh lock is killed with its replica lagging (the locks it
// acknowledged meanwhile are lost in the failover) and, in the full form,
// another master is failed over with CLUSTER FAILOVER (MOVED for every key
// of its slots). Every payment is recorded exactly once; the metrics show
// what the failover cost the locks.
func TestClusterStormWithFailoverRecordsEachPaymentOnce(t *testing.T) {
	cluster := scaletest.RedisCluster(t)
	dsn := testkit.Schema(t)
	env := stormEnv(t, dsn)
	env["PAYLOCK_REDIS_MODE"] = "cluster"
	env["PAYLOCK_REDIS_ADDRS"] = strings.Join(cluster.Seeds(), ",")
	env["PAYLOCK_REDIS_PASSWORD"] = cluster.Password
	reps := startServeReplicas(t, 3, env)
	slowInserts(t, dsn, 100*time.Millisecond, 3*time.Second)

	s := storm{
		txPrefix: "tx-cluster", deliveries: 6, interval: 60 * time.Millisecond,
		before: 1500 * time.Millisecond, tail: 1500 * time.Millisecond, maxTxs: 3000,
	}
	s.faults = func(t *testing.T, latest func(func(string) bool) string) string {
		// The master of a slow request's lock, which it holds across the
		// failover.
		tx := latest(isSlow)
		if tx == "" {
			tx = s.txPrefix + "-0007"
		}
		slot := cluster.Slot(t, env["PAYLOCK_LOCK_PREFIX"]+"payment:"+tx)
		const lag = 600 * time.Millisecond
		killed, took := cluster.KillMaster(t, slot, lag)
		desc := fmt.Sprintf("master %s (slot %d, the lock of %s) SIGKILLed after its replica lagged %s: slot without a master for %s, node restarted as a replica",
			killed.Addr, slot, tx, lag, took.Round(100*time.Millisecond))
		if !testing.Short() {
			time.Sleep(2 * time.Second)
			other := (slot + 16384/3) % 16384
			promoted, took := cluster.Failover(t, other, "")
			desc += fmt.Sprintf("; then CLUSTER FAILOVER to %s (slot %d) in %s", promoted.Addr, other, took.Round(100*time.Millisecond))
		}
		return desc
	}
	o := runStorm(t, reps, s)
	verdict(t, "redis cluster", reps, dsn, s, o, true)
}
