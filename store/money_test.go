package store

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lifecycle"
)

// moneyEvent is a lifecycle event of payment tx of source "adyen".
func moneyEvent(tx, id string, k lifecycle.Kind, amount int64, currency string) PaymentEvent {
	return PaymentEvent{Source: "adyen", TransactionID: tx, EventID: id, Kind: k, Amount: amount, Currency: currency,
		Payload: []byte(`{"id":"` + id + `"}`)}
}

// attention are the review reasons payment tx is up for.
func attention(t *testing.T, db *pgx.Conn, tx string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT reason FROM payment_attention WHERE transaction_id = $1 ORDER BY reason`, tx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func recordAll(t *testing.T, p *Payments, evs ...PaymentEvent) {
	t.Helper()
	for _, e := range evs {
		if _, err := p.RecordEvent(context.Background(), e, p.outbox.ForwardChangeHook("dest")); err != nil {
			t.Fatalf("%s: %v", e.EventID, err)
		}
	}
}

func messageTypes(fs []ForwardArgs) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Type
	}
	return out
}

// TestAuthorisedThenVoidedIsCanceledThroughPostgres: Adyen's AUTHORISATION
// then CANCELLATION used to stay succeeded, forwarding nothing.
func TestAuthorisedThenVoidedIsCanceledThroughPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.store.Payments()
	for _, mode := range []string{"auto", "manual"} {
		t.Run(mode, func(t *testing.T) {
			tx := "PSP_VOID_" + mode
			if mode == "auto" {
				if _, err := p.RecordPaymentForwarded(ctx, Payment{Source: "adyen", TransactionID: tx, Amount: 1000, Currency: "EUR",
					EventID: tx + ":AUTHORISATION", Payload: []byte(`{}`)}, "dest"); err != nil {
					t.Fatal(err)
				}
			} else {
				recordAll(t, p, moneyEvent(tx, tx+":AUTHORISATION", lifecycle.Authorized, 1000, "EUR"))
			}
			recordAll(t, p, moneyEvent(tx, "MOD_"+tx+":CANCELLATION", lifecycle.Canceled, 1000, "EUR"))
			st, err := p.PaymentState(ctx, "adyen", tx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != lifecycle.StatusCanceled || st.AmountCaptured != 0 || st.AmountAuthorized != 1000 {
				t.Fatalf("state %+v, want canceled, 1000 authorised, nothing captured", st.State)
			}
			want := []string{lifecycle.MessageRecorded, lifecycle.MessageCanceled}
			if mode == "manual" {
				want[0] = lifecycle.MessageAuthorized
			}
			fs := forwardsOf(t, b.admin, tx)
			if got := messageTypes(fs); !slices.Equal(got, want) {
				t.Fatalf("forwards %v, want %v", got, want)
			}
			if last := fs[len(fs)-1].State; last == nil || last.Captured() != 0 || last.Authorized() != 1000 || last.Status != "canceled" {
				t.Fatalf("the cancellation's message carries %+v", last)
			}
		})
	}
}

// TestManualCaptureThroughPostgres: captures, partial and failed, are the
// captured amount, capped at the authorisation and flagged beyond it.
func TestManualCaptureThroughPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.store.Payments()
	tx := "PSP_MANUAL"
	capture := func(id string, k lifecycle.Kind, amount int64) PaymentEvent {
		e := moneyEvent(tx, id+":"+string(k), k, amount, "EUR")
		e.CaptureID = id
		return e
	}
	recordAll(t, p, moneyEvent(tx, tx+":AUTHORISATION", lifecycle.Authorized, 1000, "EUR"),
		capture("CAP1", lifecycle.Captured, 300), capture("CAP2", lifecycle.Captured, 500), capture("CAP1", lifecycle.CaptureFailed, 300))
	st, err := p.PaymentState(ctx, "adyen", tx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != lifecycle.StatusSucceeded || st.AmountCaptured != 500 || st.AmountAuthorized != 1000 {
		t.Fatalf("state %+v, want succeeded, 500 of 1000 captured", st.State)
	}
	if got, want := messageTypes(forwardsOf(t, b.admin, tx)), []string{"payment.authorized", "payment.captured", "payment.captured", "payment.captured"}; !slices.Equal(got, want) {
		t.Fatalf("forwards %v, want %v", got, want)
	}
	recordAll(t, p, capture("CAP3", lifecycle.Captured, 800))
	if st, _ = p.PaymentState(ctx, "adyen", tx); st.AmountCaptured != 1000 {
		t.Fatalf("captured %d beyond the authorisation, want capped at 1000", st.AmountCaptured)
	}
	if got := attention(t, b.admin, tx); !slices.Equal(got, []string{"over_captured"}) {
		t.Fatalf("review reasons %v, want over_captured", got)
	}
	recordAll(t, p, moneyEvent(tx, "VOID:CANCELLATION", lifecycle.Canceled, 1000, "EUR"))
	if st, _ = p.PaymentState(ctx, "adyen", tx); st.Status != lifecycle.StatusSucceeded || st.AmountCaptured != 1000 {
		t.Fatalf("a void after the capture changed the state: %+v", st.State)
	}
	if got := attention(t, b.admin, tx); !slices.Equal(got, []string{"over_captured", "void_after_capture"}) {
		t.Fatalf("review reasons %v, want over_captured and void_after_capture", got)
	}
}

// TestAFailedRefundLowersTheRefundedAmountThroughPostgres: a refund that
// fails after it was reported is taken back, and the lower figure
// forwarded.
func TestAFailedRefundLowersTheRefundedAmountThroughPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.store.Payments()
	tx := "pi_refund_fails"
	if _, err := p.RecordPaymentForwarded(ctx, Payment{Source: "adyen", TransactionID: tx, Amount: 1000, Currency: "EUR",
		EventID: "evt_ok", Payload: []byte(`{}`)}, "dest"); err != nil {
		t.Fatal(err)
	}
	refund := func(id string, k lifecycle.Kind) PaymentEvent {
		e := moneyEvent(tx, id, k, 400, "EUR")
		e.RefundID = "re_1"
		return e
	}
	recordAll(t, p, refund("evt_created", lifecycle.RefundPending), refund("evt_succeeded", lifecycle.Refund))
	if st, _ := p.PaymentState(ctx, "adyen", tx); st.AmountRefunded != 400 {
		t.Fatalf("refunded %d, want 400", st.AmountRefunded)
	}
	recordAll(t, p, refund("evt_failed", lifecycle.RefundFailed))
	st, err := p.PaymentState(ctx, "adyen", tx)
	if err != nil {
		t.Fatal(err)
	}
	if st.AmountRefunded != 0 || st.Status != lifecycle.StatusSucceeded {
		t.Fatalf("after the refund failed: %+v, want succeeded, nothing refunded", st.State)
	}
	fs := forwardsOf(t, b.admin, tx)
	if last := fs[len(fs)-1]; last.Type != lifecycle.MessageRefunded || last.State.AmountRefunded != 0 || last.State.Version != 3 {
		t.Fatalf("the last forward %s %+v, want payment.refunded with 0 refunded at version 3", last.Type, last.State)
	}
}

// TestMoneyThatDisagreesIsRecordedNotAppliedThroughPostgres: a refund in
// another currency, or of another merchant account, is recorded (never
// lost), changes nothing, forwards nothing and opens a review item saying
// what disagreed; sums cannot overflow.
func TestMoneyThatDisagreesIsRecordedNotAppliedThroughPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.store.Payments()
	record := func(tx, account string) {
		t.Helper()
		if _, err := p.RecordPaymentForwarded(ctx, Payment{Source: "adyen", TransactionID: tx, Amount: 1000, Currency: "JPY",
			EventID: tx + ":AUTHORISATION", Payload: []byte(`{}`), Account: account}, "dest"); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("currency", func(t *testing.T) {
		record("PSP_JPY", "ShopA")
		e := moneyEvent("PSP_JPY", "RF_USD:REFUND", lifecycle.Refund, 1000, "USD")
		recordAll(t, p, e)
		st, _ := p.PaymentState(ctx, "adyen", "PSP_JPY")
		if st.Status != lifecycle.StatusSucceeded || st.AmountRefunded != 0 || len(st.Events) != 1 {
			t.Fatalf("state %+v with %d events, want succeeded, nothing refunded, the USD refund kept", st.State, len(st.Events))
		}
		if got := attention(t, b.admin, "PSP_JPY"); !slices.Equal(got, []string{"currency_mismatch"}) {
			t.Fatalf("review reasons %v", got)
		}
		if got := messageTypes(forwardsOf(t, b.admin, "PSP_JPY")); !slices.Equal(got, []string{"payment.recorded"}) {
			t.Fatalf("forwards %v, want the payment's alone", got)
		}
		items, err := b.store.Review().ReviewItems(ctx, ReviewFilter{Kind: ReviewLifecycle})
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 1 || items[0].Details["reason"] != "currency_mismatch" || items[0].Details["detail"] == "" {
			t.Fatalf("review items %+v, want one currency_mismatch naming what disagreed", items)
		}
	})
	t.Run("merchant account", func(t *testing.T) {
		record("PSP_SHOP_A", "ShopA")
		e := moneyEvent("PSP_SHOP_A", "RF_B:REFUND", lifecycle.Refund, 1000, "JPY")
		e.Account = "ShopB"
		recordAll(t, p, e)
		if st, _ := p.PaymentState(ctx, "adyen", "PSP_SHOP_A"); st.AmountRefunded != 0 {
			t.Fatalf("a refund of ShopB refunded ShopA's payment: %+v", st.State)
		}
		if got := attention(t, b.admin, "PSP_SHOP_A"); !slices.Equal(got, []string{"account_mismatch"}) {
			t.Fatalf("review reasons %v", got)
		}
		same := moneyEvent("PSP_SHOP_A", "RF_A:REFUND", lifecycle.Refund, 300, "JPY")
		same.Account = "ShopA"
		recordAll(t, p, same)
		if st, _ := p.PaymentState(ctx, "adyen", "PSP_SHOP_A"); st.AmountRefunded != 300 {
			t.Fatalf("a refund of its own account: refunded %d, want 300", st.AmountRefunded)
		}
	})
	t.Run("overflow", func(t *testing.T) {
		record("PSP_MAX", "")
		big := moneyEvent("PSP_MAX", "RF_MAX:REFUND", lifecycle.Refund, math.MaxInt64, "JPY")
		one := moneyEvent("PSP_MAX", "RF_ONE:REFUND", lifecycle.Refund, 1, "JPY")
		recordAll(t, p, big, one)
		st, _ := p.PaymentState(ctx, "adyen", "PSP_MAX")
		if st.Status != lifecycle.Refunded || st.AmountRefunded != 1000 || !st.OverRefunded {
			t.Fatalf("state %+v, want refunded in full, capped, flagged", st.State)
		}
		if got := attention(t, b.admin, "PSP_MAX"); !slices.Equal(got, []string{"amount_overflow", "over_refunded"}) {
			t.Fatalf("review reasons %v", got)
		}
	})
}

// TestARedeliveredEventIDIsComparedWhole: an event id recorded once and
// delivered again with another amount, currency, type or refund is a
// mismatch naming what disagreed, never a duplicate.
func TestARedeliveredEventIDIsComparedWhole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.store.Payments()
	stored := moneyEvent("PSP_CMP", "RF1:REFUND", lifecycle.Refund, 300, "EUR")
	stored.RefundID = "RF1"
	recordAll(t, p, stored)
	for _, tc := range []struct {
		name, want string
		change     func(*PaymentEvent)
	}{
		{"amount", `amount recorded "300", delivered "301"`, func(e *PaymentEvent) { e.Amount++ }},
		{"currency", `currency recorded "EUR", delivered "USD"`, func(e *PaymentEvent) { e.Currency = "USD" }},
		{"type", `type recorded "refund", delivered "refund_failed"`, func(e *PaymentEvent) { e.Kind = lifecycle.RefundFailed }},
		{"refund", `refund recorded "RF1", delivered "RF2"`, func(e *PaymentEvent) { e.RefundID = "RF2" }},
		{"payment", `payment recorded "PSP_CMP", delivered "PSP_OTHER"`, func(e *PaymentEvent) { e.TransactionID = "PSP_OTHER" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := stored
			tc.change(&e)
			_, err := p.RecordEvent(ctx, e, nil)
			if !errors.Is(err, ErrMismatch) || MismatchDetail(err) != tc.want {
				t.Fatalf("RecordEvent = %v (detail %q), want ErrMismatch saying %q", err, MismatchDetail(err), tc.want)
			}
			if err := p.EventRecorded(ctx, e); !errors.Is(err, ErrMismatch) {
				t.Fatalf("EventRecorded = %v, want ErrMismatch", err)
			}
		})
	}
	if _, err := p.RecordEvent(ctx, stored, nil); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the same event again: %v, want ErrDuplicate", err)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM payment_events`); n != 1 {
		t.Fatalf("%d events stored, want 1", n)
	}
}
