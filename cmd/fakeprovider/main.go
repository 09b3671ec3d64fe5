// Command fakeprovider runs an in-memory payout provider for tests, demos
// and load runs: the API paylock's payout worker calls, with idempotency
// keys, injectable faults and status webhooks. See package
// internal/fakeprovider for the API and docs/disbursements.md for a demo.
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
	"strings"
	"syscall"
	"time"

	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/signature"
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
	fs := flag.NewFlagSet("fakeprovider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	callback := fs.String("callback", "", "URL that receives status webhooks (e.g. http://127.0.0.1:8080/webhooks/payouts); empty: none")
	secret := fs.String("secret", "", "whsec_… secret to sign webhooks with (Standard Webhooks); empty: unsigned")
	retention := fs.Duration("key-retention", 24*time.Hour, "how long an idempotency key's answer is replayed (0: forever)")
	dropRate := fs.Float64("drop-rate", 0, "fraction of creating POSTs whose answer is dropped after the payout is created")
	failRate := fs.Float64("fail-rate", 0, "fraction of POSTs answered 503 without doing anything")
	delay := fs.Duration("delay", 0, "wait after creating a payout before answering")
	settle := fs.String("settle", "", "comma-separated statuses every new payout goes through (e.g. paid, or paid,failed); empty: stay pending")
	settleAfter := fs.Duration("settle-after", time.Second, "when to settle a new payout")
	duplicates := fs.Int("duplicates", 0, "send every webhook this many extra times")
	reorder := fs.Bool("reorder", false, "deliver the webhooks of one settlement in reverse order")
	logFormat := fs.String("log-format", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	if *logFormat == "json" {
		logger = slog.New(slog.NewJSONHandler(stderr, nil))
	}
	cfg := fakeprovider.Config{
		KeyRetention: *retention,
		DropRate:     *dropRate,
		FailRate:     *failRate,
		Delay:        *delay,
		CallbackURL:  *callback,
		SettleAfter:  *settleAfter,
		Duplicates:   *duplicates,
		Reorder:      *reorder,
		Logger:       logger,
	}
	for _, s := range strings.Split(*settle, ",") {
		switch s = strings.TrimSpace(s); s {
		case "":
		case "paid", "failed":
			cfg.SettleStatuses = append(cfg.SettleStatuses, s)
		default:
			fmt.Fprintf(stderr, "fakeprovider: invalid --settle status %q (want paid or failed)\n", s)
			return 2
		}
	}
	if *secret != "" {
		secrets, err := signature.ParseSecrets(signature.SchemeStandard, *secret)
		if err != nil {
			fmt.Fprintf(stderr, "fakeprovider: invalid --secret: %v\n", err)
			return 2
		}
		cfg.Secret = &secrets[0]
	}

	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", *addr); err != nil {
			fmt.Fprintf(stderr, "fakeprovider: %v\n", err)
			return 1
		}
	}
	p := fakeprovider.New(cfg)
	defer p.Close()
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stdout, "fakeprovider listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "fakeprovider: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return 0
}
