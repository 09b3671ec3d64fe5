package lifecycle_test

import (
	"math"
	"testing"
	"time"

	"github.com/paylock/paylock/lifecycle"
)

// ev builds an event of the EUR payment the cases below share.
func ev(k lifecycle.Kind, id string, amount int64) lifecycle.Event {
	return lifecycle.Event{Kind: k, ID: id, Amount: amount, Currency: "EUR"}
}

func withRefund(e lifecycle.Event, id string) lifecycle.Event  { e.RefundID = id; return e }
func withCapture(e lifecycle.Event, id string) lifecycle.Event { e.CaptureID = id; return e }
func inCurrency(e lifecycle.Event, c string) lifecycle.Event   { e.Currency = c; return e }
func ofAccount(e lifecycle.Event, a string) lifecycle.Event    { e.Account = a; return e }
func atStage(e lifecycle.Event, stage, hour int) lifecycle.Event {
	e.Stage, e.At = stage, day.Add(timeHours(hour))
	return e
}

// TestTheStateIsTheMoneyThatMoved covers each way the recorded state used
// to differ from the money that moved (issue "Right once").
func TestTheStateIsTheMoneyThatMoved(t *testing.T) {
	auth := ev(lifecycle.Authorized, "auth", 1000)
	taken := ev(lifecycle.Succeeded, "ok", 1000)
	for _, tc := range []struct {
		name   string
		events []lifecycle.Event
		want   lifecycle.State
	}{
		{"authorised, held, not taken", []lifecycle.Event{auth},
			lifecycle.State{Status: lifecycle.StatusAuthorized, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000}},
		{"authorised then voided is canceled", []lifecycle.Event{auth, ev(lifecycle.Canceled, "void", 1000)},
			lifecycle.State{Status: lifecycle.StatusCanceled, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000}},
		{"taken at once then voided (auto capture) is canceled", []lifecycle.Event{taken, ev(lifecycle.Canceled, "void", 1000)},
			lifecycle.State{Status: lifecycle.StatusCanceled, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000}},
		{"cancel-or-refund before capture is a void", []lifecycle.Event{auth, ev(lifecycle.CancelOrRefund, "cor", 1000)},
			lifecycle.State{Status: lifecycle.StatusCanceled, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000}},
		{"cancel-or-refund after a capture is a refund", []lifecycle.Event{auth, ev(lifecycle.Captured, "cap", 1000), ev(lifecycle.CancelOrRefund, "cor", 1000)},
			lifecycle.State{Status: lifecycle.Refunded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, AmountRefunded: 1000}},
		{"a void after a capture changes nothing, flagged", []lifecycle.Event{auth, ev(lifecycle.Captured, "cap", 400), ev(lifecycle.Canceled, "void", 1000)},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 400,
				Review: lifecycle.ReviewVoidAfterCapture}},
		{"partial captures add up", []lifecycle.Event{auth, ev(lifecycle.Captured, "c1", 300), ev(lifecycle.Captured, "c2", 200)},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 500}},
		{"the same capture twice counts once", []lifecycle.Event{auth, ev(lifecycle.Captured, "c1", 300), withCapture(ev(lifecycle.Captured, "c1-again", 300), "c1")},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 300}},
		{"a failed capture undoes its capture only", []lifecycle.Event{auth, ev(lifecycle.Captured, "c1", 300), ev(lifecycle.Captured, "c2", 200),
			withCapture(ev(lifecycle.CaptureFailed, "c1-failed", 300), "c1"), withCapture(ev(lifecycle.CaptureFailed, "c9-failed", 999), "c9")},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 200}},
		{"every capture failed: authorised again", []lifecycle.Event{auth, ev(lifecycle.Captured, "c1", 300), withCapture(ev(lifecycle.CaptureFailed, "f", 300), "c1")},
			lifecycle.State{Status: lifecycle.StatusAuthorized, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000}},
		{"captures beyond the authorisation are capped, flagged", []lifecycle.Event{auth, ev(lifecycle.Captured, "c1", 800), ev(lifecycle.Captured, "c2", 800)},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000,
				Review: lifecycle.ReviewOverCaptured}},
		{"an adjustment raises the authorisation", []lifecycle.Event{auth, ev(lifecycle.AuthorizationAdjusted, "adj", 1500), ev(lifecycle.Captured, "c1", 1200)},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1500, AmountCaptured: 1200}},
		{"Stripe manual capture: authorised, then a partial amount_received", []lifecycle.Event{auth, ev(lifecycle.Succeeded, "pi.succeeded", 600)},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 600, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 600}},
		{"captures without their authorisation wait", []lifecycle.Event{ev(lifecycle.Captured, "c1", 300)},
			lifecycle.State{Status: lifecycle.Pending}},
		{"a refund that failed after it was reported lowers the refunded amount", []lifecycle.Event{taken,
			withRefund(ev(lifecycle.Refund, "re.ok", 400), "re_1"), withRefund(ev(lifecycle.RefundFailed, "re.failed", 400), "re_1")},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000}},
		{"a pending refund refunds nothing yet", []lifecycle.Event{taken, withRefund(ev(lifecycle.RefundPending, "re.created", 400), "re_1")},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000}},
		{"a refund's furthest status decides, whatever the order", []lifecycle.Event{taken,
			withRefund(ev(lifecycle.Refund, "re.ok", 400), "re_1"), withRefund(ev(lifecycle.RefundPending, "re.created", 400), "re_1")},
			lifecycle.State{Status: lifecycle.PartiallyRefunded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, AmountRefunded: 400}},
		{"a cumulative figure less the refunds that failed", []lifecycle.Event{taken,
			{Kind: lifecycle.Refund, ID: "charge.refunded", Amount: 700, Currency: "EUR", Cumulative: true},
			withRefund(ev(lifecycle.Refund, "re_a.ok", 300), "re_a"), withRefund(ev(lifecycle.RefundFailed, "re_a.failed", 300), "re_a")},
			lifecycle.State{Status: lifecycle.PartiallyRefunded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, AmountRefunded: 400}},
		{"a refund in another currency is not applied, flagged", []lifecycle.Event{inCurrency(ev(lifecycle.Succeeded, "ok", 1000), "JPY"),
			withRefund(inCurrency(ev(lifecycle.Refund, "re.usd", 1000), "USD"), "re_1")},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "JPY", AmountAuthorized: 1000, AmountCaptured: 1000,
				Review: lifecycle.ReviewCurrency}},
		{"a capture in another currency is not applied, flagged", []lifecycle.Event{auth, inCurrency(ev(lifecycle.Captured, "c.usd", 500), "USD")},
			lifecycle.State{Status: lifecycle.StatusAuthorized, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, Review: lifecycle.ReviewCurrency}},
		{"a modification of another merchant account is not applied, flagged", []lifecycle.Event{ofAccount(taken, "ShopA"),
			ofAccount(withRefund(ev(lifecycle.Refund, "re.b", 1000), "re_b"), "ShopB")},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000,
				Review: lifecycle.ReviewAccount}},
		{"refunds cannot overflow", []lifecycle.Event{taken, withRefund(ev(lifecycle.Refund, "r.max", math.MaxInt64), "r_max"), withRefund(ev(lifecycle.Refund, "r.one", 1), "r_one")},
			lifecycle.State{Status: lifecycle.Refunded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, AmountRefunded: 1000,
				OverRefunded: true, Review: lifecycle.ReviewOverflow}},
		{"captures cannot overflow", []lifecycle.Event{auth, ev(lifecycle.Captured, "c.max", math.MaxInt64), ev(lifecycle.Captured, "c.one", 1)},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000,
				Review: lifecycle.ReviewOverCaptured | lifecycle.ReviewOverflow}},
		{"a sum of bounded amounts saturates, flagged", []lifecycle.Event{ev(lifecycle.Succeeded, "ok", lifecycle.MaxAmount),
			withRefund(ev(lifecycle.Refund, "r1", lifecycle.MaxAmount), "r1"), withRefund(ev(lifecycle.Refund, "r2", lifecycle.MaxAmount), "r2")},
			lifecycle.State{Status: lifecycle.Refunded, Amount: lifecycle.MaxAmount, Currency: "EUR", AmountAuthorized: lifecycle.MaxAmount,
				AmountCaptured: lifecycle.MaxAmount, AmountRefunded: lifecycle.MaxAmount, Review: lifecycle.ReviewOverflow}},
		{"a later dispute stage decides, whatever the dates", []lifecycle.Event{taken,
			atStage(ev(lifecycle.DisputeLost, "CHARGEBACK", 0), 1, 5),
			atStage(ev(lifecycle.DisputeWon, "CHARGEBACK_REVERSED", 0), 2, 1)},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, Dispute: lifecycle.Won}},
		{"two outcomes of one stage and date: won", []lifecycle.Event{taken,
			atStage(ev(lifecycle.DisputeLost, "z-lost", 0), 1, 3),
			atStage(ev(lifecycle.DisputeWon, "a-won", 0), 1, 3)},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, Dispute: lifecycle.Won}},
		{"the date orders outcomes of one stage", []lifecycle.Event{taken,
			atStage(ev(lifecycle.DisputeWon, "won", 0), 1, 1),
			atStage(ev(lifecycle.DisputeLost, "lost", 0), 1, 3)},
			lifecycle.State{Status: lifecycle.StatusSucceeded, Amount: 1000, Currency: "EUR", AmountAuthorized: 1000, AmountCaptured: 1000, Dispute: lifecycle.Lost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lifecycle.Fold(tc.events); got != tc.want {
				t.Errorf("Fold =\n %+v, want\n %+v", got, tc.want)
			}
		})
	}
}

