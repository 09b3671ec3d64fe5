package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/paylock/paylock/store"
)

const purgeUsage = `Usage: paylock purge --older-than 90d [flags]

Deletes the webhook_events rows (the ids of loan approvals and payout status
notifications, kept to recognise redeliveries) received longer ago than
--older-than, in batches of 1000 rows, and prints how many it deleted.
Payments and disbursements are never purged.

--older-than is a Go duration (2160h) or whole days (90d), at least 7d: a
redelivery of a forgotten event id is no longer recognised as one, and
senders retry for days (Stripe and PayPal 3, Adyen up to 30). It defaults to
PAYLOCK_EVENT_RETENTION when that is set, with which "paylock serve" also
purges by itself every hour. The other flags are those of "paylock serve -h"
(DATABASE_URL...).
`

// purgeInterval is how often, on average, serve purges when
// PAYLOCK_EVENT_RETENTION is set.
const purgeInterval = time.Hour

// parseRetention reads PAYLOCK_EVENT_RETENTION or --older-than: "" is 0
// (no purging); anything else is a Go duration or whole days of at least
// store.MinEventRetention.
func parseRetention(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := parseAge(v)
	if err != nil {
		return 0, errors.New("want a duration such as 90d or 2160h")
	}
	if d < store.MinEventRetention {
		return 0, fmt.Errorf("must be at least 7d (%s): senders retry deliveries for days, up to 30", store.MinEventRetention)
	}
	return d, nil
}

// cutFlag takes the flag name (-name or --name, with its value after a
// space or "=") out of args, and returns its last value and whether it was
// there.
func cutFlag(args []string, name string) (value string, found bool, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		n, v, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || n != name {
			rest = append(rest, args[i])
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return "", false, nil, fmt.Errorf("--%s needs a value", name)
			}
			i++
			v = args[i]
		}
		value, found = v, true
	}
	return value, found, rest, nil
}

func isHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help")
}

// runPurge implements "paylock purge". Exit status: 0 when the purge ran
// (whatever it deleted), 1 when the database failed, 2 on usage or
// configuration errors.
func runPurge(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	const name = "paylock purge"
	if isHelp(args) {
		fmt.Fprint(stdout, purgeUsage)
		return 0
	}
	value, found, rest, err := cutFlag(args, "older-than")
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v (e.g. 90d)\n", name, err)
		return 2
	}
	cfg, code, ok := subcommandConfig(name, purgeUsage, " (want --older-than 90d)", rest, getenv, stdout, stderr)
	if !ok {
		return code
	}
	retention := cfg.EventRetention
	if found {
		if retention, err = parseRetention(value); err != nil {
			fmt.Fprintf(stderr, "%s: invalid --older-than %q: %v\n", name, value, err)
			return 2
		}
	}
	if retention == 0 {
		fmt.Fprintf(stderr, "%s: --older-than is required (e.g. 90d, at least 7d), or set PAYLOCK_EVENT_RETENTION\n", name)
		return 2
	}
	st, err := store.Open(ctx, storeConfig(cfg))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	defer st.Close()
	p, err := st.Disbursements().PurgeWebhookEvents(ctx, retention, store.DefaultPurgeBatch)
	if err != nil {
		fmt.Fprintf(stderr, "%s: deleted %d webhook events, then: %v\n", name, p.Deleted, err)
		return 1
	}
	fmt.Fprintf(stdout, "deleted %d webhook events received before %s (older than %s)\n",
		p.Deleted, p.Before.UTC().Format(time.RFC3339), store.FormatRetention(retention))
	return 0
}
