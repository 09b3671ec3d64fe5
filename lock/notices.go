package lock

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Notices is the fetch ledger of payments that webhooks name without
// carrying them (Mollie's ids, GoCardless's events, Stripe's thin events),
// shared by every process on the same Redis. Each notice that arrives takes
// a place in its payment's count (Arrive); a fetch notes the count before
// it asks the provider (State), and once what it fetched is recorded,
// that count as covered, with what the fetch came to (Cover). A notice
// whose place is covered needs no fetch of its own: a fetch that began
// after it arrived saw at least the state it announces. So copies of one
// notification, delivered at once to several replicas, cost one or two
// fetches, not one each; and a copy of an event delivered again (a retry of
// a batch) keeps its first copy's place, so a fetch since then answers it.
//
// A ledger has an epoch, a random identity its first notice gives it: a
// ledger that expired or that Redis lost is made anew with another epoch,
// and a fetch counted in the old one covers nothing in the new. What it
// cannot see is a failover to a replica that had not yet received the
// latest arrivals of the same ledger (Redis replicates asynchronously):
// the arrivals it lacks are counted again, and a fetch that began before
// them may be taken as covering them. The window is a failover's
// replication lag, during a storm of one payment's notices whose state
// changes in it.
//
// Like the lock, it only saves work: when Redis cannot answer, or has lost
// a payment's ledger, the caller fetches (a place of 0 is covered by
// nothing), and the database still records each event once.
type Notices struct {
	rdb    redis.Scripter
	prefix string
	// arrivalTTL is how long a ledger that only holds arrivals lives;
	// coverTTL how long one a fetch covered does.
	arrivalTTL, coverTTL time.Duration
}

//go:embed notices.lua
var noticesLua string

var noticesScript = redis.NewScript(noticesLua)

// NoticesTTL is how long a payment's ledger outlives its last fetch, and
// NoticeArrivalTTL how long one that only holds arrivals lives: far longer
// than any delivery, so that no delivery's place is forgotten while it is
// in flight, and short enough that ids nobody paid (anyone can send
// Mollie's) do not pile up.
const (
	NoticesTTL       = 10 * time.Minute
	NoticeArrivalTTL = 2 * time.Minute
)

// maxEventID bounds the event ids a ledger remembers the first place of;
// a longer one takes a place per copy.
const maxEventID = 128

// NewNotices returns the ledger whose keys are prefix + "notices:" + the
// key a caller gives (a source and a payment id).
func NewNotices(rdb redis.Scripter, prefix string) *Notices {
	return &Notices{rdb: rdb, prefix: prefix + "notices:", arrivalTTL: NoticeArrivalTTL, coverTTL: NoticesTTL}
}

// Arrival is a notice's place in its payment's ledger.
type Arrival struct {
	// Place is 1 for the first notice, then 2, ...; a later copy of an
	// event keeps its first copy's place. 0: unknown, covered by nothing.
	Place int64
	// Epoch is the ledger's identity.
	Epoch string
}

// Arrive notes that a notice naming key arrived (eventID: the provider's
// id of the event it carries, "" when none) and returns its place. An
// error is Redis's.
func (n *Notices) Arrive(ctx context.Context, key, eventID string) (Arrival, error) {
	if len(eventID) > maxEventID {
		eventID = ""
	}
	v, err := noticesScript.Run(ctx, n.rdb, []string{n.prefix + key}, "arrive", n.arrivalTTL.Milliseconds(),
		uuid.NewString(), eventID).Slice()
	if err != nil || len(v) != 2 {
		return Arrival{}, fmt.Errorf("lock: notices arrive: %v %w", v, err)
	}
	place, _ := v[0].(int64)
	epoch, _ := v[1].(string)
	if place <= 0 || epoch == "" {
		return Arrival{}, fmt.Errorf("lock: notices arrive: an answer of %v", v)
	}
	return Arrival{Place: place, Epoch: epoch}, nil
}

// A NoticeOutcome is what a fetch came to, for Cover.
type NoticeOutcome string

// The outcomes of a fetch.
const (
	NoticeRecorded NoticeOutcome = "recorded" // what the API said is recorded
	NoticeGone     NoticeOutcome = "gone"     // the API knows no such payment
	NoticeOpen     NoticeOutcome = "open"     // the payment is in no state to record yet
)

// NoticeState is what a payment's ledger holds.
type NoticeState struct {
	// Epoch is the ledger's identity; "" when there is none.
	Epoch string
	// Arrived is how many notices of the payment arrived: the place a
	// fetch starting now covers.
	Arrived int64
	// Recorded, Gone and Open are the highest places a fetch with each
	// outcome covered: every notice at or before one is answered by that
	// fetch.
	Recorded, Gone, Open int64
}

// Answers returns what answers a notice at arrival a: the outcome of the
// latest fetch that covers it, false when none does (another epoch, or
// every fetch began before it arrived).
func (s NoticeState) Answers(a Arrival) (NoticeOutcome, bool) {
	if a.Place <= 0 || s.Epoch == "" || s.Epoch != a.Epoch {
		return "", false
	}
	best, out := int64(0), NoticeOutcome("")
	for _, c := range []struct {
		at int64
		o  NoticeOutcome
	}{{s.Recorded, NoticeRecorded}, {s.Gone, NoticeGone}, {s.Open, NoticeOpen}} {
		if c.at > best {
			best, out = c.at, c.o
		}
	}
	return out, best >= a.Place
}

// State returns key's ledger; zero for a key with none.
func (n *Notices) State(ctx context.Context, key string) (NoticeState, error) {
	v, err := noticesScript.Run(ctx, n.rdb, []string{n.prefix + key}, "state").Slice()
	if err != nil || len(v) != 5 {
		return NoticeState{}, fmt.Errorf("lock: notices state: %v %w", v, err)
	}
	var st NoticeState
	st.Arrived, _ = v[0].(int64)
	st.Recorded, _ = v[1].(int64)
	st.Gone, _ = v[2].(int64)
	st.Open, _ = v[3].(int64)
	st.Epoch, _ = v[4].(string)
	return st, nil
}

// Cover notes that a fetch of key that began at st (the state it read
// before asking the provider: its epoch, and its count of arrivals) came
// to outcome. It reports whether it was noted: not when the ledger is no
// longer the one the fetch counted in, or holds fewer arrivals, since a
// notice arriving now would take a place the fetch never saw.
func (n *Notices) Cover(ctx context.Context, key string, st NoticeState, outcome NoticeOutcome) (bool, error) {
	if st.Epoch == "" || st.Arrived <= 0 {
		return false, nil
	}
	ok, err := noticesScript.Run(ctx, n.rdb, []string{n.prefix + key}, "cover", n.coverTTL.Milliseconds(),
		st.Arrived, string(outcome), st.Epoch).Int()
	if err != nil {
		return false, fmt.Errorf("lock: notices cover: %w", err)
	}
	return ok == 1, nil
}
