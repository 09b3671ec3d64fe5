package store

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
)

// Discarded forwards stay in River's table until an operator resolves them.
//
// The review queue reads an undelivered payment's forward from its
// discarded River job. River's JobCleaner would delete a discarded job
// after DiscardedJobRetentionPeriod (7 days by default), taking the item
// out of the queue unresolved; so every River client paylock starts
// (StartJobs) keeps discarded jobs (-1), and paylock deletes instead the
// discarded forward jobs resolved long enough ago (PurgeResolvedForwards).

// ResolvedForwardRetention is how long a resolved discarded forward job is
// kept after its resolution: River's own default for discarded jobs.
const ResolvedForwardRetention = 7 * 24 * time.Hour

// keepDiscarded makes cfg's client keep discarded jobs (its JobCleaner
// deletes them never) unless the caller chose a period.
func keepDiscarded(cfg *river.Config) {
	if cfg.DiscardedJobRetentionPeriod == 0 {
		cfg.DiscardedJobRetentionPeriod = -1
	}
}

// PurgeResolvedForwards deletes the discarded forward jobs whose latest
// discard was resolved (review_resolutions) more than olderThan ago, and
// returns how many it deleted. An unresolved one is never deleted.
func (s *Review) PurgeResolvedForwards(ctx context.Context, olderThan time.Duration) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM river_job j
		WHERE j.kind = $1 AND j.state = 'discarded'
		  AND EXISTS (SELECT 1 FROM review_resolutions r
		              WHERE r.item_id = 'forward-' || j.id AND r.at >= j.finalized_at AND r.at < now() - $2::interval)`,
		ForwardKind, olderThan)
	if err != nil {
		return 0, translate("purge resolved forward jobs", err)
	}
	return tag.RowsAffected(), nil
}

// StartForwardPurger runs PurgeResolvedForwards with
// ResolvedForwardRetention every interval on average (jittered as
// StartPurger's), logging what it deleted; stop ends it.
func (s *Review) StartForwardPurger(ctx context.Context, interval time.Duration, logger *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(jitter(interval))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			n, err := s.PurgeResolvedForwards(ctx, ResolvedForwardRetention)
			switch {
			case err != nil && ctx.Err() == nil:
				logger.WarnContext(ctx, "purging resolved forward jobs failed; trying again next time", slog.Any("error", err))
			case n > 0:
				logger.InfoContext(ctx, "purged resolved forward jobs", slog.Int64("deleted", n))
			}
			t.Reset(jitter(interval))
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
