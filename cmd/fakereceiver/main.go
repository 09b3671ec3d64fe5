// Command fakereceiver is a downstream service for paylock's forwarded
// events (PAYLOCK_FORWARD_URL), with faults, for tests, demos and chaos runs:
// it verifies every delivery's Standard Webhooks signature, fails the first
// attempts of each webhook-id with 500, drops a fraction of its answers after
// processing the event, and reports what it received on GET /debug/stats
// (JSON) and GET /debug/deliveries (one line per webhook-id). See package
// internal/fakereceiver.
//
// Its secrets (whsec_…, comma-separated, any of them verifies) come from
// --secrets or, kept off the command line, from PAYLOCK_FORWARD_SECRETS, the
// variable paylock signs with.
//
//	fakereceiver --addr 127.0.0.1:8091 --fail-first 2 --drop-rate 0.1
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/paylock/paylock/internal/fakereceiver"
	"github.com/paylock/paylock/signature"
)

// secretsEnv is read when --secrets is not given.
const secretsEnv = "PAYLOCK_FORWARD_SECRETS"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

// run is main, testable: it serves until ctx is done. A nil ln listens on
// the --addr flag.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, ln net.Listener) int {
	fs := flag.NewFlagSet("fakereceiver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8091", "listen address")
	secrets := fs.String("secrets", "", "comma-separated whsec_… secrets that verify deliveries (default: $"+secretsEnv+")")
	tolerance := fs.Duration("tolerance", signature.DefaultTolerance, "how far a delivery's webhook-timestamp may be from the clock")
	failFirst := fs.Int("fail-first", 0, "verified attempts of each webhook-id answered 500 before one is processed")
	dropRate := fs.Float64("drop-rate", 0, "fraction of processed deliveries whose answer is dropped (connection closed)")
	otherEvents := fs.Bool("other-events", false, "process verified events of every type (order.paid, payment.refunded...) instead of answering 400 to all but payment.recorded; /debug/deliveries then says each webhook-id's type and order_id")
	logFormat := fs.String("log-format", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *secrets == "" {
		*secrets = getenv(secretsEnv)
	}
	parsed, err := signature.ParseSecrets(signature.SchemeStandard, *secrets)
	if err != nil {
		fmt.Fprintf(stderr, "fakereceiver: --secrets or %s: %v\n", secretsEnv, err)
		return 2
	}
	v, err := signature.NewVerifier(signature.SchemeStandard, parsed, *tolerance)
	if err != nil {
		fmt.Fprintf(stderr, "fakereceiver: %v\n", err)
		return 2
	}
	var logger *slog.Logger
	switch *logFormat {
	case "text":
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	case "json":
		logger = slog.New(slog.NewJSONHandler(stderr, nil))
	default:
		fmt.Fprintf(stderr, "fakereceiver: invalid --log-format %q (want text or json)\n", *logFormat)
		return 2
	}
	rcv, err := fakereceiver.New(fakereceiver.Config{Verifier: v, FailFirst: *failFirst, DropRate: *dropRate,
		OtherEvents: *otherEvents, Logger: logger})
	if err != nil {
		fmt.Fprintf(stderr, "fakereceiver: %v\n", err)
		return 2
	}

	if ln == nil {
		if ln, err = net.Listen("tcp", *addr); err != nil {
			fmt.Fprintf(stderr, "fakereceiver: %v\n", err)
			return 1
		}
	}
	srv := &http.Server{Handler: rcv, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second}
	fmt.Fprintf(stdout, "fakereceiver listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "fakereceiver: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return 0
}
