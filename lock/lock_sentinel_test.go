package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/scaletest"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
)

// The lock through a sentinel-managed failover client
// (scripts/redis-sentinel.sh; make scale): the client talks to whichever
// node the sentinels name master, so a failover moves the lock's commands
// to the promoted replica, where a lock is present only if replication
// carried it there in time.

func TestLockOnRedisSentinel(t *testing.T) {
	group := scaletest.RedisSentinel(t)

	t.Run("ObtainRefreshRelease", func(t *testing.T) {
		c := group.Client(t)
		l := lock.New(c)
		key := testkit.Key(t, "k")
		lk := mustObtain(t, l, key, time.Minute)
		if _, err := l.Obtain(ctxT(t), key, time.Minute); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("second Obtain = %v, want ErrNotObtained", err)
		}
		if err := lk.Refresh(ctxT(t), time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := lk.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ObtainSucceedsWhenGoRedisRetriesALostReply", func(t *testing.T) {
		key := testkit.Key(t, "lost")
		loser := &replyLoser{key: []byte(key)}
		c := group.Client(t)
		c.AddHook(loser)
		l := lock.New(c)
		loser.arm()
		lk := mustObtain(t, l, key, time.Minute)
		if loser.lost.Load() != 1 {
			t.Fatalf("replies dropped = %d, want 1", loser.lost.Load())
		}
		if got := getFrom(t, c, key); got != lk.Token() {
			t.Fatalf("key = %q, want our token %q", got, lk.Token())
		}
		if err := lk.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("LockerFollowsTheMasterAcrossAFailover", func(t *testing.T) {
		c := group.Client(t)
		l := lock.New(c)
		before := testkit.Key(t, "before")
		lk := mustObtain(t, l, before, time.Minute)

		promoted, took := group.Failover(t)
		t.Logf("SENTINEL FAILOVER: %s is master after %s", promoted.Addr, took.Round(100*time.Millisecond))

		// The lock taken before is still ours, or gone (a failover may
		// lose it): never another owner's, and never an error for long.
		testkit.Eventually(t, 2*time.Second, "Refresh after the failover", func(ctx context.Context) error {
			if err := lk.Refresh(ctx, time.Minute); err != nil && !errors.Is(err, lock.ErrNotHeld) {
				return err
			}
			return nil
		})
		after := mustObtain(t, l, testkit.Key(t, "after"), time.Minute)
		info, ierr := c.Info(ctxT(t), "server").Result()
		if ierr != nil || !strings.Contains(info, "tcp_port:"+promoted.Addr[strings.LastIndex(promoted.Addr, ":")+1:]) {
			t.Fatalf("the client does not talk to the promoted master %s: %v", promoted.Addr, ierr)
		}
		if err := after.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if err := lk.Release(ctxT(t)); err != nil && !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("Release of the lock taken before the failover: %v", err)
		}
	})
}
