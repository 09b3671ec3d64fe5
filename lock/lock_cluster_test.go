package lock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/scaletest"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
)

// The lock on a Redis Cluster (scripts/redis-cluster.sh; make scale). Its
// scripts touch one key each, so every command goes to the master of that
// key's slot; these tests show that it holds there too: on every master,
// with each node's script cache flushed, when a reply is lost, and while
// the key's slot moves to another master (ASK, then MOVED).

func getFrom(t *testing.T, c redis.UniversalClient, key string) string {
	t.Helper()
	v, err := c.Get(ctxT(t), key).Result()
	if errors.Is(err, redis.Nil) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// keysOnEveryMaster returns one fresh key per master of the cluster.
func keysOnEveryMaster(t *testing.T, cluster scaletest.Cluster) map[string]string {
	t.Helper()
	var masters []scaletest.ClusterNode
	for _, n := range cluster.Topology(t) {
		if n.Master && len(n.Slots) > 0 {
			masters = append(masters, n)
		}
	}
	keys := map[string]string{}
	for i := 0; len(keys) < len(masters) && i < 1000; i++ {
		key := testkit.Key(t, fmt.Sprint(i))
		slot := scaletest.KeySlot(key)
		for _, m := range masters {
			if m.HasSlot(slot) && keys[m.Addr] == "" {
				keys[m.Addr] = key
			}
		}
	}
	if len(keys) != len(masters) {
		t.Fatalf("found keys for %d of %d masters", len(keys), len(masters))
	}
	return keys
}

func TestLockOnRedisCluster(t *testing.T) {
	cluster := scaletest.RedisCluster(t)

	t.Run("EveryMasterObtainsRefreshesAndReleases", func(t *testing.T) {
		c := cluster.Client(t)
		l := lock.New(c)
		for master, key := range keysOnEveryMaster(t, cluster) {
			lk := mustObtain(t, l, key, time.Minute)
			if _, err := l.Obtain(ctxT(t), key, time.Minute); !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("%s: second Obtain = %v, want ErrNotObtained", master, err)
			}
			if err := lk.Refresh(ctxT(t), 2*time.Minute); err != nil {
				t.Fatalf("%s: Refresh: %v", master, err)
			}
			if d, err := lk.TTL(ctxT(t)); err != nil || d < time.Minute {
				t.Fatalf("%s: TTL = %v, %v; want about 2m", master, d, err)
			}
			if err := lk.Release(ctxT(t)); err != nil {
				t.Fatalf("%s: Release: %v", master, err)
			}
			if got := getFrom(t, c, key); got != "<absent>" {
				t.Fatalf("%s: key = %q after Release", master, got)
			}
		}
	})

	t.Run("FencedObtainOnEveryMaster", func(t *testing.T) {
		c := cluster.Client(t)
		l := lock.New(c)
		keys := keysOnEveryMaster(t, cluster)
		keys["hash tag"] = "{" + testkit.Key(t, "tagged") + "}:lock"
		for master, key := range keys {
			// The counter: the key wrapped in a hash tag, or, for a key
			// with a tag of its own, the key with a suffix.
			counter := "{" + key + "}:fence"
			if strings.HasPrefix(key, "{") {
				counter = key + ":fence"
			}
			t.Cleanup(func() { c.Del(bgCtx(t), counter) })
			for want := int64(1); want <= 2; want++ {
				lk, err := l.Obtain(ctxT(t), key, time.Minute, lock.WithFencing())
				if err != nil {
					t.Fatalf("%s: fenced Obtain: %v", master, err)
				}
				if lk.Fence() != want {
					t.Fatalf("%s: fence = %d, want %d", master, lk.Fence(), want)
				}
				if err := lk.Release(ctxT(t)); err != nil {
					t.Fatalf("%s: Release: %v", master, err)
				}
			}
			if got := getFrom(t, c, counter); got != "2" {
				t.Fatalf("%s: counter %q = %q, want 2", master, counter, got)
			}
		}
	})

	t.Run("ScriptsReloadOnEveryNodeAfterScriptFlush", func(t *testing.T) {
		c := cluster.Client(t)
		replies := &errorReplies{}
		c.OnNewNode(func(n *redis.Client) { n.AddHook(replies) })
		l := lock.New(c)
		keys := keysOnEveryMaster(t, cluster)
		held := map[string]*lock.Lock{}
		for master, key := range keys {
			held[master] = mustObtain(t, l, key, time.Minute)
		}
		// Every node forgets every script: the next EVALSHA on each
		// answers NOSCRIPT, and go-redis falls back to EVAL there.
		if err := c.ForEachShard(ctxT(t), func(ctx context.Context, n *redis.Client) error {
			return n.ScriptFlush(ctx).Err()
		}); err != nil {
			t.Fatal(err)
		}
		for master, key := range keys {
			if _, err := l.Obtain(ctxT(t), key, time.Minute); !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("%s: Obtain of a held key after SCRIPT FLUSH = %v, want ErrNotObtained", master, err)
			}
			if err := held[master].Refresh(ctxT(t), time.Minute); err != nil {
				t.Fatalf("%s: Refresh after SCRIPT FLUSH: %v", master, err)
			}
			if err := held[master].Release(ctxT(t)); err != nil {
				t.Fatalf("%s: Release after SCRIPT FLUSH: %v", master, err)
			}
		}
		// Each master answered NOSCRIPT to the first script it was sent.
		if n := replies.count("NOSCRIPT"); n < len(keys) {
			t.Fatalf("NOSCRIPT answers = %d, want one per master (%d); replies %v", n, len(keys), replies.seen())
		}
	})

	t.Run("ObtainSucceedsWhenGoRedisRetriesALostReply", func(t *testing.T) {
		key := testkit.Key(t, "lost")
		loser := &replyLoser{key: []byte(key)}
		c := cluster.Client(t)
		c.OnNewNode(func(n *redis.Client) { n.AddHook(loser) })
		c.ReloadState(ctxT(t))
		l := lock.New(c)
		// A first command through every node client, so that each has the
		// hook before the fault is armed.
		if err := c.ForEachShard(ctxT(t), func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
			t.Fatal(err)
		}
		loser.arm()
		lk := mustObtain(t, l, key, time.Minute)
		if loser.lost.Load() != 1 {
			t.Fatalf("replies dropped = %d, want 1 (the hook did not fire)", loser.lost.Load())
		}
		if sent := loser.commands(); len(sent) < 2 || sent[0] != "set" || sent[1] != "set" {
			t.Fatalf("commands sent = %q, want set, set (the retry), ...", sent)
		}
		if got := getFrom(t, c, key); got != lk.Token() {
			t.Fatalf("key = %q, want our token %q", got, lk.Token())
		}
		if err := lk.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("LockFollowsItsSlotToAnotherMaster", func(t *testing.T) {
		c := cluster.Client(t)
		replies := &errorReplies{}
		c.OnNewNode(func(n *redis.Client) { n.AddHook(replies) })
		l := lock.New(c)
		key := testkit.Key(t, "moving")
		slot := cluster.Slot(t, key)
		src, dst := slotOwnerAndAnotherMaster(t, cluster, slot)
		lk := mustObtain(t, l, key, time.Minute)

		// The slot is half moved: the key is on dst already, and src
		// answers ASK for it. dst has never run the lock's scripts, so the
		// redirected EVALSHA meets NOSCRIPT there too.
		if err := nodeClient(t, cluster, dst.Addr).ScriptFlush(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { restoreSlot(t, cluster, slot, src, dst) })
		moveSlot(t, cluster, slot, src, dst, false)
		if err := lk.Refresh(ctxT(t), time.Minute); err != nil {
			t.Fatalf("Refresh while the slot migrates (ASK): %v", err)
		}
		if replies.count("ASK") == 0 || replies.count("NOSCRIPT") == 0 {
			t.Fatalf("error replies seen: %v; want ASK, then NOSCRIPT from the node asked", replies.seen())
		}
		other := mustObtainInSlot(t, l, cluster, slot, key)
		if err := other.Release(ctxT(t)); err != nil {
			t.Fatalf("Release of a new key while the slot migrates (ASK): %v", err)
		}

		// The move completes: src answers MOVED.
		finishSlotMove(t, cluster, slot, dst)
		if err := lk.Refresh(ctxT(t), time.Minute); err != nil {
			t.Fatalf("Refresh after the slot moved (MOVED): %v", err)
		}
		if replies.count("MOVED") == 0 {
			t.Fatalf("error replies seen: %v; want MOVED", replies.seen())
		}
		if _, err := l.Obtain(ctxT(t), key, time.Minute); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("Obtain of the held key after the move = %v, want ErrNotObtained", err)
		}
		if err := lk.Release(ctxT(t)); err != nil {
			t.Fatalf("Release after the slot moved (MOVED): %v", err)
		}
		if got := nodeClient(t, cluster, dst.Addr).Exists(ctxT(t), key).Val(); got != 0 {
			t.Fatalf("key still on %s after Release", dst.Addr)
		}
	})
}

