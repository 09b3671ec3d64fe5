package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
)

// counterKey is where the fence counter of a key without a hash tag lives.
func counterKey(key string) string { return "{" + key + "}:fence" }

func cleanupCounter(t *testing.T, c *redis.Client, key string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Del(ctx, counterKey(key))
	})
}

func mustObtainFenced(t *testing.T, l *lock.Locker, key string, ttl time.Duration) *lock.Lock {
	t.Helper()
	lk, err := l.Obtain(ctxT(t), key, ttl, lock.WithFencing())
	if err != nil {
		t.Fatalf("Obtain(%q, %v, WithFencing): %v", key, ttl, err)
	}
	return lk
}

func TestFencing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"FencesIncreaseAcrossOwnersAndOutliveTheLock", func(t *testing.T, e *env) {
			l := lock.New(e.client)
			var fences []int64
			lk := mustObtainFenced(t, l, e.key, time.Minute)
			fences = append(fences, lk.Fence())
			if err := lk.Release(ctxT(t)); err != nil {
				t.Fatalf("Release of a fenced lock: %v", err)
			}
			lk = mustObtainFenced(t, l, e.key, e.short)
			fences = append(fences, lk.Fence())
			e.advance(2 * e.short) // the lock key expires; the counter does not
			lk = mustObtainFenced(t, l, e.key, time.Minute)
			fences = append(fences, lk.Fence())
			if fmt.Sprint(fences) != "[1 2 3]" {
				t.Fatalf("fences = %v, want [1 2 3]", fences)
			}
			if got := get(t, e.client, e.key); got != lk.Token() || got[len(got)-2:] != "/3" {
				t.Fatalf("key = %q, want our token %q ending in the fence", got, lk.Token())
			}
			if ttl, err := e.client.PTTL(ctxT(t), counterKey(e.key)).Result(); err != nil || ttl != -1 {
				t.Fatalf("counter PTTL = %v, %v; want no TTL", ttl, err)
			}
		}},
		{"BusyAndFinishedMintNothing", func(t *testing.T, e *env) {
			l := lock.New(e.client)
			lk := mustObtainFenced(t, l, e.key, time.Minute)
			_, err := l.Obtain(ctxT(t), e.key, time.Minute, lock.WithFencing())
			var busy *lock.BusyError
			if !errors.As(err, &busy) || busy.TTL <= 50*time.Second {
				t.Fatalf("second fenced Obtain: err = %v, want a *BusyError with the holder's TTL", err)
			}
			if err := lk.Finish(ctxT(t), time.Minute); err != nil {
				t.Fatalf("Finish of a fenced lock: %v", err)
			}
			if _, err := l.Obtain(ctxT(t), e.key, time.Minute, lock.WithFencing()); !errors.Is(err, lock.ErrFinished) {
				t.Fatalf("fenced Obtain after Finish: err = %v, want ErrFinished", err)
			}
			if got := get(t, e.client, counterKey(e.key)); got != "1" {
				t.Fatalf("counter = %q, want 1: only the acquired Obtain mints", got)
			}
		}},
		{"RefreshTTLAndStaleOwnerWorkOnFencedLocks", func(t *testing.T, e *env) {
			l := lock.New(e.client)
			stale := mustObtainFenced(t, l, e.key, e.short)
			if err := stale.Refresh(ctxT(t), e.short); err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			if d, err := stale.TTL(ctxT(t)); err != nil || d <= 0 {
				t.Fatalf("TTL = %v, %v; want it running", d, err)
			}
			e.advance(2 * e.short)
			owner := mustObtainFenced(t, l, e.key, time.Minute)
			if owner.Fence() != stale.Fence()+1 {
				t.Fatalf("fences %d then %d, want consecutive", stale.Fence(), owner.Fence())
			}
			if err := stale.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("stale Release: %v, want ErrNotHeld", err)
			}
			if err := owner.Release(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}},
		{"UnfencedLockHasNoFence", func(t *testing.T, e *env) {
			lk := mustObtain(t, lock.New(e.client), e.key, time.Minute)
			if lk.Fence() != 0 || lk.Attempts() != 1 || lk.Waited() != 0 {
				t.Fatalf("Fence, Attempts, Waited = %d, %d, %v; want 0, 1, 0", lk.Fence(), lk.Attempts(), lk.Waited())
			}
		}},
		{"RetriedObtainReturnsTheFenceItMinted", func(t *testing.T, e *env) {
			loser := &replyLoser{key: []byte(e.key)}
			e.client.AddHook(loser)
			l := lock.New(e.client)
			mustObtainFenced(t, l, e.key, time.Millisecond) // fence 1, gone in 1ms
			e.advance(2 * e.short)

			loser.arm()
			lk := mustObtainFenced(t, l, e.key, time.Minute)
			if loser.lost.Load() != 1 {
				t.Fatalf("replies dropped = %d, want 1 (the hook did not fire)", loser.lost.Load())
			}
			if sent := loser.commands(); len(sent) < 2 || sent[len(sent)-2] != sent[len(sent)-1] {
				t.Fatalf("commands sent = %q, want the script twice (go-redis's retry)", sent)
			}
			if lk.Fence() != 2 || get(t, e.client, counterKey(e.key)) != "2" {
				t.Fatalf("fence %d, counter %s; want 2 and 2: the retry found its own fence", lk.Fence(), get(t, e.client, counterKey(e.key)))
			}
			if got := get(t, e.client, e.key); got != lk.Token() {
				t.Fatalf("key = %q, want our token %q", got, lk.Token())
			}
			if err := lk.Release(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}},
		{"ConcurrentObtainersGetDistinctFences", func(t *testing.T, e *env) {
			l := lock.New(e.client)
			var (
				mu     sync.Mutex
				fences = map[int64]bool{}
				wg     sync.WaitGroup
			)
			for range 8 {
				wg.Go(func() {
					for range 10 {
						lk, err := l.Obtain(ctxT(t), e.key, time.Minute, lock.WithFencing(),
							lock.WithRetry(lock.MaxWait(lock.ExponentialBackoff(time.Millisecond, 5*time.Millisecond), 5*time.Second)))
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if fences[lk.Fence()] {
							t.Errorf("fence %d handed out twice", lk.Fence())
						}
						fences[lk.Fence()] = true
						mu.Unlock()
						if err := lk.Release(ctxT(t)); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			if len(fences) != 80 || !fences[1] || !fences[80] {
				t.Fatalf("%d distinct fences, want 1..80", len(fences))
			}
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					e := b.setup(t)
					cleanupCounter(t, e.client, e.key)
					tc.run(t, e)
				})
			}
		})
	}
}

