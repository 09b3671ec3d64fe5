package lock

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Notices is the fetch ledger of payments that webhooks name without
// carrying them (Mollie's ids, GoCardless's events, Stripe's thin events),
// shared by every process on the same Redis. Each notice that arrives takes
// a place in its payment's count (Arrive); a fetch notes the count before
// it asks the provider (State), and once what it fetched is recorded,
// that count as covered (Cover). A notice whose place is covered needs no
// fetch of its own: a fetch that began after it arrived saw at least the
// state it announces. So copies of one notification, delivered at once to
// several replicas, cost one or two fetches, not one each.
//
// Like the lock, it only saves work: when Redis cannot answer, or has lost
// a payment's ledger, the caller fetches (a place of 0 is covered by
// nothing), and the database still records each event once.
type Notices struct {
	rdb    redis.Scripter
	prefix string
	ttl    time.Duration
}

//go:embed notices.lua
var noticesLua string

var noticesScript = redis.NewScript(noticesLua)

// NoticesTTL is how long a payment's ledger outlives its last notice or
// fetch: far longer than any delivery, so that no delivery's place is
// forgotten while it is in flight.
const NoticesTTL = 10 * time.Minute

// NewNotices returns the ledger whose keys are prefix + "notices:" + the
// key a caller gives (a source and a payment id).
func NewNotices(rdb redis.Scripter, prefix string) *Notices {
	return &Notices{rdb: rdb, prefix: prefix + "notices:", ttl: NoticesTTL}
}

// Arrive notes that a notice naming key arrived and returns its place: 1
// for the first, then 2, ... An error is Redis's.
func (n *Notices) Arrive(ctx context.Context, key string) (int64, error) {
	place, err := noticesScript.Run(ctx, n.rdb, []string{n.prefix + key}, "arrive", n.ttl.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("lock: notices arrive: %w", err)
	}
	return place, nil
}

// NoticeState is what a payment's ledger holds.
type NoticeState struct {
	// Arrived is how many notices of the payment arrived (the place of
	// the latest).
	Arrived int64
	// Covered is the highest place a recorded fetch covered: every notice
	// at or before it is answered by that fetch.
	Covered int64
	// Gone is the highest place a fetch that found no such payment
	// covered.
	Gone int64
}

// State returns key's ledger; zero for a key with none.
func (n *Notices) State(ctx context.Context, key string) (NoticeState, error) {
	v, err := noticesScript.Run(ctx, n.rdb, []string{n.prefix + key}, "state").Int64Slice()
	if err != nil || len(v) != 3 {
		return NoticeState{}, fmt.Errorf("lock: notices state: %v %w", v, err)
	}
	return NoticeState{Arrived: v[0], Covered: v[1], Gone: v[2]}, nil
}

// Cover notes that a fetch of key that began when place notices had
// arrived is recorded (gone: it found no such payment). It reports
// whether it was noted: not when the ledger no longer holds place
// arrivals (it expired or a failover lost it), since a notice arriving
// now would take a place the fetch never saw.
func (n *Notices) Cover(ctx context.Context, key string, place int64, gone bool) (bool, error) {
	g := "0"
	if gone {
		g = "1"
	}
	ok, err := noticesScript.Run(ctx, n.rdb, []string{n.prefix + key}, "cover", n.ttl.Milliseconds(), place, g).Int()
	if err != nil {
		return false, fmt.Errorf("lock: notices cover: %w", err)
	}
	return ok == 1, nil
}
