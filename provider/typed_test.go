package provider_test

import (
	"slices"
	"testing"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
)

type typed []provider.EventType

func (t typed) Types() []provider.EventType { return t }

func TestLeftOutNamesTheLifecycleTypesASourceDoesNotRecord(t *testing.T) {
	t.Parallel()
	types := typed{
		{Name: "payment.ok", Kind: lifecycle.Succeeded, Recorded: true},
		{Name: "charge.ok", Kind: lifecycle.Succeeded}, // a payment type left out: not a lifecycle type
		{Name: "refund", Kind: lifecycle.Refund},
		{Name: "held", Kind: lifecycle.Authorized},
		{Name: "dispute", Kind: lifecycle.DisputeOpened, Recorded: true},
		{Name: "refund", Kind: lifecycle.RefundFailed}, // one name, two kinds: named once
	}
	if got, want := provider.LeftOut(types), []string{"refund", "held"}; !slices.Equal(got, want) {
		t.Errorf("LeftOut = %q, want %q", got, want)
	}
	if got := provider.LeftOut(typed{{Name: "refund", Kind: lifecycle.Refund, Recorded: true}}); got != nil {
		t.Errorf("LeftOut of a source recording everything = %q", got)
	}
	for _, k := range lifecycle.Kinds {
		want := k != lifecycle.Succeeded && k != lifecycle.Authorized && k != lifecycle.AuthorizationAdjusted
		if provider.MovesMoney(k) != want {
			t.Errorf("MovesMoney(%s) = %v, want %v", k, !want, want)
		}
	}
}
