package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// A forward destination's health, shared by every replica through the
// forward_destination_health table: package forward's breaker moves a
// destination between its states (MoveDestination) and parks its jobs
// while it is parked; a probe (ClaimProbe, ConsumeProbe) or an operator
// (ResumeDestination) brings it back. A destination without a row is
// healthy.

// DestinationState is a destination's health.
type DestinationState string

// The states of a destination.
const (
	// DestinationHealthy: its attempts succeed (or none failed lately).
	DestinationHealthy DestinationState = "healthy"
	// DestinationFailing: its recent attempts fail; its jobs are still
	// tried, each on its retry schedule.
	DestinationFailing DestinationState = "failing"
	// DestinationParked: it failed too often; its jobs wait without
	// spending attempts (snoozed), kept, until a probe succeeds or an
	// operator resumes it (ResumeDestination).
	DestinationParked DestinationState = "parked"
)

// DestinationHealth is one destination's row.
type DestinationHealth struct {
	Destination string
	State       DestinationState
	// Since is when it entered State, by the database's clock, and Age
	// how long ago that was (by the same clock).
	Since time.Time
	Age   time.Duration
	// Gen grows by one with each move and each probe claimed.
	Gen int64
	// Failures is the consecutive failed attempts the move counted, and
	// LastError the last one's error (one short line).
	Failures  int
	LastError string
	// ProbeIn, when parked, is the wait until the next probe may be
	// claimed (0: now); ProbeJobID the job chosen as the current probe (0:
	// none) and ProbeSent whether a worker sent it (ConsumeProbe).
	ProbeIn    time.Duration
	ProbeJobID int64
	ProbeSent  bool
}

// ParkMark is what a forward job's metadata (River's) says when a move or
// a probe touched it: under the key ParkMarkKey. A worker whose view of
// the destination is older than Gen reads the destination's row again.
type ParkMark struct {
	Gen      int64 `json:"gen"`
	Probe    bool  `json:"probe,omitempty"`    // chosen as a probe of the parked destination
	Released bool  `json:"released,omitempty"` // released when the destination came back
}

// ParkMarkKey is the key of a ParkMark in a job's metadata.
const ParkMarkKey = "paylock_park"

// JobParkMark reads the ParkMark in a job's metadata; the zero ParkMark
// when it has none.
func JobParkMark(metadata []byte) ParkMark {
	var m struct {
		Mark ParkMark `json:"paylock_park"`
	}
	if len(metadata) > 0 {
		_ = json.Unmarshal(metadata, &m) // a job's metadata is River's JSON; anything else carries no mark
	}
	return m.Mark
}

// ErrDestinationMove is wrapped by MoveDestination's refusal of a move it
// cannot make (an unknown state, no destination).
var ErrDestinationMove = errors.New("store: bad destination move")

const healthColumns = `destination, state, since, gen, failures, last_error,
	coalesce(greatest(extract(epoch FROM probe_at - now()), 0), 0)::float8, coalesce(probe_job_id, 0), probe_sent,
	greatest(extract(epoch FROM now() - since), 0)::float8`

func scanHealth(row pgx.Row) (DestinationHealth, error) {
	var h DestinationHealth
	var probe, age float64
	err := row.Scan(&h.Destination, &h.State, &h.Since, &h.Gen, &h.Failures, &h.LastError, &probe, &h.ProbeJobID, &h.ProbeSent, &age)
	h.ProbeIn = time.Duration(probe * float64(time.Second))
	h.Age = time.Duration(age * float64(time.Second))
	return h, err
}

// DestinationHealth returns the row of every destination that has one,
// sorted by name. Errors wrap ErrUnavailable when the database failed
// transiently.
func (s *Outbox) DestinationHealth(ctx context.Context) ([]DestinationHealth, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+healthColumns+` FROM forward_destination_health ORDER BY destination`)
	if err != nil {
		return nil, translate("destination health", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DestinationHealth, error) { return scanHealth(r) })
	if err != nil {
		return nil, translate("destination health", err)
	}
	return out, nil
}

