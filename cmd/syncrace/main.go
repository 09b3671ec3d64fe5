// Command syncrace races a checkout backend's sync against the provider's
// webhook, for chaos scenario 13 (scripts/chaos.sh): for each of --orders
// Stripe PaymentIntents, each naming its own order, it calls
//
//	POST <admin>/admin/api/v1/payments/<source>/<pi>/sync
//
// on one replica and delivers the PaymentIntent's signed
// payment_intent.succeeded webhook to another at the same instant, each
// retried on the next replica until it is answered 2xx, as a checkout
// backend and a PSP retry. It serves the fake Stripe API the replicas' sync
// reads (internal/fakestripe, on --stripe-addr) and registers each order
// first (POST <admin>/admin/api/v1/orders).
//
// Then it waits for the receiver (cmd/fakereceiver --other-events, the
// replicas' PAYLOCK_FORWARD_URL) to hold a payment.recorded message of
// every PaymentIntent and an order.paid message of every order, and checks,
// from the receiver and the admin API, that each was said exactly once:
//
//   - every sync and every webhook was acknowledged (2xx), none refused;
//   - every PaymentIntent is recorded (GET .../payments/<source>/<pi>), its
//     order "paid" with that one payment (GET .../orders/<order_id>);
//   - the receiver got exactly one payment.recorded webhook-id per
//     PaymentIntent and one order.paid webhook-id per order, and no other
//     message of the run's orders (order.double_paid, order.overpaid...).
//
// With --json it prints the result in pspsim's shape (deliveries, retries,
// rows, duplicates, lost, verdict, answers, ack_latency_ms), which
// scripts/chaos.sh reads; it exits 1 when the verdict fails.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
