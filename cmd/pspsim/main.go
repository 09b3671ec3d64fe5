// Command pspsim is an at-least-once webhook sender for load and chaos runs:
// a payment service provider (PSP) in a box.
//
// It sends --txs transactions × --deliveries deliveries each, concurrently,
// spread round-robin over the --targets (paylock replicas or a load
// balancer), signed with Standard Webhooks when it has a secret. Every
// delivery is retried on any non-2xx answer and any transport error, on a
// compressed PSP-like schedule (exponential backoff with jitter, honouring
// Retry-After scaled by --time-scale), until it is acknowledged or the
// --deadline passes. Then it reads every transaction back from the database
// and passes the exactly-once verdict: each transaction recorded once, with
// the amount it sent, and acknowledged. It prints a summary (with --json, a
// machine-readable one on stdout) and exits 1 when the verdict fails, 2 on a
// usage error.
//
//	pspsim --targets http://127.0.0.1:8080,http://127.0.0.1:8081 --txs 500 --deliveries 3 \
//	       --secret whsec_... --database-url postgres://... --json
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
