package store

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// FormatRetention writes a retention window as paylock's settings do:
// whole days as "90d", anything else as a Go duration.
func FormatRetention(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// StartPurger purges webhook_events older than retention in the
// background (PurgeWebhookEvents): every interval on average, each wait
// drawn between half and one and a half intervals (the first one too) so
// that replicas do not purge in step, and a replica restarting in a loop
// does not purge on every start. Several replicas purging at once skip
// each other's rows. Each purge that deleted something is logged at info,
// one that failed at warn. stop ends it and waits for a purge in progress
// to give up.
func (s *Disbursements) StartPurger(ctx context.Context, retention, interval time.Duration, logger *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	logger.Info("purging webhook events periodically",
		slog.String("older_than", FormatRetention(retention)), slog.Duration("every", interval))
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
			s.purgeOnce(ctx, retention, logger)
			t.Reset(jitter(interval))
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// jitter returns a duration in [d/2, 3d/2).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d)
}

func (s *Disbursements) purgeOnce(ctx context.Context, retention time.Duration, logger *slog.Logger) {
	start := time.Now()
	p, err := s.PurgeWebhookEvents(ctx, retention, DefaultPurgeBatch)
	attrs := []slog.Attr{
		slog.Int64("deleted", p.Deleted),
		slog.String("older_than", FormatRetention(retention)),
		slog.Duration("took", time.Since(start)),
	}
	if !p.Before.IsZero() {
		attrs = append(attrs, slog.Time("received_before", p.Before))
	}
	switch {
	case err != nil && ctx.Err() != nil:
		if p.Deleted > 0 {
			logger.LogAttrs(ctx, slog.LevelInfo, "purged webhook events until shutdown", attrs...)
		}
	case err != nil:
		logger.LogAttrs(ctx, slog.LevelWarn, "purging webhook events failed; trying again next time",
			append(attrs, slog.String("error", err.Error()))...)
	case p.Deleted > 0:
		logger.LogAttrs(ctx, slog.LevelInfo, "purged webhook events", attrs...)
	default:
		logger.LogAttrs(ctx, slog.LevelDebug, "purged webhook events", attrs...)
	}
}