func TestAReviewReasonAloneForwardsNothing(t *testing.T) {
	ok := ev(lifecycle.Succeeded, "ok", 1000)
	prev := lifecycle.Fold([]lifecycle.Event{ok})
	usd := withRefund(inCurrency(ev(lifecycle.Refund, "re.usd", 100), "USD"), "re_usd")
	st := lifecycle.Apply(prev, 1, []lifecycle.Event{ok, usd}, usd)
	if !st.Changed || st.Message != "" || st.Version != 1 || st.NewReview != lifecycle.ReviewCurrency {
		t.Fatalf("a refund in another currency: %+v, want a stored review reason, no message, version 1", st)
	}
	if got := st.NewReview.Names(); len(got) != 1 || got[0] != "currency_mismatch" {
		t.Fatalf("names %v", got)
	}
}

func TestMessagesOfCaptureAndVoid(t *testing.T) {
	auth := ev(lifecycle.Authorized, "auth", 1000)
	s1 := lifecycle.Apply(lifecycle.Fold(nil), 0, []lifecycle.Event{auth}, auth)
	if s1.Message != lifecycle.MessageAuthorized || s1.Version != 1 {
		t.Fatalf("authorisation: %+v", s1)
	}
	capture := ev(lifecycle.Captured, "c1", 1000)
	s2 := lifecycle.Apply(s1.State, 1, []lifecycle.Event{auth, capture}, capture)
	if s2.Message != lifecycle.MessageCaptured || s2.Version != 2 || s2.State.AmountCaptured != 1000 {
		t.Fatalf("capture: %+v", s2)
	}
	failed := withCapture(ev(lifecycle.CaptureFailed, "cf", 1000), "c1")
	s3 := lifecycle.Apply(s2.State, 2, []lifecycle.Event{auth, capture, failed}, failed)
	if s3.Message != lifecycle.MessageCaptured || s3.Version != 3 || s3.State.AmountCaptured != 0 || s3.State.Status != lifecycle.StatusAuthorized {
		t.Fatalf("capture failed: %+v", s3)
	}
	cor := ev(lifecycle.CancelOrRefund, "cor", 1000)
	s4 := lifecycle.Apply(s3.State, 3, []lifecycle.Event{auth, capture, failed, cor}, cor)
	if s4.Message != lifecycle.MessageCanceled || s4.State.Status != lifecycle.StatusCanceled {
		t.Fatalf("cancel-or-refund before any capture: %+v", s4)
	}
}

func timeHours(h int) time.Duration { return time.Duration(h) * time.Hour }