// bgCtx is a context that outlives the test's own, for cleanups.
func bgCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func nodeClient(t *testing.T, cluster scaletest.Cluster, addr string) *redis.Client {
	return scaletest.Node{Addr: addr, Password: cluster.Password}.Client(t)
}

func slotOwnerAndAnotherMaster(t *testing.T, cluster scaletest.Cluster, slot int) (src, dst scaletest.ClusterNode) {
	t.Helper()
	for _, n := range cluster.Topology(t) {
		switch {
		case !n.Master || len(n.Slots) == 0:
		case n.HasSlot(slot):
			src = n
		case dst.ID == "":
			dst = n
		}
	}
	if src.ID == "" || dst.ID == "" {
		t.Fatalf("slot %d: no owner or no other master", slot)
	}
	return src, dst
}

// mustObtainInSlot obtains a new key of the same slot as key (a hash tag).
func mustObtainInSlot(t *testing.T, l *lock.Locker, cluster scaletest.Cluster, slot int, key string) *lock.Lock {
	t.Helper()
	for i := 0; i < 100000; i++ {
		k := fmt.Sprintf("{%d}", i)
		if scaletest.KeySlot(k) == slot {
			return mustObtain(t, l, k+":"+key, time.Minute)
		}
	}
	t.Fatalf("no hash tag found for slot %d", slot)
	return nil
}