// DestinationMove is a change of a destination's state (MoveDestination).
type DestinationMove struct {
	Destination string
	// From are the states it may move from (a destination without a row is
	// healthy); when it is in none of them, nothing happens. Empty: any.
	From []DestinationState
	To   DestinationState
	// Failures and LastError say why (kept in the row).
	Failures  int
	LastError string
	// Probe, for a move to parked, is the wait before the first probe, and
	// the wait after it (doubled after each failed probe, up to
	// ClaimProbe's most).
	Probe time.Duration
	// Release, for a move to healthy, makes the destination's waiting jobs
	// (scheduled, retryable) available at once. A move out of parked
	// always releases them.
	Release bool
	// Event, when set, is inserted in the move's transaction if the move
	// happens (an operator event: destination.parked...), with
	// EventMaxAttempts attempts (0: the store's).
	Event            func(h DestinationHealth) *ForwardArgs
	EventMaxAttempts int
}

// MoveDestination moves m.Destination to m.To if it is in one of m.From,
// in one transaction with its event and, leaving parked, the release of
// its jobs; it returns the row afterwards and whether it moved, and how
// many jobs it released. Of several replicas making the same move at once,
// one moves it. Errors wrap ErrUnavailable when the database failed
// transiently.
func (s *Outbox) MoveDestination(ctx context.Context, m DestinationMove) (h DestinationHealth, moved bool, released int, err error) {
	switch {
	case m.Destination == "":
		return h, false, 0, fmt.Errorf("%w: no destination", ErrDestinationMove)
	case m.To != DestinationHealthy && m.To != DestinationFailing && m.To != DestinationParked:
		return h, false, 0, fmt.Errorf("%w: state %q", ErrDestinationMove, m.To)
	case m.To == DestinationParked && m.Probe <= 0:
		return h, false, 0, fmt.Errorf("%w: parking %s without a probe interval", ErrDestinationMove, m.Destination)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO forward_destination_health (destination, state, gen)
			VALUES ($1, 'healthy', 0) ON CONFLICT (destination) DO NOTHING`, m.Destination); err != nil {
			return err
		}
		var from DestinationState
		if err := tx.QueryRow(ctx, `SELECT state FROM forward_destination_health WHERE destination = $1 FOR UPDATE`,
			m.Destination).Scan(&from); err != nil {
			return err
		}
		if len(m.From) > 0 && !slices.Contains(m.From, from) {
			h, err = scanHealth(tx.QueryRow(ctx, `SELECT `+healthColumns+` FROM forward_destination_health WHERE destination = $1`, m.Destination))
			return err
		}
		var probe *float64 // seconds
		if m.To == DestinationParked {
			secs := m.Probe.Seconds()
			probe = &secs
		}
		h, err = scanHealth(tx.QueryRow(ctx, `UPDATE forward_destination_health SET state = $2, since = now(), gen = gen + 1,
				failures = $3, last_error = $4, probe_at = now() + make_interval(secs => $5), probe_interval = make_interval(secs => $5),
				probe_job_id = NULL, probe_sent = false, updated_at = now()
			WHERE destination = $1
			RETURNING `+healthColumns, m.Destination, m.To, max(m.Failures, 0), LastErrorLine(m.LastError), probe))
		if err != nil {
			return err
		}
		moved = true
		if m.To == DestinationHealthy && (m.Release || from == DestinationParked) {
			tag, err := tx.Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now(),
					metadata = metadata || jsonb_build_object($3::text, jsonb_build_object('gen', $2::bigint, 'released', true))
				WHERE kind = $4 AND state IN ('scheduled', 'retryable') AND args->>'destination' = $1`,
				m.Destination, h.Gen, ParkMarkKey, ForwardKind)
			if err != nil {
				return err
			}
			released = int(tag.RowsAffected())
		}
		if m.Event != nil {
			if ev := m.Event(h); ev != nil {
				return s.insertForwardAttempts(ctx, tx, *ev, m.EventMaxAttempts)
			}
		}
		return nil
	})
	if err != nil {
		return DestinationHealth{}, false, 0, translate("move destination", err)
	}
	return h, moved, released, nil
}

