package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/store"
)

const forwardResumeUsage = `Usage:
  paylock forward resume <destination> [flags]

resume brings a parked (or failing) destination back to healthy at once,
without waiting for its next probe, and makes every job waiting for it
available: they are sent in order, each payment's messages after the
earlier ones. The operations destination, when the sources file names one,
receives destination.recovered. Resuming a healthy destination makes its
waiting jobs (snoozed, or retrying later) available now.

A destination that still fails is parked again by the breaker after
park_after consecutive failed attempts (docs/routing.md, "When a
destination is sick").

The other flags are those of "paylock serve -h" (DATABASE_URL...).
`

const forwardRecoverUsage = `Usage:
  paylock forward recover <destination> --since T [--until T] [flags]

recover puts back every forward job to <destination> that was given up
(discarded after its last attempt, or cancelled: refused for good by the
destination, or held behind an earlier one given up) at or after T and
before --until (default: now), oldest first, so that each payment's
messages go in order. T is an RFC 3339 time or a duration ago (2h, 3d,
1d12h). Each job gets one more attempt if it had used them all; the
forward worker (serve, or "paylock worker") sends them with their
original webhook-ids, so a receiver that took one already skips it.

The other flags are those of "paylock serve -h" (DATABASE_URL...).
`

// healthOpts are the options of "forward resume" and "forward recover".
type healthOpts struct {
	sub          string // resume or recover
	destination  string
	since, until time.Time
	rest         []string
}

func (o *healthOpts) Parse(args []string) ([]string, error) {
	now := time.Now()
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-") && o.destination == "":
			o.destination = a
		case strings.HasPrefix(a, "-") && o.sub == "recover" && (name == "since" || name == "until"):
			if !hasValue {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("--%s needs a value such as 2h or 2026-12-03T10:00:00Z", name)
				}
				i++
				value = args[i]
			}
			t, err := parseReplayTime(value, now)
			if err != nil {
				return nil, fmt.Errorf("invalid --%s %v", name, err)
			}
			if name == "since" {
				o.since = t
			} else {
				o.until = t
			}
		default:
			o.rest = append(o.rest, a)
		}
	}
	switch {
	case o.destination == "":
		return nil, errors.New("give a destination's name (paylock forward destinations lists them)")
	case o.sub == "recover" && o.since.IsZero():
		return nil, errors.New("give --since: the start of the window whose given-up jobs are put back")
	case !o.until.IsZero() && !o.until.After(o.since):
		return nil, fmt.Errorf("--until %s is not after --since %s", o.until.Format(time.RFC3339), o.since.Format(time.RFC3339))
	}
	return o.rest, nil
}

func (o *healthOpts) Validate(*Config) error { return nil }

// checkDestination returns the routes of cfg, and an error naming the
// destinations when name is none of them.
func checkDestination(cfg Config, name string) (forward.Routes, error) {
	specs, err := sourceShapes(cfg)
	if err != nil {
		return forward.Routes{}, err
	}
	routes, err := routeForwards(cfg, specs, false)
	if err != nil {
		return forward.Routes{}, err
	}
	if routes.Router == nil {
		return forward.Routes{}, fmt.Errorf("%w %q: this configuration forwards nothing", forward.ErrUnknownDestination, name)
	}
	return routes, routes.Router.Check([]string{name})
}

// forwardResumeCommand is "paylock forward resume".
var forwardResumeCommand = Command[*healthOpts]{
	Name: "paylock forward resume", Usage: forwardResumeUsage, Open: OpenStore,
	New: func() *healthOpts { return &healthOpts{sub: "resume"} },
	Run: func(ctx context.Context, b *Base, o *healthOpts) error {
		routes, err := checkDestination(b.Config, o.destination)
		if err != nil {
			return err
		}
		res, err := destinationView{routes: routes, st: b.Store.Outbox()}.ResumeDestination(ctx, o.destination)
		if err != nil {
			return err
		}
		if res.Moved {
			b.Printf("destination %s is healthy again (resumed by an operator); %d waiting jobs made available\n", o.destination, res.Released)
			b.Logger.Info("forward: destination resumed", "destination", o.destination, "released", res.Released)
			return nil
		}
		b.Printf("destination %s was not parked nor failing; %d waiting jobs made available\n", o.destination, res.Released)
		return nil
	},
}

// forwardRecoverCommand is "paylock forward recover".
var forwardRecoverCommand = Command[*healthOpts]{
	Name: "paylock forward recover", Usage: forwardRecoverUsage, Open: OpenStore,
	New: func() *healthOpts { return &healthOpts{sub: "recover"} },
	Run: func(ctx context.Context, b *Base, o *healthOpts) error {
		if _, err := checkDestination(b.Config, o.destination); err != nil {
			return err
		}
		n, err := b.Store.Outbox().RecoverForwards(ctx, o.destination, o.since, o.until)
		if err != nil {
			return fmt.Errorf("%v (%d put back before the error)", err, n)
		}
		until := "now"
		if !o.until.IsZero() {
			until = o.until.UTC().Format(time.RFC3339)
		}
		b.Printf("put %d given-up forward jobs to %s back in the queue (given up from %s to %s)\n",
			n, o.destination, o.since.UTC().Format(time.RFC3339), until)
		return nil
	},
}

// destinationView is the console's and the commands' view of the forward
// destinations (admin.DestinationView): routes as this process defines
// them, their jobs and their breaker's state from st.
type destinationView struct {
	routes forward.Routes
	st     *store.Outbox
}

// ListDestinations returns one row per destination (destinationRows).
func (v destinationView) ListDestinations(ctx context.Context) ([]admin.Destination, error) {
	stats, err := v.st.DestinationStats(ctx)
	if err != nil {
		return nil, err
	}
	health, err := v.st.DestinationHealth(ctx)
	if err != nil {
		return nil, err
	}
	return destinationRows(v.routes, stats, health), nil
}

// ResumeDestination resumes destination name (store.Outbox.ResumeDestination),
// sending destination.recovered to the operations destination when it
// moved. A name this process does not define wraps store.ErrNotFound.
func (v destinationView) ResumeDestination(ctx context.Context, name string) (admin.DestinationResume, error) {
	if v.routes.Router == nil || v.routes.Router.Check([]string{name}) != nil {
		return admin.DestinationResume{}, fmt.Errorf("%w: destination %q", store.ErrNotFound, name)
	}
	event := func(h store.DestinationHealth) *store.ForwardArgs {
		return v.routes.Router.OperatorEvent(v.routes.Operations, forward.EventDestinationRecovered, h)
	}
	_, moved, released, err := v.st.ResumeDestination(ctx, name, event)
	if err != nil {
		return admin.DestinationResume{}, err
	}
	return admin.DestinationResume{Destination: name, Moved: moved, Released: released}, nil
}
