package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paylock/paylock/forward"
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

T is an RFC 3339 time (2026-11-30T12:00:00Z) or a duration ago (72h, 3d,
1d12h).

The other flags are those of "paylock serve -h" (DATABASE_URL...).
`

// replayArgs are "paylock forward replay"'s own flags.
type replayArgs struct {
	source, transaction string
	since, until        time.Time
	dryRun              bool
	rest                []string
}

// parseReplayTime reads an RFC 3339 time or a duration ago from now
// (parseDuration: 72h, 3d, 1d12h).
func parseReplayTime(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := parseNonNegative(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want an RFC 3339 time or a duration ago such as 72h or 3d", v)
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

// replayCommand is "paylock forward replay".
var replayCommand = Command[*replayOpts]{
	Name: "paylock forward replay", Usage: replayUsage, Open: OpenStore,
	New: func() *replayOpts { return &replayOpts{} },
	Run: func(ctx context.Context, b *Base, o *replayOpts) error {
		ra := o.replayArgs
		res, err := b.Store.Outbox().ReplayForwards(ctx, store.ReplayFilter{Source: ra.source, Since: ra.since, Until: ra.until,
			TransactionID: ra.transaction, Destination: o.dest, DryRun: ra.dryRun})
		verb := "replayed"
		if ra.dryRun {
			verb = "would replay"
		}
		b.Printf("%s %d payments of source %q: %d forward jobs run again, %d new, %d still pending (left as they are)\n",
			verb, res.Payments, ra.source, res.Retried, res.Inserted, res.Pending)
		return err
	},
}

// replayOpts are "forward replay"'s own; Validate finds the source's
// destination.
type replayOpts struct {
	replayArgs
	dest string // the source's destination, as serve names it
}

func (o *replayOpts) Parse(args []string) (rest []string, err error) {
	o.replayArgs, err = parseReplayArgs(args, time.Now())
	return o.rest, err
}

// Validate finds the source and its destination among the sources'
// shapes (pipelineSources: their secrets are not needed). A replay
// without a destination can only count (--dry-run, which needs nothing
// but the database); a real one refuses a source that forwards nothing,
// or to an http(s) URL while PAYLOCK_FORWARD_SECRETS is unset: the worker
// could not sign what it queues.
func (o *replayOpts) Validate(cfg *Config) error {
	sources, routes, err := pipelineSources(*cfg)
	if err != nil {
		return err
	}
	known := false
	for _, s := range sources {
		known = known || s.Name == o.source
	}
	if !known {
		return fmt.Errorf("unknown source %q", o.source)
	}
	o.dest = routes.BySource[o.source]
	switch {
	case o.dryRun:
		return nil
	case o.dest == "":
		return fmt.Errorf("source %q forwards nothing: set PAYLOCK_FORWARD_URL, or the source's forward_url in PAYLOCK_SOURCES_FILE", o.source)
	case len(cfg.Forward.Secrets) == 0 && forward.NeedsSignature(routes.Destinations[o.dest]):
		return fmt.Errorf("source %q forwards to %s: PAYLOCK_FORWARD_SECRETS must be set to sign the forwards", o.source, forward.Redact(routes.Destinations[o.dest]))
	}
	return nil
}
