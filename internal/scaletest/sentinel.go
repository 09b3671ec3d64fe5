package scaletest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
)

// Sentinel is the group of scripts/redis-sentinel.sh: a master, a replica
// and three sentinels watching them with quorum 2.
type Sentinel struct {
	Addrs            []string // the sentinels
	MasterName       string
	Password         string // the master's and the replica's
	SentinelPassword string // the sentinels' own
}

// RedisSentinel returns the group named by PAYLOCK_TEST_REDIS_SENTINEL (and
// the PAYLOCK_TEST_REDIS_SENTINEL_* variables), healthy, or skips the test.
func RedisSentinel(t testing.TB) Sentinel {
	t.Helper()
	addrs := need(t, "PAYLOCK_TEST_REDIS_SENTINEL", "a local Redis Sentinel group (scripts/redis-sentinel.sh)")
	s := Sentinel{
		Addrs:            strings.Split(addrs, ","),
		MasterName:       os.Getenv("PAYLOCK_TEST_REDIS_SENTINEL_MASTER"),
		Password:         os.Getenv("PAYLOCK_TEST_REDIS_SENTINEL_MASTER_PASSWORD"),
		SentinelPassword: os.Getenv("PAYLOCK_TEST_REDIS_SENTINEL_PASSWORD"),
	}
	s.WaitHealthy(t, 60*time.Second)
	return s
}

// Client returns a failover client with paylock's settings, closed when the
// test ends.
func (s Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: s.MasterName, SentinelAddrs: s.Addrs,
		SentinelPassword: s.SentinelPassword, Password: s.Password,
		ContextTimeoutEnabled: true,
		DialTimeout:           500 * time.Millisecond,
		ReadTimeout:           500 * time.Millisecond,
		WriteTimeout:          500 * time.Millisecond,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func (s Sentinel) sentinel(addr string) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: addr, Password: s.SentinelPassword,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, MaxRetries: -1})
}

