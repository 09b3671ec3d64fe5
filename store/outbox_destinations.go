package store

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// DestinationStats are the forward jobs of one destination as River holds
// them (Outbox.DestinationStats).
type DestinationStats struct {
	// Destination is the jobs' args.destination; "" for jobs of an older
	// paylock that carry a URL instead.
	Destination string
	// Backlog is the jobs not yet done: available, scheduled (snoozed
	// included), retryable and running.
	Backlog int
	// Failing is the retryable jobs: their last attempt failed.
	Failing int
	// Discarded is the jobs given up (discarded) in the last 24 hours.
	Discarded int
	// Lag is the age of the oldest job of the backlog, from its
	// created_at, by the database's clock; 0 when the backlog is empty.
	Lag time.Duration
	// LastError is the newest error of a retryable job or of one
	// discarded in the last 24 hours (LastErrorLine); "" when none.
	LastError   string
	LastErrorAt time.Time // zero when LastError is ""
}

// DiscardedWindow is how far back DestinationStats counts discarded jobs.
const DiscardedWindow = 24 * time.Hour

// destinationStatsSQL groups the forward jobs still to do, and those
// discarded within the window, by destination: one pass over river_job.
const destinationStatsSQL = `
WITH j AS (
	SELECT coalesce(args->>'destination', '') AS destination, state, created_at,
		CASE WHEN state IN ('retryable', 'discarded') AND array_length(errors, 1) > 0
			THEN errors[array_length(errors, 1)] END AS last_err
	FROM river_job
	WHERE kind = $1
		AND (state IN ('available', 'scheduled', 'retryable', 'running')
			OR (state = 'discarded' AND finalized_at >= now() - make_interval(secs => $2)))
)
SELECT destination,
	count(*) FILTER (WHERE state <> 'discarded'),
	count(*) FILTER (WHERE state = 'retryable'),
	count(*) FILTER (WHERE state = 'discarded'),
	coalesce(extract(epoch FROM now() - min(created_at) FILTER (WHERE state <> 'discarded')), 0)::float8,
	coalesce((array_agg(last_err->>'error' ORDER BY (last_err->>'at')::timestamptz DESC)
		FILTER (WHERE last_err IS NOT NULL))[1], ''),
	max((last_err->>'at')::timestamptz)
FROM j
GROUP BY destination
ORDER BY destination`

// DestinationStats returns, for each destination that has forward jobs to
// do or discarded within DiscardedWindow, its backlog, failures and lag
// (one query over river_job, grouped by the jobs' destination, and one
// over the express lane, whose waiting messages count in the backlog and
// the lag), ordered by name. A destination without such jobs is absent. Errors wrap
// ErrUnavailable when the database failed transiently.
func (s *Outbox) DestinationStats(ctx context.Context) ([]DestinationStats, error) {
	rows, err := s.pool.Query(ctx, destinationStatsSQL, ForwardKind, DiscardedWindow.Seconds())
	if err != nil {
		return nil, translate("destination stats", err)
	}
	defer rows.Close()
	var out []DestinationStats
	for rows.Next() {
		var d DestinationStats
		var lag float64
		var at *time.Time
		if err := rows.Scan(&d.Destination, &d.Backlog, &d.Failing, &d.Discarded, &lag, &d.LastError, &at); err != nil {
			return nil, translate("destination stats", err)
		}
		d.Lag = time.Duration(lag * float64(time.Second)).Round(time.Second)
		d.LastError = LastErrorLine(d.LastError)
		if at != nil {
			d.LastErrorAt = *at
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("destination stats", err)
	}
	rows.Close()
	return s.withExpress(ctx, out)
}

// withExpress adds the messages waiting in the express lane
// (ExpressBacklogs) to the backlogs of stats, and their age to the lag.
func (s *Outbox) withExpress(ctx context.Context, stats []DestinationStats) ([]DestinationStats, error) {
	lane, err := s.ExpressBacklogs(ctx)
	if err != nil {
		return nil, err
	}
	if len(lane) == 0 {
		return stats, nil
	}
	at := map[string]int{}
	for i, d := range stats {
		at[d.Destination] = i
	}
	for _, b := range lane {
		i, ok := at[b.Destination]
		if !ok {
			stats = append(stats, DestinationStats{Destination: b.Destination})
			i = len(stats) - 1
		}
		stats[i].Backlog += b.Waiting
		stats[i].Lag = max(stats[i].Lag, b.Age.Round(time.Second))
	}
	slices.SortFunc(stats, func(a, b DestinationStats) int { return strings.Compare(a.Destination, b.Destination) })
	return stats, nil
}

// userinfo is a URL's credentials (scheme://user:password@).
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@`)

// maxErrorLine is the longest error LastErrorLine keeps, in runes.
const maxErrorLine = 160

// LastErrorLine makes a job's error (River's errors[].error: the worker's
// error or a panic's value; never the stack trace) fit to show: its first
// line, any URL's credentials replaced by xxxxx, at most 160 runes. The
// forward worker's errors name the destination by its redacted URL and
// the answer by its status, never by a body; this is a second guard.
func LastErrorLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = userinfo.ReplaceAllString(strings.TrimSpace(s), "${1}xxxxx@")
	if utf8.RuneCountInString(s) > maxErrorLine {
		s = string([]rune(s)[:maxErrorLine-1]) + "…"
	}
	return s
}