// ClaimProbe makes one of a parked destination's waiting jobs, its oldest,
// the next probe, if the destination is parked, its probe is due and the
// previous probe, sent, is not still running: the
// job is made available at once, marked (ParkMark.Probe) with the
// destination's new Gen, and the next probe is due after the probe
// interval, which doubles (up to most). It returns the row afterwards and
// whether it claimed a probe. When no job waits, the next probe is due
// after the interval, unchanged. Of several replicas claiming at once, one
// does.
func (s *Outbox) ClaimProbe(ctx context.Context, destination string, most time.Duration) (h DestinationHealth, claimed bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var due bool
		err := tx.QueryRow(ctx, `SELECT state = 'parked' AND probe_at <= now()
				AND NOT (probe_sent AND EXISTS (SELECT 1 FROM river_job WHERE id = probe_job_id AND state = 'running'))
			FROM forward_destination_health
			WHERE destination = $1 FOR UPDATE`, destination).Scan(&due)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !due {
			return nil
		}
		if err != nil {
			return err
		}
		// The oldest waiting job that was never a probe: a job that cannot
		// go (a replica that defines it otherwise, its order) or whose
		// probe failed is not chosen again before the others.
		var id int64
		err = tx.QueryRow(ctx, `SELECT id FROM river_job WHERE kind = $2 AND state IN ('available', 'scheduled', 'retryable')
			AND args->>'destination' = $1
			ORDER BY coalesce((metadata->$3->>'probe')::boolean, false), id LIMIT 1`, destination, ForwardKind, ParkMarkKey).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			h, err = scanHealth(tx.QueryRow(ctx, `UPDATE forward_destination_health SET probe_at = now() + probe_interval,
					updated_at = now()
				WHERE destination = $1 RETURNING `+healthColumns, destination))
			return err
		}
		if err != nil {
			return err
		}
		h, err = scanHealth(tx.QueryRow(ctx, `UPDATE forward_destination_health SET gen = gen + 1, probe_job_id = $2, probe_sent = false,
				probe_at = now() + probe_interval, probe_interval = least(probe_interval * 2, make_interval(secs => $3)),
				updated_at = now()
			WHERE destination = $1 RETURNING `+healthColumns, destination, id, most.Seconds()))
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE river_job SET state = CASE WHEN state = 'running' THEN state ELSE 'available' END,
				scheduled_at = now(),
				metadata = metadata || jsonb_build_object($3::text, jsonb_build_object('gen', $2::bigint, 'probe', true))
			WHERE id = $1`, id, h.Gen, ParkMarkKey); err != nil {
			return err
		}
		claimed = true
		return nil
	})
	if err != nil {
		return DestinationHealth{}, false, translate("claim probe", err)
	}
	return h, claimed, nil
}

// ConsumeProbe reports whether job id is the parked destination's current
// probe, not yet sent, and if so marks it sent: of the replicas that run
// it (a job may run twice), one sends it as the probe, and no other probe
// is claimed while it runs (a destination that hangs gets one probe at a
// time).
func (s *Outbox) ConsumeProbe(ctx context.Context, destination string, id int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE forward_destination_health SET probe_sent = true, updated_at = now()
		WHERE destination = $1 AND state = 'parked' AND probe_job_id = $2 AND NOT probe_sent`, destination, id)
	if err != nil {
		return false, translate("consume probe", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseSnoozed makes available at once the jobs to destination that
// wait (snoozed: scheduled) until more than beyond from now, marked
// released at gen, and returns how many. A worker that decided to park a
// job just before the destination came back snoozes it after the
// release: while a destination is newly healthy, its breaker sweeps them
// (beyond: longer than any other snooze of a forward job).
//
// It takes the destination's row first (as every move and claim does, so
// that one destination's bulk updates of river_job never interleave), and
// does nothing unless the destination is still healthy at gen.
func (s *Outbox) ReleaseSnoozed(ctx context.Context, destination string, gen int64, beyond time.Duration) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var ok bool
		err := tx.QueryRow(ctx, `SELECT state = 'healthy' AND gen = $2 FROM forward_destination_health
			WHERE destination = $1 FOR UPDATE`, destination, gen).Scan(&ok)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !ok {
			return nil
		}
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now(),
				metadata = metadata || jsonb_build_object($3::text, jsonb_build_object('gen', $2::bigint, 'released', true))
			WHERE kind = $4 AND state = 'scheduled' AND scheduled_at > now() + make_interval(secs => $5)
				AND args->>'destination' = $1`, destination, gen, ParkMarkKey, ForwardKind, beyond.Seconds())
		n = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, translate("release snoozed forwards", err)
	}
	return n, nil
}

// ResumeDestination moves a failing or parked destination back to healthy
// and releases its waiting jobs (an operator's "paylock forward resume"),
// with event (may be nil) in the same transaction. It returns the row,
// whether it moved and the jobs released; a healthy destination's waiting
// jobs are released too.
func (s *Outbox) ResumeDestination(ctx context.Context, destination string, event func(DestinationHealth) *ForwardArgs) (DestinationHealth, bool, int, error) {
	h, moved, released, err := s.MoveDestination(ctx, DestinationMove{Destination: destination,
		From: []DestinationState{DestinationFailing, DestinationParked}, To: DestinationHealthy, Release: true, Event: event})
	if err != nil || moved {
		return h, moved, released, err
	}
	n := 0
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM forward_destination_health WHERE destination = $1 FOR UPDATE`, destination); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now()
			WHERE kind = $2 AND state IN ('scheduled', 'retryable') AND args->>'destination' = $1`, destination, ForwardKind)
		n = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return h, false, 0, translate("resume destination", err)
	}
	return h, false, n, nil
}

// RecoverForwards puts back (RetryForward) every forward job to
// destination that was given up (discarded or cancelled) at or after
// since and before until (zero: now), oldest first, so that each payment's
// messages go in order; it returns how many. An operator's "paylock
// forward recover".
func (s *Outbox) RecoverForwards(ctx context.Context, destination string, since, until time.Time) (int, error) {
	if until.IsZero() {
		until = time.Now().Add(time.Minute)
	}
	rows, err := s.pool.Query(ctx, `SELECT id FROM river_job
		WHERE kind = $1 AND state IN ('discarded', 'cancelled') AND args->>'destination' = $2
			AND finalized_at >= $3 AND finalized_at < $4
		ORDER BY id`, ForwardKind, destination, since, until)
	if err != nil {
		return 0, translate("recover forwards", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, translate("recover forwards", err)
	}
	// An earlier job's retry puts back the later versions it held: those
	// are not retried again. Every id is counted once, by its state at
	// the end.
	var errs []error
	for _, id := range ids {
		var state string
		if err := s.pool.QueryRow(ctx, `SELECT state FROM river_job WHERE id = $1`, id).Scan(&state); err != nil {
			errs = append(errs, translate(fmt.Sprintf("recover forward job %d", id), err))
			continue
		}
		if state != "discarded" && state != "cancelled" {
			continue
		}
		if _, err := s.RetryForward(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE id = ANY($1) AND state NOT IN ('discarded', 'cancelled')`,
		ids).Scan(&n); err != nil {
		errs = append(errs, translate("recover forwards: count", err))
	}
	return n, errors.Join(errs...)
}
