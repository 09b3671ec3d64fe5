package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/scaletest"
	"github.com/paylock/paylock/internal/testkit"
)

// TestSentinelStormWithFailoverRecordsEachPaymentOnce: three replicas in
// PAYLOCK_REDIS_MODE=sentinel take a duplicate storm while the master is
// killed with its replica lagging, so that the sentinels promote a replica
// without the latest locks; in the full form the sentinels are then asked
// for a failover (SENTINEL FAILOVER) as well. Every payment is recorded
// exactly once; the metrics show what the failover cost the locks.
func TestSentinelStormWithFailoverRecordsEachPaymentOnce(t *testing.T) {
	group := scaletest.RedisSentinel(t)
	dsn := testkit.Schema(t)
	env := stormEnv(t, dsn)
	env["PAYLOCK_REDIS_MODE"] = "sentinel"
	env["PAYLOCK_REDIS_SENTINEL_MASTER"] = group.MasterName
	env["PAYLOCK_REDIS_SENTINEL_ADDRS"] = strings.Join(group.Addrs, ",")
	env["PAYLOCK_REDIS_PASSWORD"] = group.Password
	env["PAYLOCK_REDIS_SENTINEL_PASSWORD"] = group.SentinelPassword
	reps := startServeReplicas(t, 3, env)
	slowInserts(t, dsn, 100*time.Millisecond, 3*time.Second)

	s := storm{
		txPrefix: "tx-sentinel", deliveries: 6, interval: 60 * time.Millisecond,
		before: 1500 * time.Millisecond, tail: 1500 * time.Millisecond, maxTxs: 3000,
	}
	s.faults = func(t *testing.T, _ func(func(string) bool) string) string {
		const lag = 600 * time.Millisecond
		killed, took := group.KillMaster(t, lag)
		desc := fmt.Sprintf("master %s SIGKILLed after its replica lagged %s: no master for %s until the sentinels promoted the replica, node restarted and turned into a replica",
			killed.Addr, lag, took.Round(100*time.Millisecond))
		if !testing.Short() {
			time.Sleep(2 * time.Second)
			promoted, took := group.Failover(t)
			desc += fmt.Sprintf("; then SENTINEL FAILOVER to %s in %s", promoted.Addr, took.Round(100*time.Millisecond))
		}
		return desc
	}
	o := runStorm(t, reps, s)
	verdict(t, "redis sentinel", reps, dsn, s, o, true)
}
