// Command paybench measures paylock against its floors and writes
// BENCHMARKS.md. scripts/bench.sh (make bench) builds it and runs it with
// the servers it found or started; run it by hand only for a single load
// run against a replica you started (paybench load -h).
//
// A full run (paybench run) does, each step beside its floor, interleaved so
// that drifting noise on a shared machine hits a figure and its floor alike:
//
//  1. lock cycles: rounds of lock's own benchmarks (BenchmarkObtainRelease
//     against BenchmarkRawSetNXDel) and of bench/locks (paylock's lock,
//     bsm/redislock and go-redsync against raw SET NX PX + DEL);
//  2. repetitions of: pgbench running the store's INSERT at the senders'
//     concurrency, then one `paylock serve` replica per scenario (lock on or
//     off; 0 %, 50 % or 95 % duplicate deliveries) under the load generator.
//  3. repetitions of the forward worker draining a backlog into each sink
//     (http, nats, kafka) and then keeping up with a steady rate (sinks.go).
//
// Figures are medians over rounds or repetitions; ratios are medians of the
// per-round (per-repetition) ratios.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/paylock/paylock/signature"
)

const usage = `Usage:
  paybench run [flags]    run every benchmark and write BENCHMARKS.md (see scripts/bench.sh)
  paybench load [flags]   one load run against a running replica; prints JSON
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runAll(ctx, os.Args[2:])
	case "load":
		err = runLoad(ctx, os.Args[2:], os.Stdout)
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "paybench:", err)
		os.Exit(1)
	}
}

// newSecret returns a fresh Standard Webhooks secret (whsec_ + base64).
func newSecret() (string, signature.Secret, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", signature.Secret{}, err
	}
	s := "whsec_" + base64.StdEncoding.EncodeToString(raw)
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, s)
	if err != nil {
		return "", signature.Secret{}, err
	}
	return s, secrets[0], nil
}

// runLoad is `paybench load`: one warm-up and one measured phase against
// a replica started by hand.
func runLoad(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("paybench load", flag.ContinueOnError)
	target := fs.String("url", "http://127.0.0.1:8080/webhooks/payments", "webhook URL")
	senders := fs.Int("senders", 64, "concurrent senders")
	copies := fs.Int("copies", 1, "deliveries of each transaction, released at once (1: unique; 2: 50 % duplicates; 20: 95 %)")
	warmup := fs.Duration("warmup", 2*time.Second, "warm-up, not measured")
	measure := fs.Duration("measure", 10*time.Second, "measured phase")
	secret := fs.String("secret", os.Getenv("PAYLOCK_WEBHOOK_SECRETS"), "Standard Webhooks secret to sign with (empty: unsigned)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := loadConfig{URL: *target, Senders: *senders, Copies: max(1, *copies), Warmup: *warmup, Measure: *measure,
		Prefix: fmt.Sprintf("paybench-%d-", time.Now().UnixNano())}
	if *secret != "" {
		s, err := signature.ParseSecrets(signature.SchemeStandard, *secret)
		if err != nil {
			return fmt.Errorf("-secret: %w", err)
		}
		cfg.Secret = &s[0]
	}
	l, err := newLoader(cfg)
	if err != nil {
		return err
	}
	defer l.close()
	if cfg.Warmup > 0 {
		l.run(ctx, "w", cfg.Warmup)
	}
	p := l.run(ctx, "m", cfg.Measure)
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		phase
		DeliveriesPerSec float64
	}{p, p.DeliveriesPerSec()})
}

// workDir is a temporary directory for logs and pgbench files, removed at
// the end unless keep.
func workDir(keep string) (string, func(), error) {
	if keep != "" {
		return keep, func() {}, os.MkdirAll(keep, 0o755)
	}
	d, err := os.MkdirTemp("", "paybench.")
	if err != nil {
		return "", nil, err
	}
	// pgbench runs as this user; postgres never reads these files.
	return d, func() { os.RemoveAll(d) }, nil
}

// absPath makes p absolute, leaving "" alone.
func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
