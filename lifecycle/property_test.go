package lifecycle_test

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/paylock/paylock/lifecycle"
)

// genLifecycle draws a payment's events: an authorisation or a success
// (manual or automatic capture), adjustments, partial and failed captures,
// a void or a cancel-or-refund, refunds with any of their statuses and a
// cumulative figure, disputes by stage and date, some of them in a second
// currency, which must never be applied.
func genLifecycle(t *rapid.T) []lifecycle.Event {
	amount := rapid.Int64Range(1, 10_000)
	currency := func(label string) string {
		if rapid.IntRange(0, 5).Draw(t, label) == 0 {
			return "USD"
		}
		return "EUR"
	}
	var evs []lifecycle.Event
	add := func(e lifecycle.Event) { evs = append(evs, e) }
	baseKind := rapid.SampledFrom([]lifecycle.Kind{lifecycle.Succeeded, lifecycle.Authorized}).Draw(t, "base")
	add(lifecycle.Event{Kind: baseKind, ID: "base", Amount: amount.Draw(t, "base amount"), Currency: "EUR"})
	if rapid.Bool().Draw(t, "failed attempt") {
		add(lifecycle.Event{Kind: lifecycle.Failed, ID: "failed", Amount: amount.Draw(t, "failed amount"), Currency: currency("failed currency")})
	}
	for i := range rapid.IntRange(0, 2).Draw(t, "adjustments") {
		add(lifecycle.Event{Kind: lifecycle.AuthorizationAdjusted, ID: fmt.Sprint("adj", i), Amount: amount.Draw(t, "adj amount"),
			Currency: currency("adj currency")})
	}
	for i := range rapid.IntRange(0, 3).Draw(t, "captures") {
		id := fmt.Sprint("cap", i)
		a := amount.Draw(t, "capture amount")
		cur := currency("capture currency")
		add(lifecycle.Event{Kind: lifecycle.Captured, ID: id + ".ok", CaptureID: id, Amount: a, Currency: cur})
		if rapid.IntRange(0, 3).Draw(t, "capture fails") == 0 {
			add(lifecycle.Event{Kind: lifecycle.CaptureFailed, ID: id + ".failed", CaptureID: id, Amount: a, Currency: cur})
		}
	}
	switch rapid.IntRange(0, 4).Draw(t, "void") {
	case 0:
		add(lifecycle.Event{Kind: lifecycle.Canceled, ID: "void", Amount: amount.Draw(t, "void amount"), Currency: currency("void currency")})
	case 1:
		add(lifecycle.Event{Kind: lifecycle.CancelOrRefund, ID: "cor", Amount: amount.Draw(t, "cor amount"), Currency: currency("cor currency")})
	}
	statuses := []lifecycle.Kind{lifecycle.RefundPending, lifecycle.Refund, lifecycle.RefundFailed}
	for i := range rapid.IntRange(0, 3).Draw(t, "refunds") {
		id := fmt.Sprint("re", i)
		a := amount.Draw(t, "refund amount")
		cur := currency("refund currency")
		for j, k := range statuses {
			if rapid.Bool().Draw(t, "reported") {
				add(lifecycle.Event{Kind: k, ID: fmt.Sprint(id, ".", j), RefundID: id, Amount: a, Currency: cur})
			}
		}
	}
	if rapid.IntRange(0, 3).Draw(t, "cumulative") == 0 {
		add(lifecycle.Event{Kind: lifecycle.Refund, ID: "charge.refunded", Amount: amount.Draw(t, "cumulative amount"),
			Currency: currency("cumulative currency"), Cumulative: true})
	}
	for i := range rapid.IntRange(0, 3).Draw(t, "dispute events") {
		k := rapid.SampledFrom([]lifecycle.Kind{lifecycle.DisputeOpened, lifecycle.DisputeWon, lifecycle.DisputeLost}).Draw(t, "dispute kind")
		add(lifecycle.Event{Kind: k, ID: fmt.Sprint("dp", i), Stage: rapid.IntRange(0, 4).Draw(t, "stage"),
			At: day.Add(timeHours(rapid.IntRange(0, 3).Draw(t, "hour")))})
	}
	return evs
}

