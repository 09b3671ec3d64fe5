package scaletest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
)

// Cluster is the Redis Cluster of scripts/redis-cluster.sh: 3 masters, 3
// replicas.
type Cluster struct {
	Nodes    []Node
	Password string
}

// RedisCluster returns the cluster named by PAYLOCK_TEST_REDIS_CLUSTER
// (and PAYLOCK_TEST_REDIS_CLUSTER_PASSWORD), healthy, or skips the test.
func RedisCluster(t testing.TB) Cluster {
	t.Helper()
	addrs := need(t, "PAYLOCK_TEST_REDIS_CLUSTER", "a local Redis Cluster (scripts/redis-cluster.sh)")
	c := Cluster{Password: os.Getenv("PAYLOCK_TEST_REDIS_CLUSTER_PASSWORD")}
	for _, a := range strings.Split(addrs, ",") {
		c.Nodes = append(c.Nodes, Node{Addr: a, Password: c.Password})
	}
	c.WaitHealthy(t, 30*time.Second)
	return c
}

// Seeds returns the addresses of every node.
func (c Cluster) Seeds() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Client returns a cluster client with paylock's settings
// (ContextTimeoutEnabled, short timeouts), closed when the test ends.
func (c Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: c.Seeds(), Password: c.Password,
		ContextTimeoutEnabled: true,
		DialTimeout:           500 * time.Millisecond,
		ReadTimeout:           500 * time.Millisecond,
		WriteTimeout:          500 * time.Millisecond,
	})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// ClusterNode is one line of CLUSTER NODES.
type ClusterNode struct {
	ID, Addr string
	Master   bool
	MasterID string // of a replica
	Failing  bool   // flagged fail or fail?
	Slots    [][2]int
}

// Node returns the node as a Node of c.
func (n ClusterNode) node(c Cluster) Node { return Node{Addr: n.Addr, Password: c.Password} }

// HasSlot reports whether the master serves slot.
func (n ClusterNode) HasSlot(slot int) bool {
	for _, r := range n.Slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

func parseClusterNodes(s string) []ClusterNode {
	var out []ClusterNode
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := ClusterNode{ID: f[0], Addr: addr, MasterID: f[3]}
		for _, flag := range strings.Split(f[2], ",") {
			switch flag {
			case "master":
				n.Master = true
			case "fail", "fail?":
				n.Failing = true
			}
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue // a slot being imported or migrated
			}
			lo, hi, ok := strings.Cut(s, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				n.Slots = append(n.Slots, [2]int{a, b})
			}
		}
		out = append(out, n)
	}
	return out
}

// topology returns CLUSTER NODES as seen by the first node that answers.
func (c Cluster) topology(ctx context.Context, t testing.TB) ([]ClusterNode, error) {
	var lastErr error
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, Password: c.Password, DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, MaxRetries: -1})
		s, err := cl.ClusterNodes(ctx).Result()
		cl.Close()
		if err == nil {
			return parseClusterNodes(s), nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// Topology returns the cluster's nodes as one of them sees them.
func (c Cluster) Topology(t testing.TB) []ClusterNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := c.topology(ctx, t)
	if err != nil {
		t.Fatalf("CLUSTER NODES: %v", err)
	}
	return nodes
}

// MasterAndReplica returns the master serving slot and its replica.
func (c Cluster) MasterAndReplica(t testing.TB, slot int) (master, replica Node) {
	t.Helper()
	nodes := c.Topology(t)
	for _, m := range nodes {
		if !m.Master || m.Failing || !m.HasSlot(slot) {
			continue
		}
		for _, r := range nodes {
			if !r.Master && !r.Failing && r.MasterID == m.ID {
				return m.node(c), r.node(c)
			}
		}
		t.Fatalf("master %s of slot %d has no healthy replica", m.Addr, slot)
	}
	t.Fatalf("no healthy master serves slot %d", slot)
	return
}

// Slot returns the hash slot of key, checked once against the server's
// CLUSTER KEYSLOT.
func (c Cluster) Slot(t testing.TB, key string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := c.Nodes[0].Client(t).ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT: %v", err)
	}
	if int(n) != KeySlot(key) {
		t.Fatalf("KeySlot(%q) = %d, the server says %d", key, KeySlot(key), n)
	}
	return int(n)
}

