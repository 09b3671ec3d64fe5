// Command paylock receives payment webhooks and records each payment exactly
// once. See the README for the subcommands and their configuration.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/paylock/paylock/provider/all" // the providers sources name as their adapter
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	// After the first signal starts a graceful shutdown, a second one kills
	// the process the default way.
	context.AfterFunc(ctx, stop)
	code := Run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
