package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The delivery log (delivery_log, migration 00011) keeps every verified
// delivery that recorded nothing, so that nothing a provider sent is lost
// once it stops retrying: an event type its source does not record, a body
// the adapter or paylock's rules refused, a delivery that contradicts a
// recorded payment, an orphan event whose payment never came. A recorded
// payment is its own record: the happy path writes nothing here.

// DeliveryOutcome is what a kept delivery came to.
type DeliveryOutcome string

// The outcomes the delivery log keeps.
const (
	// DeliveryIgnored: the body carried nothing the source records (an
	// event type it does not list); answered 200.
	DeliveryIgnored DeliveryOutcome = "ignored"
	// DeliveryRefused: the adapter or paylock's input rules refused the
	// verified body (4xx other than a mismatch).
	DeliveryRefused DeliveryOutcome = "refused"
	// DeliveryMismatch: the body contradicts a recorded payment (422); the
	// review queue holds it too.
	DeliveryMismatch DeliveryOutcome = "mismatch"
	// DeliveryOrphan: a lifecycle event whose payment had not arrived
	// after Config.OrphanAfter (kept by SweepOrphans).
	DeliveryOrphan DeliveryOutcome = "orphan"
)

// DeliveryOutcomes are the outcomes in the order listings show them.
var DeliveryOutcomes = []DeliveryOutcome{DeliveryIgnored, DeliveryRefused, DeliveryMismatch, DeliveryOrphan}

// DefaultDeliveryLogCap is Config.DeliveryLogCap when 0: the distinct
// deliveries one source may add to the log in an hour.
const DefaultDeliveryLogCap = 1000

// ErrDeliveryLogFull means the source added Config.DeliveryLogCap distinct
// deliveries to the log within the last hour: the delivery was not kept
// (a repeat of a kept one is still counted on its row).
var ErrDeliveryLogFull = errors.New("store: the source's delivery log is full for this hour")

// Delivery is one kept delivery.
type Delivery struct {
	ID      int64
	Source  string
	EventID string // the provider's event id, when the body or headers name one
	// SignatureID is the delivery id the signature headers carried
	// (Standard Webhooks' webhook-id), given back to the adapter on
	// replay; "" when none.
	SignatureID   string
	Outcome       DeliveryOutcome
	Status        int // the HTTP status answered
	ProblemType   string
	ProblemDetail string
	Body          []byte
	// Headers are the request's headers that an allowlist let through:
	// never a signature, a secret or a cookie.
	Headers    map[string][]string
	RequestID  string
	ReceivedAt time.Time // first seen
	LastSeenAt time.Time
	Seen       int // deliveries of this body (the PSP's retries)
	// ReplayedAt is when a replay recorded it (zero: never);
	// ReplayResult what the latest replay came to.
	ReplayedAt   time.Time
	ReplayResult string
}

// Deliveries is the delivery log.
type Deliveries struct {
	*base
}

// keepRepeatSQL counts one more delivery of a body the log holds.
const keepRepeatSQL = `UPDATE delivery_log SET seen = seen + 1, last_seen_at = now(), outcome = $3, status = $4,
	problem_type = nullif($5, ''), problem_detail = nullif($6, '')
WHERE source = $1 AND body_sha256 = $2 RETURNING id`

// keepNewSQL inserts a body the log does not hold, unless the source added
// $13 distinct bodies within the last hour (no row is returned then).
const keepNewSQL = `INSERT INTO delivery_log (source, body_sha256, outcome, status, problem_type, problem_detail,
	event_id, signature_id, body, headers, request_id)
SELECT $1, $2, $3, $4, nullif($5, ''), nullif($6, ''), nullif($7, ''), nullif($8, ''), $9, $10, $11
WHERE (SELECT count(*) FROM delivery_log WHERE source = $1 AND received_at > now() - interval '1 hour') < $12
ON CONFLICT (source, body_sha256) DO UPDATE SET seen = delivery_log.seen + 1, last_seen_at = now()
RETURNING id`