// healthy checks that every node answers with cluster_state:ok and sees 3
// masters covering every slot, none failing, each with a replica whose
// replication link is up.
func (c Cluster) healthy(ctx context.Context, t testing.TB) error {
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, Password: c.Password, DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, MaxRetries: -1})
		info, err := cl.ClusterInfo(ctx).Result()
		var nodes []ClusterNode
		if err == nil {
			var s string
			s, err = cl.ClusterNodes(ctx).Result()
			nodes = parseClusterNodes(s)
		}
		cl.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state not ok", n.Addr)
		}
		masters, replicas, slots := 0, 0, 0
		for _, x := range nodes {
			switch {
			case x.Failing:
				return fmt.Errorf("%s sees %s failing", n.Addr, x.Addr)
			case x.Master && len(x.Slots) > 0:
				masters++
				for _, r := range x.Slots {
					slots += r[1] - r[0] + 1
				}
			case !x.Master:
				replicas++
			}
		}
		if masters != 3 || replicas != 3 || slots != 16384 {
			return fmt.Errorf("%s sees %d masters serving %d slots and %d replicas", n.Addr, masters, slots, replicas)
		}
	}
	for _, n := range c.Nodes {
		m, err := n.info(ctx, t, "replication")
		if err != nil {
			return err
		}
		if m["role"] == "slave" && m["master_link_status"] != "up" {
			return fmt.Errorf("replica %s: master link %s", n.Addr, m["master_link_status"])
		}
	}
	return nil
}

// WaitHealthy waits until the cluster is whole again: every slot served, 3
// masters, each with a replica in sync.
func (c Cluster) WaitHealthy(t testing.TB, timeout time.Duration) {
	t.Helper()
	testkit.Eventually(t, timeout, "redis cluster healthy", func(ctx context.Context) error { return c.healthy(ctx, t) })
}

// KillMaster kills the master serving slot while its replica lags (see
// LoseUnreplicatedWrites), waits until the replica serves the slot, then
// restarts the killed node, which rejoins as a replica, and waits until
// the cluster is healthy. It returns how long the slot had no master.
func (c Cluster) KillMaster(t testing.TB, slot int, lag time.Duration) (Node, time.Duration) {
	t.Helper()
	master, replica := c.MasterAndReplica(t, slot)
	killed := LoseUnreplicatedWrites(t, master, replica, lag)
	start := time.Now()
	rc := replica.Client(t)
	testkit.Eventually(t, 30*time.Second, "replica "+replica.Addr+" promoted", func(ctx context.Context) error {
		m, err := replica.info(ctx, t, "replication")
		if err != nil {
			return err
		}
		if m["role"] != "master" {
			return errors.New("still a replica")
		}
		info, err := rc.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return errors.New("cluster_state not ok")
		}
		return nil
	})
	took := time.Since(start) + lag
	healStart := time.Now()
	killed.Restart(t)
	c.WaitHealthy(t, 30*time.Second)
	t.Logf("cluster: %s restarted and back as a replica in %s", master.Addr, time.Since(healStart).Round(100*time.Millisecond))
	return master, took
}

// Failover runs CLUSTER FAILOVER [option] on the replica of the master
// serving slot ("" for the coordinated one, which loses no write; FORCE
// or TAKEOVER) and waits until the replica is master and the cluster
// healthy.
func (c Cluster) Failover(t testing.TB, slot int, option string) (Node, time.Duration) {
	t.Helper()
	_, replica := c.MasterAndReplica(t, slot)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	args := []any{"cluster", "failover"}
	if option != "" {
		args = append(args, option)
	}
	if err := replica.Client(t).Do(ctx, args...).Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER %s on %s: %v", option, replica.Addr, err)
	}
	testkit.Eventually(t, 30*time.Second, "replica "+replica.Addr+" promoted", func(ctx context.Context) error {
		m, err := replica.info(ctx, t, "replication")
		if err != nil {
			return err
		}
		if m["role"] != "master" {
			return errors.New("still a replica")
		}
		return nil
	})
	took := time.Since(start)
	c.WaitHealthy(t, 30*time.Second)
	return replica, took
}

// KeySlot is the hash slot of key, as Redis Cluster computes it: CRC16
// (XMODEM) of the key, or of its hash tag {...}, modulo 16384.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc % 16384)
}
