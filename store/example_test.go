package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/paylock/paylock/store"
)

// The outcomes of RecordPayment and the answers they deserve.
func ExamplePayments_RecordPayment() {
	ctx := context.Background()
	s, err := store.Open(ctx, store.Config{URL: os.Getenv("DATABASE_URL")})
	if err != nil {
		fmt.Println("503:", err) // errors.Is(err, store.ErrUnavailable) when the server is down
		return
	}
	defer s.Close()

	_, err = s.Payments().RecordPayment(ctx, store.Payment{
		TransactionID: "tx_123",
		Amount:        1999,
		Currency:      "EUR",
		Payload:       []byte(`{"transaction_id":"tx_123","amount":1999,"currency":"EUR"}`),
		EventID:       "evt_456",
	})
	switch {
	case err == nil:
		fmt.Println("200 processed")
	case errors.Is(err, store.ErrDuplicate):
		fmt.Println("200 duplicate")
	case errors.Is(err, store.ErrMismatch):
		fmt.Println("422 mismatch")
	case errors.Is(err, store.ErrUnavailable): // includes store.ErrCommitUnknown
		fmt.Println("503 retry later")
	default:
		fmt.Println("500")
	}
}

// A forward's webhook-id is a function of the event alone: a receiver can
// compute it, and every attempt carries the same one.
func ExamplePaymentForwardID() {
	fmt.Println(store.PaymentForwardID("stripe", "pi_3Nx"))
	fmt.Println(store.DisbursementForwardID("L-1", 1, store.StatusPaid))
	// Output:
	// pay_fb8154693e88d279672b400dbf11569c
	// dsb_1cd7b9221de8cc75e87ad527e9ae3738
}
