package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paylock/paylock/store"
)

const purgeUsage = `Usage: paylock purge --older-than 90d [flags]

Deletes the webhook_events rows (the ids of loan approvals and payout status
notifications, kept to recognise redeliveries) received longer ago than
--older-than, in batches of 1000 rows, and prints how many it deleted.
Payments and disbursements are never purged.

--older-than is a duration (2160h, 90d or 7d12h), at least 7d: a
redelivery of a forgotten event id is no longer recognised as one, and
senders retry for days (Stripe and PayPal 3, Adyen up to 30). It defaults to
PAYLOCK_EVENT_RETENTION when that is set, with which "paylock serve" also
purges by itself every hour. The other flags are those of "paylock serve -h"
(DATABASE_URL...).
`

// purgeInterval is how often, on average, serve purges when
// PAYLOCK_EVENT_RETENTION is set.
const purgeInterval = time.Hour

// purgeCommand is "paylock purge". Exit status: 0 when the purge ran
// (whatever it deleted), 1 when the database failed, 2 on usage or
// configuration errors.
var purgeCommand = Command[*purgeOpts]{
	Name: "paylock purge", Usage: purgeUsage, Hint: " (want --older-than 90d)", Open: OpenStore,
	New: func() *purgeOpts { return &purgeOpts{} },
	Run: func(ctx context.Context, b *Base, o *purgeOpts) error {
		p, err := b.Store.Disbursements().PurgeWebhookEvents(ctx, o.retention, store.DefaultPurgeBatch)
		if err != nil {
			return fmt.Errorf("deleted %d webhook events, then: %w", p.Deleted, err)
		}
		b.Printf("deleted %d webhook events received before %s (older than %s)\n",
			p.Deleted, p.Before.UTC().Format(time.RFC3339), store.FormatRetention(o.retention))
		return nil
	},
}

// purgeOpts are purge's own: --older-than, else PAYLOCK_EVENT_RETENTION.
type purgeOpts struct {
	olderThan string // --older-than; "" when absent
	found     bool
	retention time.Duration
}

func (o *purgeOpts) Parse(args []string) ([]string, error) {
	var rest []string
	var err error
	if o.olderThan, o.found, rest, err = cutFlag(args, "older-than"); err != nil {
		return nil, fmt.Errorf("%v (e.g. 90d)", err)
	}
	return rest, nil
}

// Validate takes the window from --older-than, else
// PAYLOCK_EVENT_RETENTION: one of them is required.
func (o *purgeOpts) Validate(cfg *Config) (err error) {
	o.retention = cfg.Database.EventRetention
	if o.found {
		if o.retention, err = parseRetention(o.olderThan); err != nil {
			return fmt.Errorf("invalid --older-than %q: %v", o.olderThan, err)
		}
	}
	if o.retention == 0 {
		return errors.New("--older-than is required (e.g. 90d, at least 7d), or set PAYLOCK_EVENT_RETENTION")
	}
	return nil
}
