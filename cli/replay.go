package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/paylock/paylock/store"
)

const replayUsage = `Usage:
  paylock forward replay --source S (--since T [--until T] | --transaction ID) [--dry-run] [flags]

replay forwards payment.recorded again for the stored payments of source S
received since T (and before --until), or for the one transaction ID, with
the same webhook-id as the first time (pay_..., from the source and the
transaction id), so that a receiver that already has one deduplicates it.
A payment whose forward job River still holds (completed jobs are kept for
a while) has that job run again; one whose job is gone gets a new job to
the source's destination: its own forward_url, or PAYLOCK_FORWARD_URL
("default"). Jobs still waiting are left as they are. The forward worker
(serve, or "paylock worker") sends them. --dry-run only counts.

T is an RFC 3339 time (2026-11-30T12:00:00Z) or a duration ago (72h).

The other flags are those of "paylock serve -h" (DATABASE_URL...).
`

// replayArgs are "paylock forward replay"'s own flags.
type replayArgs struct {
	source, transaction string
	since, until        time.Time
	dryRun              bool
	rest                []string
}

// parseReplayTime reads an RFC 3339 time or a Go duration ago from now.
func parseReplayTime(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q: want an RFC 3339 time or a duration ago such as 72h", v)
	}
	return now.Add(-d), nil
}

func parseReplayArgs(args []string, now time.Time) (replayArgs, error) {
	var ra replayArgs
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			ra.rest = append(ra.rest, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch name {
		case "dry-run":
			if hasValue {
				return ra, errors.New("--dry-run takes no value")
			}
			ra.dryRun = true
			continue
		case "source", "since", "until", "transaction":
		default:
			ra.rest = append(ra.rest, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return ra, fmt.Errorf("--%s needs a value", name)
			}
			i++
			value = args[i]
		}
		var err error
		switch name {
		case "source":
			ra.source = value
		case "transaction":
			ra.transaction = value
		case "since":
			ra.since, err = parseReplayTime(value, now)
		case "until":
			ra.until, err = parseReplayTime(value, now)
		}
		if err != nil {
			return ra, fmt.Errorf("invalid --%s %v", name, err)
		}
	}
	switch {
	case ra.source == "":
		return ra, errors.New("--source is required")
	case ra.since.IsZero() && ra.transaction == "":
		return ra, errors.New("give --since or --transaction")
	case !ra.until.IsZero() && !ra.until.After(ra.since):
		return ra, errors.New("--until must be after --since")
	}
	return ra, nil
}

// runReplay implements "paylock forward replay".
func runReplay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	const name = "paylock forward replay"
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fmt.Fprint(stdout, replayUsage)
			return 0
		}
	}
	ra, err := parseReplayArgs(args, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	cfg, code, ok := subcommandConfig(name, replayUsage, "", ra.rest, getenv, stdout, stderr)
	if !ok {
		return code
	}
	// The destination as serve computes it (handlerSources).
	sources, routes, err := handlerSources(cfg, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	known := false
	for _, s := range sources {
		known = known || s.Name == ra.source
	}
	if !known {
		fmt.Fprintf(stderr, "%s: unknown source %q\n", name, ra.source)
		return 2
	}
	dest := routes.BySource[ra.source]
	if dest == "" && !ra.dryRun {
		fmt.Fprintf(stderr, "%s: source %q forwards nothing (no forward_url, no PAYLOCK_FORWARD_URL)\n", name, ra.source)
		return 2
	}
	st, err := store.Open(ctx, storeConfig(cfg))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	defer st.Close()
	res, err := st.Outbox().ReplayForwards(ctx, store.ReplayFilter{Source: ra.source, Since: ra.since, Until: ra.until,
		TransactionID: ra.transaction, Destination: dest, DryRun: ra.dryRun})
	verb := "replayed"
	if ra.dryRun {
		verb = "would replay"
	}
	fmt.Fprintf(stdout, "%s %d payments of source %q: %d forward jobs run again, %d new, %d still pending (left as they are)\n",
		verb, res.Payments, ra.source, res.Retried, res.Inserted, res.Pending)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}
