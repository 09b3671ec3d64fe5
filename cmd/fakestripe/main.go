// Command fakestripe runs internal/fakestripe, a fake of Stripe's
// GET /v1/events, for demos of "paylock reconcile payments":
//
//	fakestripe -key sk_test_demo -payments pi_demo_1:2000:jpy,pi_demo_2:1500:jpy &
//	STRIPE_API_KEY=sk_test_demo PAYLOCK_STRIPE_API_URL=http://127.0.0.1:12111 \
//	  paylock reconcile payments --source stripe --since 72h
//
// Each payment is listed as a payment_intent.succeeded event created a
// minute apart, the last one a minute ago.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paylock/paylock/internal/fakestripe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

// run is main, testable: it serves until ctx is done. A nil ln listens on
// the --addr flag.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ln net.Listener) int {
	fs := flag.NewFlagSet("fakestripe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:12111", "listen address")
	key := fs.String("key", "sk_test_fakestripe", "the secret key requests must carry (Authorization: Bearer)")
	list := fs.String("payments", "", "comma-separated id:amount:currency payments to list (e.g. pi_1:2000:jpy)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	payments, err := parsePayments(*list, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "fakestripe: --payments: %v\n", err)
		return 2
	}
	api := fakestripe.New(*key)
	for _, p := range payments {
		api.Add(fakestripe.PaymentIntentSucceeded(p))
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", *addr); err != nil {
			fmt.Fprintf(stderr, "fakestripe: %v\n", err)
			return 1
		}
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Fprintf(stdout, "fakestripe listening on http://%s (%d events)\n", ln.Addr(), len(payments))
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "fakestripe: %v\n", err)
		return 1
	}
	return 0
}

// parsePayments reads id:amount:currency items, created a minute apart up
// to a minute before now.
func parsePayments(v string, now time.Time) ([]fakestripe.Payment, error) {
	if v == "" {
		return nil, nil
	}
	items := strings.Split(v, ",")
	out := make([]fakestripe.Payment, 0, len(items))
	for i, item := range items {
		parts := strings.Split(item, ":")
		if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
			return nil, fmt.Errorf("%q is not id:amount:currency", item)
		}
		amount, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil || amount <= 0 {
			return nil, fmt.Errorf("%q: the amount must be a positive integer (minor units)", item)
		}
		out = append(out, fakestripe.Payment{ID: parts[0], Amount: amount, Currency: strings.ToLower(parts[2]),
			Created: now.Add(-time.Duration(len(items)-i) * time.Minute)})
	}
	return out, nil
}
