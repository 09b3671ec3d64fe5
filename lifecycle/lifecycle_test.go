package lifecycle_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/paylock/paylock/lifecycle"
)

// day is the date of the test lifecycle's first event.
var day = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// sixEvents is the lifecycle of issue #23's property test: a failure, a
// success, two partial refunds, a dispute opened and a dispute closed.
func sixEvents() []lifecycle.Event {
	return []lifecycle.Event{
		{Kind: lifecycle.Failed, ID: "evt_fail", Amount: 1000, Currency: "EUR", At: day},
		{Kind: lifecycle.Succeeded, ID: "evt_ok", Amount: 1000, Currency: "EUR", At: day.Add(time.Minute)},
		{Kind: lifecycle.Refund, ID: "evt_r1", RefundID: "re_1", Amount: 300, Currency: "EUR", At: day.Add(time.Hour)},
		{Kind: lifecycle.Refund, ID: "evt_r2", RefundID: "re_2", Amount: 200, Currency: "EUR", At: day.Add(2 * time.Hour)},
		{Kind: lifecycle.DisputeOpened, ID: "evt_dp", At: day.Add(24 * time.Hour)},
		{Kind: lifecycle.DisputeLost, ID: "evt_dl", At: day.Add(48 * time.Hour)},
	}
}

// ledger is the model of what package store keeps of one payment: each
// event once (by id), the state, the version, and the messages forwarded.
type ledger struct {
	seen     map[string]bool
	events   []lifecycle.Event
	state    lifecycle.State
	version  int
	messages []message
}

type message struct {
	typ     string
	version int
	state   lifecycle.State
}

func (l *ledger) record(e lifecycle.Event) {
	if l.seen[e.ID] {
		return // a duplicate: recorded already, changes nothing
	}
	l.seen[e.ID] = true
	l.events = append(l.events, e)
	st := lifecycle.Apply(l.state, l.version, l.events, e)
	if st.Changed {
		l.state = st.State
	}
	if st.Message != "" {
		l.version = st.Version
		l.messages = append(l.messages, message{typ: st.Message, version: st.Version, state: st.State})
	}
}

// deliveries is order with each event delivered 1 to 3 times, the repeats
// at random places after the first delivery.
func deliveries(r *rand.Rand, order []lifecycle.Event) []lifecycle.Event {
	out := append([]lifecycle.Event(nil), order...)
	for i, e := range order {
		for range r.IntN(3) {
			at := i + 1 + r.IntN(len(out)-i)
			out = append(out[:at], append([]lifecycle.Event{e}, out[at:]...)...)
		}
	}
	return out
}

func permutations(evs []lifecycle.Event, fn func([]lifecycle.Event)) {
	var rec func(k int)
	rec = func(k int) {
		if k == len(evs) {
			fn(evs)
			return
		}
		for i := k; i < len(evs); i++ {
			evs[k], evs[i] = evs[i], evs[k]
			rec(k + 1)
			evs[k], evs[i] = evs[i], evs[k]
		}
	}
	rec(0)
}

// TestEveryOrderOfTheLifecycleEndsInTheSameState is issue #23's property:
// every permutation of the six events, each delivered 1-3 times, ends in
// the same state and forwards one message per change of state, with
// distinct versions, the newest carrying the final state.
func TestEveryOrderOfTheLifecycleEndsInTheSameState(t *testing.T) {
	want := lifecycle.State{Status: lifecycle.PartiallyRefunded, Amount: 1000, Currency: "EUR",
		AmountAuthorized: 1000, AmountCaptured: 1000, AmountRefunded: 500, Dispute: lifecycle.Lost}
	r := rand.New(rand.NewPCG(23, 23))
	n := 0
	permutations(sixEvents(), func(order []lifecycle.Event) {
		n++
		l := &ledger{seen: map[string]bool{}}
		seq := deliveries(r, order)
		for _, e := range seq {
			l.record(e)
		}
		name := fmt.Sprint(ids(seq))
		if l.state != want {
			t.Fatalf("%s: state %+v, want %+v", name, l.state, want)
		}
		if len(l.messages) == 0 || l.version != len(l.messages) {
			t.Fatalf("%s: version %d after %d messages", name, l.version, len(l.messages))
		}
		for i, m := range l.messages {
			if m.version != i+1 {
				t.Fatalf("%s: message %d (%s) has version %d", name, i, m.typ, m.version)
			}
		}
		if last := l.messages[len(l.messages)-1]; last.state != want {
			t.Fatalf("%s: the newest message carries %+v, want %+v", name, last.state, want)
		}
		if recorded := count(l.messages, lifecycle.MessageRecorded); recorded != 1 {
			t.Fatalf("%s: %d payment.recorded messages, want 1", name, recorded)
		}
	})
	if n != 720 {
		t.Fatalf("%d permutations, want 720", n)
	}
}

