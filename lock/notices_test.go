package lock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
)

// Notices arriving at two processes share one count; a fetch covers every
// notice that arrived before it began, and none that arrived after.
func TestNoticesCoverWhatArrivedBeforeTheFetch(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	prefix := testkit.Key(t, "notices") + ":"
	a := lock.NewNotices(testkit.Redis(t), prefix)
	b := lock.NewNotices(testkit.Redis(t), prefix)

	p1, err := a.Arrive(ctx, "mollie:tr_1")
	if err != nil || p1 != 1 {
		t.Fatalf("first notice: place %d, %v; want 1", p1, err)
	}
	p2, err := b.Arrive(ctx, "mollie:tr_1")
	if err != nil || p2 != 2 {
		t.Fatalf("second notice, another process: place %d, %v; want 2", p2, err)
	}
	if p, err := a.Arrive(ctx, "mollie:tr_2"); err != nil || p != 1 {
		t.Fatalf("another payment's count is its own: place %d, %v", p, err)
	}
	// A fetch begins: it sees 2 arrivals. A third notice arrives meanwhile.
	st, err := a.State(ctx, "mollie:tr_1")
	if err != nil || st != (lock.NoticeState{Arrived: 2}) {
		t.Fatalf("state before any fetch: %+v, %v", st, err)
	}
	p3, _ := b.Arrive(ctx, "mollie:tr_1")
	if ok, err := a.Cover(ctx, "mollie:tr_1", st.Arrived, false); !ok || err != nil {
		t.Fatalf("cover: %v, %v", ok, err)
	}
	st, err = b.State(ctx, "mollie:tr_1")
	if err != nil || st.Covered != 2 || st.Arrived != 3 || st.Gone != 0 {
		t.Fatalf("state after the fetch: %+v, %v; want 3 arrived, 2 covered", st, err)
	}
	if p1 > st.Covered || p2 > st.Covered || p3 <= st.Covered {
		t.Fatalf("places %d %d covered and %d not: covered %d", p1, p2, p3, st.Covered)
	}
	// An older fetch recorded late never lowers what is covered.
	if ok, err := a.Cover(ctx, "mollie:tr_1", 1, false); !ok || err != nil {
		t.Fatalf("late cover: %v, %v", ok, err)
	}
	if st, _ := a.State(ctx, "mollie:tr_1"); st.Covered != 2 {
		t.Fatalf("covered after a late, older cover: %d, want 2", st.Covered)
	}
	// A fetch that found no such payment is noted apart.
	if ok, err := a.Cover(ctx, "mollie:tr_1", 3, true); !ok || err != nil {
		t.Fatalf("gone: %v, %v", ok, err)
	}
	if st, _ := a.State(ctx, "mollie:tr_1"); st.Covered != 2 || st.Gone != 3 {
		t.Fatalf("after a gone fetch: %+v, want covered 2, gone 3", st)
	}
}

// A ledger that lost the arrivals a fetch counted (expired, flushed, a
// failover) is not marked covered: a notice arriving next would take a
// place that fetch never saw.
func TestNoticesRefuseToCoverALostCount(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	rdb := testkit.Redis(t)
	prefix := testkit.Key(t, "notices-lost") + ":"
	n := lock.NewNotices(rdb, prefix)
	for range 3 {
		if _, err := n.Arrive(ctx, "gc:PM1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Del(ctx, prefix+"notices:gc:PM1").Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := n.Cover(ctx, "gc:PM1", 3, false); ok || err != nil {
		t.Fatalf("cover of a lost count: %v, %v; want not noted", ok, err)
	}
	p, _ := n.Arrive(ctx, "gc:PM1")
	if st, _ := n.State(ctx, "gc:PM1"); p != 1 || st.Covered != 0 {
		t.Fatalf("the next notice: place %d, covered %d; want 1, 0 (it must fetch)", p, st.Covered)
	}
}

// Redis unreachable: errors, never a place.
func TestNoticesReportRedisErrors(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	n := lock.NewNotices(c, "paylock:")
	if p, err := n.Arrive(context.Background(), "k"); err == nil || p != 0 {
		t.Fatalf("arrive: %d, %v", p, err)
	}
	if _, err := n.State(context.Background(), "k"); err == nil {
		t.Fatal("state: no error")
	}
	if ok, err := n.Cover(context.Background(), "k", 1, false); err == nil || ok {
		t.Fatalf("cover: %v, %v", ok, err)
	}
}
