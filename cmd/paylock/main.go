// Command paylock receives payment webhooks and records each payment exactly
// once. Its commands live in package cli; see docs/operations.md for them and
// their configuration.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/paylock/paylock/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	// After the first signal starts a graceful shutdown, a second one kills
	// the process the default way.
	context.AfterFunc(ctx, stop)
	cli.Version = version
	code := cli.Main(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