// Keep adds d to the log and returns its row's id: a body the log holds
// for d's source is counted on its row (seen, last_seen_at, and the latest
// outcome), a new one inserted. It returns ErrDeliveryLogFull when the
// source added Config.DeliveryLogCap new bodies within the last hour (d is
// not kept), ErrUnavailable for transient failures.
func (s *Deliveries) Keep(ctx context.Context, d Delivery) (int64, error) {
	sum := sha256.Sum256(d.Body)
	body := d.Body
	if body == nil {
		body = []byte{}
	}
	var id int64
	err := s.pool.QueryRow(ctx, keepRepeatSQL, d.Source, sum[:], d.Outcome, d.Status, d.ProblemType, d.ProblemDetail).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, translate("keep delivery", err)
	}
	headers, err := json.Marshal(d.Headers)
	if err != nil {
		return 0, fmt.Errorf("store: keep delivery: headers: %w", err)
	}
	err = s.pool.QueryRow(ctx, keepNewSQL, d.Source, sum[:], d.Outcome, d.Status, d.ProblemType, d.ProblemDetail,
		d.EventID, d.SignatureID, body, headers, d.RequestID, s.cfg.DeliveryLogCap).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: source %q", ErrDeliveryLogFull, d.Source)
	}
	return id, translate("keep delivery", err)
}

// DeliveryFilter selects kept deliveries; zero fields select all.
type DeliveryFilter struct {
	Source  string
	Outcome DeliveryOutcome
	// Since and Until bound received_at: Since <= received_at < Until.
	Since, Until time.Time
	// ID, when set, selects that delivery alone.
	ID int64
	// Before, when set, pages: only deliveries with a smaller id (the last
	// id of the previous page).
	Before int64
	// Limit caps the deliveries returned (0: 100).
	Limit int
}

const deliveryColumns = `id, source, coalesce(event_id, ''), coalesce(signature_id, ''), outcome, status,
	coalesce(problem_type, ''), coalesce(problem_detail, ''), body, headers, request_id, received_at, last_seen_at, seen,
	replayed_at, coalesce(replay_result, '')`

func scanDelivery(row pgx.Row) (Delivery, error) {
	var d Delivery
	var headers []byte
	var replayed *time.Time
	err := row.Scan(&d.ID, &d.Source, &d.EventID, &d.SignatureID, &d.Outcome, &d.Status, &d.ProblemType,
		&d.ProblemDetail, &d.Body, &headers, &d.RequestID, &d.ReceivedAt, &d.LastSeenAt, &d.Seen, &replayed, &d.ReplayResult)
	if err != nil {
		return d, err
	}
	if replayed != nil {
		d.ReplayedAt = *replayed
	}
	if err := json.Unmarshal(headers, &d.Headers); err != nil {
		return d, fmt.Errorf("store: delivery %d: headers: %w", d.ID, err)
	}
	return d, nil
}

// Deliveries lists the kept deliveries f selects, newest first.
func (s *Deliveries) Deliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	var since, until *time.Time
	if !f.Since.IsZero() {
		since = &f.Since
	}
	if !f.Until.IsZero() {
		until = &f.Until
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM delivery_log
		WHERE ($1 = '' OR source = $1) AND ($2 = '' OR outcome = $2)
		  AND ($3::timestamptz IS NULL OR received_at >= $3) AND ($4::timestamptz IS NULL OR received_at < $4)
		  AND ($5::bigint = 0 OR id = $5) AND ($6::bigint = 0 OR id < $6)
		ORDER BY id DESC LIMIT $7`, f.Source, string(f.Outcome), since, until, f.ID, f.Before, f.Limit)
	if err != nil {
		return nil, translate("list deliveries", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, translate("list deliveries", err)
		}
		out = append(out, d)
	}
	return out, translate("list deliveries", rows.Err())
}

// Delivery reads one kept delivery: ErrNotFound when the log holds no such
// id.
func (s *Deliveries) Delivery(ctx context.Context, id int64) (Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM delivery_log WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("%w: delivery %d", ErrNotFound, id)
	}
	return d, translate("read delivery", err)
}

// MarkReplayed notes what a replay of delivery id came to: result is the
// pipeline's ("processed", "duplicate", "ignored", "refused", ...), and
// recorded says the delivery's records are now stored (ReplayedAt is set
// once, by the first replay that recorded). ErrNotFound when the log holds
// no such id.
func (s *Deliveries) MarkReplayed(ctx context.Context, id int64, result string, recorded bool) error {
	tag, err := s.pool.Exec(ctx, `UPDATE delivery_log SET replay_result = $2,
		replayed_at = CASE WHEN $3 THEN coalesce(replayed_at, now()) ELSE replayed_at END WHERE id = $1`, id, result, recorded)
	if err != nil {
		return translate("mark delivery replayed", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: delivery %d", ErrNotFound, id)
	}
	return nil
}