// moveSlot moves slot from src to dst the way redis-cli --cluster reshard
// does: dst IMPORTING, src MIGRATING, every key MIGRATEd; with finish, the
// slot is then assigned to dst on every node.
func moveSlot(t *testing.T, cluster scaletest.Cluster, slot int, src, dst scaletest.ClusterNode, finish bool) {
	t.Helper()
	s, d := nodeClient(t, cluster, src.Addr), nodeClient(t, cluster, dst.Addr)
	must := func(err error, what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must(d.Do(bgCtx(t), "cluster", "setslot", slot, "importing", src.ID).Err(), "SETSLOT IMPORTING")
	must(s.Do(bgCtx(t), "cluster", "setslot", slot, "migrating", dst.ID).Err(), "SETSLOT MIGRATING")
	host, port, _ := net.SplitHostPort(dst.Addr)
	for range 100 {
		keys, err := s.ClusterGetKeysInSlot(bgCtx(t), slot, 100).Result()
		must(err, "GETKEYSINSLOT")
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 5000, "auth", cluster.Password, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(s.Do(bgCtx(t), args...).Err(), "MIGRATE")
	}
	if finish {
		finishSlotMove(t, cluster, slot, dst)
	}
}

// restoreSlot gives slot back to src, with the keys moved to dst, from
// whichever state a test left it in: moved, half moved or untouched.
func restoreSlot(t *testing.T, cluster scaletest.Cluster, slot int, src, dst scaletest.ClusterNode) {
	t.Helper()
	owner := ""
	for _, n := range cluster.Topology(t) {
		if n.Master && n.HasSlot(slot) {
			owner = n.ID
		}
	}
	if owner == dst.ID {
		moveSlot(t, cluster, slot, dst, src, true)
		return
	}
	// Not moved (or half): abort the migration, bringing back what went.
	s, d := nodeClient(t, cluster, src.Addr), nodeClient(t, cluster, dst.Addr)
	host, port, _ := net.SplitHostPort(src.Addr)
	for range 100 {
		keys, err := d.ClusterGetKeysInSlot(bgCtx(t), slot, 100).Result()
		if err != nil || len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 5000, "auth", cluster.Password, "replace", "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := d.Do(bgCtx(t), args...).Err(); err != nil {
			t.Errorf("MIGRATE back: %v", err)
			break
		}
	}
	for _, c := range []*redis.Client{s, d} {
		if err := c.Do(bgCtx(t), "cluster", "setslot", slot, "stable").Err(); err != nil {
			t.Errorf("SETSLOT %d STABLE: %v", slot, err)
		}
	}
	finishSlotMove(t, cluster, slot, src)
}

// finishSlotMove assigns slot to dst on every node.
func finishSlotMove(t *testing.T, cluster scaletest.Cluster, slot int, dst scaletest.ClusterNode) {
	t.Helper()
	for _, n := range cluster.Topology(t) {
		if !n.Master {
			continue // replicas learn it from their masters
		}
		if err := nodeClient(t, cluster, n.Addr).Do(bgCtx(t), "cluster", "setslot", slot, "node", dst.ID).Err(); err != nil {
			t.Fatalf("SETSLOT %d NODE on %s: %v", slot, n.Addr, err)
		}
	}
	cluster.WaitHealthy(t, 30*time.Second)
}

// errorReplies records the first word of every error reply a node client
// sees (ASK, MOVED, NOSCRIPT...), which the cluster client then acts on.
type errorReplies struct {
	mu    sync.Mutex
	words []string
}

func (e *errorReplies) count(word string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, w := range e.words {
		if w == word {
			n++
		}
	}
	return n
}

func (e *errorReplies) seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.words)
}

func (e *errorReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (e *errorReplies) record(err error) {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return
	}
	word := rerr.Error()
	if f := strings.Fields(word); len(f) > 0 && f[0] != "ERR" {
		word = f[0]
	}
	e.mu.Lock()
	e.words = append(e.words, word)
	e.mu.Unlock()
}

func (e *errorReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		e.record(err)
		return err
	}
}

// ProcessPipelineHook sees the commands sent after an ASK: ASKING and the
// command, in one pipeline.
func (e *errorReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			e.record(c.Err())
		}
		return err
	}
}