func ids(evs []lifecycle.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func count(ms []message, typ string) int {
	n := 0
	for _, m := range ms {
		if m.typ == typ {
			n++
		}
	}
	return n
}

func TestFold(t *testing.T) {
	ok := lifecycle.Event{Kind: lifecycle.Succeeded, ID: "ok", Amount: 1000, Currency: "EUR"}
	refund := func(id string, amount int64) lifecycle.Event {
		return lifecycle.Event{Kind: lifecycle.Refund, ID: "evt_" + id, RefundID: id, Amount: amount}
	}
	cumulative := func(id string, amount int64) lifecycle.Event {
		return lifecycle.Event{Kind: lifecycle.Refund, ID: id, Amount: amount, Cumulative: true}
	}
	at := func(e lifecycle.Event, h int) lifecycle.Event { e.At = day.Add(time.Duration(h) * time.Hour); return e }
	for _, tc := range []struct {
		name   string
		events []lifecycle.Event
		want   lifecycle.State
	}{
		{"nothing yet", nil, lifecycle.State{Status: lifecycle.Pending}},
		{"a refund before its payment waits", []lifecycle.Event{refund("re_1", 300)},
			lifecycle.State{Status: lifecycle.Pending}},
		{"a failure", []lifecycle.Event{{Kind: lifecycle.Failed, ID: "f", Amount: 1000, Currency: "EUR"}},
			lifecycle.State{Status: lifecycle.StatusFailed, Amount: 1000, Currency: "EUR"}},
		{"canceled beats failed", []lifecycle.Event{{Kind: lifecycle.Failed, ID: "f"}, {Kind: lifecycle.Canceled, ID: "c"}},
			lifecycle.State{Status: lifecycle.StatusCanceled}},
		{"a void of a payment taken at once cancels it", []lifecycle.Event{{Kind: lifecycle.Canceled, ID: "c", Amount: 5}, ok},
			lifecycle.State{Status: lifecycle.StatusCanceled, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000}},
		{"success beats failed", []lifecycle.Event{{Kind: lifecycle.Failed, ID: "f", Amount: 5, Currency: "USD"}, ok},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000}},
		{"distinct refunds add up", []lifecycle.Event{ok, refund("re_1", 300), refund("re_2", 200)},
			lifecycle.State{Status: lifecycle.PartiallyRefunded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, AmountRefunded: 500}},
		{"the same refund twice counts once", []lifecycle.Event{ok, refund("re_1", 300), {Kind: lifecycle.Refund, ID: "other", RefundID: "re_1", Amount: 300}},
			lifecycle.State{Status: lifecycle.PartiallyRefunded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, AmountRefunded: 300}},
		{"refund_failed undoes its refund", []lifecycle.Event{ok, refund("re_1", 300), refund("re_2", 200), {Kind: lifecycle.RefundFailed, ID: "rf", RefundID: "re_1"}},
			lifecycle.State{Status: lifecycle.PartiallyRefunded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, AmountRefunded: 200}},
		{"cumulative: the largest", []lifecycle.Event{ok, cumulative("c2", 700), cumulative("c1", 300)},
			lifecycle.State{Status: lifecycle.PartiallyRefunded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, AmountRefunded: 700}},
		{"refunded in full", []lifecycle.Event{ok, cumulative("c", 1000)},
			lifecycle.State{Status: lifecycle.Refunded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, AmountRefunded: 1000}},
		{"over-refunded: capped and flagged", []lifecycle.Event{ok, refund("re_1", 800), refund("re_2", 800)},
			lifecycle.State{Status: lifecycle.Refunded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, AmountRefunded: 1000, OverRefunded: true}},
		{"a closed dispute is not reopened", []lifecycle.Event{ok, at(lifecycle.Event{Kind: lifecycle.DisputeWon, ID: "w"}, 1), at(lifecycle.Event{Kind: lifecycle.DisputeOpened, ID: "o"}, 5)},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, Dispute: lifecycle.Won}},
		{"the latest outcome by date", []lifecycle.Event{ok,
			at(lifecycle.Event{Kind: lifecycle.DisputeLost, ID: "CHARGEBACK"}, 1),
			at(lifecycle.Event{Kind: lifecycle.DisputeLost, ID: "SECOND_CHARGEBACK"}, 3),
			at(lifecycle.Event{Kind: lifecycle.DisputeWon, ID: "CHARGEBACK_REVERSED"}, 2)},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, Dispute: lifecycle.Lost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lifecycle.Fold(tc.events); got != tc.want {
				t.Errorf("Fold = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestApplyForwardsNothingWhilePending(t *testing.T) {
	r := lifecycle.Event{Kind: lifecycle.Refund, ID: "r", Amount: 100}
	st := lifecycle.Apply(lifecycle.State{}, 0, []lifecycle.Event{r}, r)
	if !st.Changed || st.Message != "" || st.Version != 0 {
		t.Fatalf("a refund before its payment: %+v, want a stored change, no message, version 0", st)
	}
	ok := lifecycle.Event{Kind: lifecycle.Succeeded, ID: "ok", Amount: 1000}
	st = lifecycle.Apply(st.State, st.Version, []lifecycle.Event{r, ok}, ok)
	if st.Message != lifecycle.MessageRecorded || st.Version != 1 || st.State.Status != lifecycle.PartiallyRefunded {
		t.Fatalf("its payment: %+v, want payment.recorded, version 1, partially_refunded", st)
	}
	again := lifecycle.Apply(st.State, st.Version, []lifecycle.Event{r, ok, {Kind: lifecycle.Failed, ID: "f"}}, lifecycle.Event{Kind: lifecycle.Failed, ID: "f"})
	if again.Changed || again.Message != "" || again.Version != 1 {
		t.Fatalf("a failure after the success: %+v, want no change", again)
	}
}
