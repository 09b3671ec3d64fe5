package payout_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/payout"
)

// A payout call whose answer is lost is retried with the same idempotency
// key: the provider replays its first answer instead of paying twice.
func ExampleClient_Create() {
	fake := fakeprovider.New(fakeprovider.Config{})
	defer fake.Close()
	srv := httptest.NewServer(fake)
	defer srv.Close()
	fake.DropNext(1) // the provider creates the payout, then the answer is lost

	c := payout.NewClient(srv.URL, nil)
	req := payout.Request{Amount: 500000, Currency: "JPY", Reference: "L-1-1"}
	const key = "disburse-L-1-1"
	var p payout.Payout
	for attempt := 1; ; attempt++ {
		var err error
		p, err = c.Create(context.Background(), key, req)
		if err == nil {
			break
		}
		fmt.Println("attempt", attempt, "temporary:", errors.Is(err, payout.ErrTemporary))
	}
	fmt.Println(p.ID, p.Status)
	fmt.Println("payouts created for L-1-1:", fake.Created("L-1-1"))
	// Output:
	// attempt 1 temporary: true
	// po_000001 pending
	// payouts created for L-1-1: 1
}
