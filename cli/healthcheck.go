package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

const healthcheckUsage = `Usage: paylock healthcheck [--addr :8080] [--path /healthz] [--timeout 3s]

GETs the local replica's /healthz (or --path, such as /readyz) on --addr
(default PAYLOCK_ADDR, else :8080; an unspecified host is 127.0.0.1) and
exits 0 on 200, 1 otherwise: a container health check in images without
curl. --timeout is a duration (default 3s).
`

// runHealthcheck implements "paylock healthcheck": GET the replica's
// /healthz (or --path) on PAYLOCK_ADDR and exit 0 only on 200. It serves as
// a container health check in images without curl.
func runHealthcheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("paylock healthcheck", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := getenv("PAYLOCK_ADDR")
	if addr == "" {
		addr = ":8080"
	}
	fs.StringVar(&addr, "addr", addr, "address paylock serves on (env PAYLOCK_ADDR)")
	path := fs.String("path", "/healthz", "path to check (/healthz or /readyz)")
	timeout := new(time.Duration)
	*timeout = 3 * time.Second
	fs.Func("timeout", "how long to wait for the answer (default 3s)", func(v string) (err error) {
		*timeout, err = parseNonNegative(v)
		return err
	})
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, healthcheckUsage)
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "paylock healthcheck: %v\n\n%s", err, healthcheckUsage)
		return exitUsage
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		fmt.Fprintf(stderr, "paylock healthcheck: invalid address %q: %v\n", addr, err)
		return 2
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+*path, nil)
	if err != nil {
		fmt.Fprintf(stderr, "paylock healthcheck: %v\n", err)
		return 2
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "paylock healthcheck: %v\n", err)
		return 1
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	fmt.Fprintf(stdout, "%s %s\n", res.Status, body)
	if res.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
