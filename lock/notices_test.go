package lock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
)

// Notices arriving at two processes share one count; a fetch covers every
// notice that arrived before it began, and none that arrived after; the
// latest fetch's outcome answers.
func TestNoticesCoverWhatArrivedBeforeTheFetch(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	prefix := testkit.Key(t, "notices") + ":"
	a := lock.NewNotices(testkit.Redis(t), prefix)
	b := lock.NewNotices(testkit.Redis(t), prefix)

	n1, err := a.Arrive(ctx, "mollie:tr_1", "")
	if err != nil || n1.Place != 1 || n1.Epoch == "" {
		t.Fatalf("first notice: %+v, %v; want place 1 of an epoch", n1, err)
	}
	n2, err := b.Arrive(ctx, "mollie:tr_1", "")
	if err != nil || n2.Place != 2 || n2.Epoch != n1.Epoch {
		t.Fatalf("second notice, another process: %+v, %v; want place 2 of the same epoch", n2, err)
	}
	if other, err := a.Arrive(ctx, "mollie:tr_2", ""); err != nil || other.Place != 1 || other.Epoch == n1.Epoch {
		t.Fatalf("another payment's ledger is its own: %+v, %v", other, err)
	}
	// A fetch begins: it sees 2 arrivals. A third notice arrives meanwhile.
	st, err := a.State(ctx, "mollie:tr_1")
	if err != nil || st.Arrived != 2 || st.Epoch != n1.Epoch {
		t.Fatalf("state before any fetch: %+v, %v", st, err)
	}
	if _, ok := st.Answers(n1); ok {
		t.Fatal("a notice is answered before any fetch")
	}
	n3, _ := b.Arrive(ctx, "mollie:tr_1", "")
	if ok, err := a.Cover(ctx, "mollie:tr_1", st, lock.NoticeOpen); !ok || err != nil {
		t.Fatalf("cover: %v, %v", ok, err)
	}
	after, _ := b.State(ctx, "mollie:tr_1")
	for _, n := range []lock.Arrival{n1, n2} {
		if o, ok := after.Answers(n); !ok || o != lock.NoticeOpen {
			t.Fatalf("notice %d after the fetch that began after it: %q %v; want open", n.Place, o, ok)
		}
	}
	if _, ok := after.Answers(n3); ok {
		t.Fatalf("notice 3 arrived after the fetch began, yet it is answered: %+v", after)
	}
	// The next fetch records the payment: it answers all three.
	if ok, _ := a.Cover(ctx, "mollie:tr_1", after, lock.NoticeRecorded); !ok {
		t.Fatal("second cover not noted")
	}
	final, _ := a.State(ctx, "mollie:tr_1")
	for _, n := range []lock.Arrival{n1, n2, n3} {
		if o, ok := final.Answers(n); !ok || o != lock.NoticeRecorded {
			t.Fatalf("notice %d: %q %v; want recorded, the latest fetch's outcome", n.Place, o, ok)
		}
	}
	// An older fetch noted late never lowers what is covered.
	if ok, _ := a.Cover(ctx, "mollie:tr_1", st, lock.NoticeRecorded); !ok {
		t.Fatal("late cover not noted")
	}
	if s, _ := a.State(ctx, "mollie:tr_1"); s.Recorded != 3 {
		t.Fatalf("recorded after a late, older cover: %d, want 3", s.Recorded)
	}
}

// A copy of an event delivered again (a batch retried) keeps its first
// copy's place: a fetch that began after the first copy answers it.
func TestNoticesKeepAnEventsFirstPlace(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	n := lock.NewNotices(testkit.Redis(t), testkit.Key(t, "notices-ev")+":")
	first, _ := n.Arrive(ctx, "gc:PM1", "EV1")
	st, _ := n.State(ctx, "gc:PM1")
	if ok, _ := n.Cover(ctx, "gc:PM1", st, lock.NoticeRecorded); !ok {
		t.Fatal("cover not noted")
	}
	again, _ := n.Arrive(ctx, "gc:PM1", "EV1")
	other, _ := n.Arrive(ctx, "gc:PM1", "EV2")
	if again.Place != first.Place {
		t.Fatalf("the event's second copy took place %d, want its first copy's %d", again.Place, first.Place)
	}
	st, _ = n.State(ctx, "gc:PM1")
	if _, ok := st.Answers(again); !ok {
		t.Fatal("the event's second copy is not answered by the fetch since its first")
	}
	if _, ok := st.Answers(other); ok {
		t.Fatal("another event arriving after the fetch is answered")
	}
}

// A ledger that lost the arrivals a fetch counted (expired, flushed, a
// failover to an empty replica) is made anew with another epoch: the fetch
// that counted in the old one covers nothing in it, however many notices
// arrived since.
func TestNoticesRefuseToCoverALostLedger(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	rdb := testkit.Redis(t)
	prefix := testkit.Key(t, "notices-lost") + ":"
	n := lock.NewNotices(rdb, prefix)
	for range 2 {
		if _, err := n.Arrive(ctx, "gc:PM1", ""); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := n.State(ctx, "gc:PM1") // a fetch begins, counting 2
	if err := rdb.Del(ctx, prefix+"notices:gc:PM1").Err(); err != nil {
		t.Fatal(err)
	}
	later1, _ := n.Arrive(ctx, "gc:PM1", "")
	later2, _ := n.Arrive(ctx, "gc:PM1", "")
	if ok, err := n.Cover(ctx, "gc:PM1", st, lock.NoticeRecorded); ok || err != nil {
		t.Fatalf("cover of a lost ledger: %v, %v; want not noted", ok, err)
	}
	now, _ := n.State(ctx, "gc:PM1")
	for _, a := range []lock.Arrival{later1, later2} {
		if _, ok := now.Answers(a); ok {
			t.Fatalf("notice %d, arrived after the fetch began, is answered: %+v", a.Place, now)
		}
	}
}

// Redis unreachable: errors, never a place.
func TestNoticesReportRedisErrors(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	n := lock.NewNotices(c, "paylock:")
	if a, err := n.Arrive(context.Background(), "k", ""); err == nil || a.Place != 0 {
		t.Fatalf("arrive: %+v, %v", a, err)
	}
	if _, err := n.State(context.Background(), "k"); err == nil {
		t.Fatal("state: no error")
	}
	if ok, err := n.Cover(context.Background(), "k", lock.NoticeState{Epoch: "e", Arrived: 1}, lock.NoticeRecorded); err == nil || ok {
		t.Fatalf("cover: %v, %v", ok, err)
	}
}
