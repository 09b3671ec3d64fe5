package checkout

import (
	"errors"
	"slices"
	"testing"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

func newAdapter(t testing.TB) provider.Adapter {
	t.Helper()
	a, err := Provider{}.New(provider.Config{Rules: payload.NewRules("", nil)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestNewRefusesEverySetting(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"events", "authorization", "basic_auth_env"} {
		_, err := Provider{}.New(provider.Config{Rules: payload.NewRules("", nil), Settings: provider.Settings{key: []byte(`"x"`)}})
		var se *provider.SettingError
		if !errors.As(err, &se) || se.Key != key {
			t.Errorf("New with %s = %v, want a *provider.SettingError naming it", key, err)
		}
	}
}

// TestEveryRecordedTypeIsTypedAndNoneLeftOut: the source records every
// lifecycle type it understands, so the loader has nothing to warn about.
func TestEveryRecordedTypeIsTypedAndNoneLeftOut(t *testing.T) {
	t.Parallel()
	typed, ok := newAdapter(t).(provider.Typed)
	if !ok {
		t.Fatal("the adapter is not provider.Typed")
	}
	if left := provider.LeftOut(typed); len(left) != 0 {
		t.Errorf("LeftOut = %q, want none", left)
	}
	for _, e := range typed.Types() {
		if !e.Kind.Valid() || !e.Recorded {
			t.Errorf("type %s: kind %q recorded %v", e.Name, e.Kind, e.Recorded)
		}
	}
}

// fold is the state of the payment the sample bodies' events make.
func fold(t *testing.T, a provider.Adapter, names []string) lifecycle.State {
	t.Helper()
	var evs []lifecycle.Event
	for _, n := range names {
		got, err := a.Adapt(sample(n), "")
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		providertest.CheckAdapted(t, got, err)
		for _, e := range got {
			evs = append(evs, lifecycle.Event{Kind: e.Kind, ID: e.EventID, Amount: e.Amount, Currency: e.Currency,
				RefundID: e.RefundID, CaptureID: e.CaptureID, Cumulative: e.Cumulative, Stage: e.Stage, At: e.At})
		}
	}
	return lifecycle.Fold(evs)
}

// TestCheckoutEventsFoldToTheSameStateInAnyOrder: Checkout.com delivers
// out of order (a capture before its approval, a refund before the
// capture); the payment's state is the same whatever the order.
func TestCheckoutEventsFoldToTheSameStateInAnyOrder(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	names := []string{"payment_approved.json", "payment_capture_declined.json", "payment_captured.json", "payment_refunded.json"}
	want := fold(t, a, names)
	if want.Status != lifecycle.PartiallyRefunded || want.AmountAuthorized != 6540 || want.AmountCaptured != 6540 ||
		want.AmountRefunded != 2000 || want.Currency != "USD" {
		t.Fatalf("in order: %+v, want 6540 USD authorised and captured, 2000 refunded", want)
	}
	for _, order := range [][]string{
		{"payment_captured.json", "payment_approved.json", "payment_refunded.json", "payment_capture_declined.json"},
		{"payment_refunded.json", "payment_captured.json", "payment_capture_declined.json", "payment_approved.json"},
		{"payment_capture_declined.json", "payment_refunded.json", "payment_approved.json", "payment_captured.json", "payment_captured.json"},
	} {
		if got := fold(t, a, order); !statesEqual(got, want) {
			t.Errorf("order %q: %+v, want %+v", order, got, want)
		}
	}
	disputed := fold(t, a, append(slices.Clone(names), "dispute_lost.json", "dispute_received.json"))
	if disputed.Dispute != lifecycle.Lost {
		t.Errorf("a lost dispute received late: %+v", disputed)
	}
}

// TestAVoidCancelsAndADeclineFails: a voided authorisation is canceled, a
// declined payment failed.
func TestAVoidCancelsAndADeclineFails(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	if got := fold(t, a, []string{"payment_voided.json"}); got.Status != lifecycle.StatusCanceled {
		t.Errorf("voided: %+v", got)
	}
	if got := fold(t, a, []string{"payment_declined.json"}); got.Status != lifecycle.StatusFailed {
		t.Errorf("declined: %+v", got)
	}
}

func statesEqual(a, b lifecycle.State) bool {
	return a.Status == b.Status && a.Amount == b.Amount && a.Currency == b.Currency && a.AmountAuthorized == b.AmountAuthorized &&
		a.AmountCaptured == b.AmountCaptured && a.AmountRefunded == b.AmountRefunded && a.Dispute == b.Dispute && a.Review == b.Review
}