// TestPropertyEveryOrderTheSameMoney: random multisets of a payment's
// events, each delivered one to three times in a random order, always end
// in the same state, whose sums keep their bounds, to which no event of
// another currency contributed, and which the newest forwarded message
// carries.
func TestPropertyEveryOrderTheSameMoney(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		evs := genLifecycle(t)
		want := lifecycle.Fold(evs)
		for range 3 {
			order := rapid.Permutation(evs).Draw(t, "order")
			var seq []lifecycle.Event
			for _, e := range order {
				for range rapid.IntRange(1, 3).Draw(t, "copies") {
					seq = append(seq, e)
				}
			}
			seq = rapid.Permutation(seq).Draw(t, "deliveries")
			l := &ledger{seen: map[string]bool{}}
			for _, e := range seq {
				l.record(e)
			}
			if l.state != want {
				t.Fatalf("delivered as %v: state %+v, want %+v", ids(seq), l.state, want)
			}
			for i, m := range l.messages {
				if m.version != i+1 {
					t.Fatalf("message %d (%s) has version %d", i, m.typ, m.version)
				}
			}
			if n := len(l.messages); n > 0 && l.messages[n-1].state.Money() != want.Money() {
				t.Fatalf("the newest message carries %+v, want %+v", l.messages[n-1].state, want)
			}
		}
		if want.AmountCaptured > want.AmountAuthorized || want.AmountRefunded > want.AmountCaptured || want.AmountRefunded < 0 {
			t.Fatalf("bounds broken: %+v", want)
		}
		var same []lifecycle.Event
		foreign := false
		for _, e := range evs {
			if e.Currency == "USD" {
				foreign = foreign || e.Kind != lifecycle.Failed
				continue
			}
			same = append(same, e)
		}
		if got := lifecycle.Fold(same); got.Money() != want.Money() {
			t.Fatalf("events in another currency changed the state: %+v, without them %+v", want, got)
		}
		if foreign != (want.Review&lifecycle.ReviewCurrency != 0) {
			t.Fatalf("events in another currency: %v, review %v", foreign, want.Review.Names())
		}
	})
}

// FuzzFold: any events fold without panicking into a state whose sums
// keep their bounds, the same whatever their order.
func FuzzFold(f *testing.F) {
	f.Add([]byte{0, 10, 1, 3, 20, 2, 9, 5, 1})
	f.Add([]byte{1, 200, 0, 4, 100, 1, 4, 150, 2, 8, 90, 0, 10, 255, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		var evs []lifecycle.Event
		for i := 0; i+2 < len(data) && len(evs) < 24; i += 3 {
			k := lifecycle.Kinds[int(data[i])%len(lifecycle.Kinds)]
			cur := "EUR"
			if data[i+2]&1 == 1 {
				cur = "USD"
			}
			amount := int64(data[i+1]) * int64(data[i+1]) * int64(1+data[i+2]>>4)
			if data[i+2]&0x0e == 0x0e {
				amount = lifecycle.MaxAmount + amount // beyond every bound
			}
			evs = append(evs, lifecycle.Event{Kind: k, ID: fmt.Sprint("e", i), Amount: amount, Currency: cur,
				RefundID: fmt.Sprint("r", data[i+2]>>5), CaptureID: fmt.Sprint("c", data[i+2]>>6),
				Cumulative: data[i+2]&0x10 != 0, Stage: int(data[i+2] >> 5), At: day.Add(timeHours(int(data[i+1] % 4)))})
		}
		s := lifecycle.Fold(evs)
		if s.AmountCaptured > s.AmountAuthorized || s.AmountRefunded > s.AmountCaptured || s.AmountRefunded < 0 ||
			s.AmountAuthorized > lifecycle.MaxAmount {
			t.Fatalf("bounds broken: %+v", s)
		}
		rev := make([]lifecycle.Event, len(evs))
		for i, e := range evs {
			rev[len(evs)-1-i] = e
		}
		if r := lifecycle.Fold(rev); r != s {
			t.Fatalf("reversed: %+v, want %+v", r, s)
		}
	})
}