func TestFencingRejectsAKeyThatCannotShareItsCountersSlot(t *testing.T) {
	t.Parallel()
	e := setupMiniredis(t)
	_, err := lock.New(e.client).Obtain(ctxT(t), "a}b", time.Minute, lock.WithFencing())
	if err == nil || errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("err = %v, want a key error", err)
	}
}

// TestStaleHolderWriteIsRefusedByItsFence runs the documented use of the
// fence: each holder writes with a conditional UPDATE that only a larger
// fence than the row's passes. The first holder pauses past its TTL; a new
// holder obtains the lock and writes; the first resumes, believes it still
// holds the lock, and writes: the database refuses it.
func TestStaleHolderWriteIsRefusedByItsFence(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	db := testkit.Connect(t, testkit.Schema(t))
	if _, err := db.Exec(ctx, `
		CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0);
		INSERT INTO accounts (id, balance) VALUES ('acc_1', 100)`); err != nil {
		t.Fatal(err)
	}
	// write sets the balance under lk's fence; it reports whether the
	// database took the write.
	write := func(lk *lock.Lock, balance int64) bool {
		t.Helper()
		tag, err := db.Exec(ctx, `UPDATE accounts SET balance = $2, fence = $3 WHERE id = $1 AND fence < $3`,
			"acc_1", balance, lk.Fence())
		if err != nil {
			t.Fatal(err)
		}
		return tag.RowsAffected() == 1
	}

	e := setupMiniredis(t) // its clock moves when the test says: the pause
	key := "paylock-test:account:acc_1:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	l := lock.New(e.client)
	stale := mustObtainFenced(t, l, key, time.Second)
	e.advance(2 * time.Second) // the holder pauses (GC, a stopped VM) past its TTL

	owner := mustObtainFenced(t, l, key, time.Second)
	if !write(owner, 150) {
		t.Fatal("the new holder's write was refused")
	}
	// The stale holder resumes and writes what it computed before its pause.
	if write(stale, 90) {
		t.Fatal("the stale holder's write was taken: the fence did not protect the row")
	}
	var balance, fence int64
	if err := db.QueryRow(ctx, `SELECT balance, fence FROM accounts WHERE id = 'acc_1'`).Scan(&balance, &fence); err != nil {
		t.Fatal(err)
	}
	if balance != 150 || fence != owner.Fence() {
		t.Fatalf("row = balance %d, fence %d; want the new holder's 150 and fence %d", balance, fence, owner.Fence())
	}
	if err := stale.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("stale Release: %v, want ErrNotHeld", err)
	}
}
