package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MinEventRetention is the shortest retention PurgeWebhookEvents accepts.
// Forgetting an event id lets a redelivery of it pass webhook_events as a
// new event, so the window must outlast every sender's retry schedule
// (Stripe and PayPal retry for 3 days, Adyen for up to 30). Even then the
// disbursements' own UNIQUE keys and forward-only statuses keep a late
// redelivery from paying twice; what is lost is the audit of the event id.
const MinEventRetention = 7 * 24 * time.Hour

// DefaultPurgeBatch is how many rows one purge statement deletes when the
// caller passes no batch size.
const DefaultPurgeBatch = 1000

// ErrRetentionTooShort means a purge was asked to keep less than
// MinEventRetention. Nothing was deleted.
var ErrRetentionTooShort = errors.New("store: event retention too short")

// Purged is what PurgeWebhookEvents did.
type Purged struct {
	Deleted int64     // webhook_events rows deleted
	Before  time.Time // the cutoff: rows received before it were deleted
}

// purgeBatchSQL deletes one batch, oldest first, along
// webhook_events_received_at_idx. Rows another purger has locked are
// skipped, so replicas purging at once do not wait on each other.
const purgeBatchSQL = `
DELETE FROM webhook_events
WHERE (source, event_id) IN (
	SELECT source, event_id FROM webhook_events
	WHERE received_at < $1
	ORDER BY received_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED)`

// PurgeWebhookEvents deletes the webhook_events rows received more than
// olderThan ago (by the database's clock, fixed when it starts), in
// statements of at most batch rows (DefaultPurgeBatch when batch <= 0), each
// committed on its own, until none is left or ctx ends. It touches nothing
// else: payments and disbursements are never purged.
//
// It returns what it deleted, also alongside an error. Errors:
// ErrRetentionTooShort when olderThan is under MinEventRetention (nothing is
// deleted); ErrUnavailable for transient failures, ctx's end included.
func (s *Disbursements) PurgeWebhookEvents(ctx context.Context, olderThan time.Duration, batch int) (Purged, error) {
	if olderThan < MinEventRetention {
		return Purged{}, fmt.Errorf("%w: %s is under %s", ErrRetentionTooShort, olderThan, MinEventRetention)
	}
	if batch <= 0 {
		batch = DefaultPurgeBatch
	}
	var p Purged
	err := s.pool.QueryRow(ctx, `SELECT now() - $1 * interval '1 millisecond'`, olderThan.Milliseconds()).Scan(&p.Before)
	if err != nil {
		return p, translate("purge webhook events: cutoff", err)
	}
	for {
		tag, err := s.pool.Exec(ctx, purgeBatchSQL, p.Before, batch)
		if err != nil {
			return p, translate("purge webhook events", err)
		}
		p.Deleted += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return p, nil
		}
	}
}