// masterAddr is the master's address according to the sentinel at addr.
func (s Sentinel) masterAddr(ctx context.Context, addr string) (string, error) {
	sc := s.sentinel(addr)
	defer sc.Close()
	hp, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("sentinel %s: master address %v", addr, hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// agreedMaster returns the master all sentinels name, or an error while
// they disagree.
func (s Sentinel) agreedMaster(ctx context.Context) (string, error) {
	master := ""
	for _, a := range s.Addrs {
		m, err := s.masterAddr(ctx, a)
		if err != nil {
			return "", err
		}
		if master != "" && m != master {
			return "", fmt.Errorf("sentinels disagree: %s and %s", master, m)
		}
		master = m
	}
	return master, nil
}

// healthy: the sentinels agree on a master that is one, whose replica's
// link is up, and each sentinel sees it objectively up with one replica
// and two other sentinels.
func (s Sentinel) healthy(ctx context.Context, t testing.TB) (master, replica Node, err error) {
	addr, err := s.agreedMaster(ctx)
	if err != nil {
		return
	}
	master = Node{Addr: addr, Password: s.Password}
	m, err := master.info(ctx, t, "replication")
	if err != nil {
		return
	}
	if m["role"] != "master" || m["connected_slaves"] != "1" {
		err = fmt.Errorf("master %s: role %s, %s replicas", addr, m["role"], m["connected_slaves"])
		return
	}
	var host, port string
	for _, kv := range strings.Split(m["slave0"], ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "ip":
			host = v
		case "port":
			port = v
		}
	}
	replica = Node{Addr: net.JoinHostPort(host, port), Password: s.Password}
	r, err := replica.info(ctx, t, "replication")
	if err != nil {
		return
	}
	if r["master_link_status"] != "up" {
		err = fmt.Errorf("replica %s: link %s", replica.Addr, r["master_link_status"])
		return
	}
	for _, a := range s.Addrs {
		sc := s.sentinel(a)
		var st map[string]string
		st, err = sc.Master(ctx, s.MasterName).Result()
		sc.Close()
		if err != nil {
			return
		}
		if st["flags"] != "master" || st["num-other-sentinels"] != "2" {
			err = fmt.Errorf("sentinel %s: flags %s, %s other sentinels", a, st["flags"], st["num-other-sentinels"])
			return
		}
	}
	return master, replica, nil
}

// WaitHealthy waits until the group is whole: an agreed master, its replica
// in sync, every sentinel seeing both and the other two.
func (s Sentinel) WaitHealthy(t testing.TB, timeout time.Duration) (master, replica Node) {
	t.Helper()
	testkit.Eventually(t, timeout, "redis sentinel group healthy", func(ctx context.Context) (err error) {
		master, replica, err = s.healthy(ctx, t)
		return err
	})
	return master, replica
}

// waitMaster waits until every sentinel names addr as the master and addr
// says it is one.
func (s Sentinel) waitMaster(t testing.TB, addr string) {
	t.Helper()
	n := Node{Addr: addr, Password: s.Password}
	testkit.Eventually(t, 30*time.Second, "sentinels switched to "+addr, func(ctx context.Context) error {
		m, err := s.agreedMaster(ctx)
		if err != nil {
			return err
		}
		if m != addr {
			return fmt.Errorf("sentinels still name %s", m)
		}
		info, err := n.info(ctx, t, "replication")
		if err != nil {
			return err
		}
		if info["role"] != "master" {
			return errors.New("not promoted yet")
		}
		return nil
	})
}

// switched reports whether every sentinel names addr as the master, and
// addr says it is one, within timeout.
func (s Sentinel) switched(addr string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		m, err := s.agreedMaster(ctx)
		cancel()
		if err == nil && m == addr {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// KillMaster kills the master while its replica lags (see
// LoseUnreplicatedWrites), waits until the sentinels have promoted the
// replica, restarts the killed node (which the sentinels turn into the new
// master's replica) and waits until the group is healthy. It returns the
// killed master and how long the group had no master.
func (s Sentinel) KillMaster(t testing.TB, lag time.Duration) (Node, time.Duration) {
	t.Helper()
	master, replica := s.WaitHealthy(t, 30*time.Second)
	killed := LoseUnreplicatedWrites(t, master, replica, lag)
	start := time.Now()
	s.waitMaster(t, replica.Addr)
	took := time.Since(start) + lag
	healStart := time.Now()
	killed.Restart(t)
	// It comes back as an empty master; the sentinels would make it a
	// replica of the new master at their next INFO round (10s).
	demote(t, killed.Node, replica)
	s.WaitHealthy(t, 60*time.Second)
	t.Logf("sentinel: %s restarted and back as a replica in %s", master.Addr, time.Since(healStart).Round(100*time.Millisecond))
	return master, took
}

// Failover asks a sentinel for a failover (SENTINEL FAILOVER: no agreement
// needed, the old master is demoted once the replica is promoted, and what
// it acknowledged in between is lost) and waits until the group is healthy
// again. It returns the master the group settles on, which is the promoted
// replica unless the sentinels moved the master again on their own (on a
// loaded machine, down-after-milliseconds 1000 can judge a busy node down),
// and how long until that master answered as one.
func (s Sentinel) Failover(t testing.TB) (Node, time.Duration) {
	t.Helper()
	master, replica := s.WaitHealthy(t, 30*time.Second)
	start := time.Now()
	// A failover the sentinel aborts (on a loaded machine it may judge the
	// replica not good enough: a ping answered late) is asked for again,
	// from the next sentinel, as an operator would.
	for i := 0; ; i++ {
		sc := s.sentinel(s.Addrs[i%len(s.Addrs)])
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := sc.Failover(ctx, s.MasterName).Err()
		cancel()
		sc.Close()
		if err != nil && !strings.Contains(err.Error(), "INPROG") {
			t.Fatalf("SENTINEL FAILOVER: %v", err)
		}
		if s.switched(replica.Addr, 15*time.Second) {
			break
		}
		if i == 2 {
			t.Fatalf("SENTINEL FAILOVER asked three times: the sentinels never named %s master", replica.Addr)
		}
		t.Logf("SENTINEL FAILOVER: %s not promoted after 15s; asking again", replica.Addr)
	}
	var now Node
	var took time.Duration
	testkit.Eventually(t, 60*time.Second, "sentinel group healthy after the failover", func(ctx context.Context) error {
		m, err := s.agreedMaster(ctx)
		if err != nil {
			return err
		}
		n := Node{Addr: m, Password: s.Password}
		info, err := n.info(ctx, t, "replication")
		if err != nil {
			return err
		}
		if info["role"] != "master" {
			return fmt.Errorf("sentinels name %s, which is not promoted yet", m)
		}
		if took == 0 {
			took = time.Since(start)
		}
		// The other node, if it still says it is master, learns it is
		// demoted at the sentinels' next INFO round (10s); do what they
		// would do now.
		for _, o := range []Node{master, replica} {
			if o.Addr == m {
				continue
			}
			if oi, err := o.info(ctx, t, "replication"); err == nil && oi["role"] == "master" {
				if err := replicaOf(ctx, o, n); err != nil {
					return err
				}
			}
		}
		if _, _, err := s.healthy(ctx, t); err != nil {
			return err
		}
		now = n
		return nil
	})
	if now.Addr != replica.Addr {
		t.Logf("sentinel: asked to promote %s; the group settled on %s", replica.Addr, now.Addr)
	}
	return now, took
}

// replicaOf makes n a replica of master, as the sentinels would.
func replicaOf(ctx context.Context, n, master Node) error {
	host, port, _ := net.SplitHostPort(master.Addr)
	c := n.oneShot()
	defer c.Close()
	if err := c.Do(ctx, "replicaof", host, port).Err(); err != nil {
		return fmt.Errorf("REPLICAOF %s on %s: %w", master.Addr, n.Addr, err)
	}
	return nil
}

// demote makes n a replica of master, as the sentinels would.
func demote(t testing.TB, n, master Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := replicaOf(ctx, n, master); err != nil {
		t.Fatal(err)
	}
}
