package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// DefaultDeliveryLogCapBytes is Config.DeliveryLogCapBytes when 0: the
// body bytes one source may add to the log in an hour.
const DefaultDeliveryLogCapBytes int64 = 64 << 20

// maxOverflowTypes bounds the rows a capped source keeps beyond its cap:
// the newest ignored delivery of each of at most this many event types.
const maxOverflowTypes = 64

// maxEventType is the longest event type a delivery is kept under.
const maxEventType = 128

// ErrDeliveryLogFull means the source added Config.DeliveryLogCap distinct
// deliveries, or Config.DeliveryLogCapBytes bytes of bodies, to the log
// within the current hour: the delivery was not kept (a repeat of a kept
// one is still counted on its row).
var ErrDeliveryLogFull = errors.New("store: the source's delivery log is full for this hour")

// Delivery is one kept delivery.
type Delivery struct {
	ID      int64
	Source  string
	EventID string // the provider's event id, when the body or headers name one
	// EventType is what the delivery was (Stripe's type, Adyen's
	// eventCode); "" when the body names none. A capped source still
	// keeps the newest ignored delivery of each type (Overflow).
	EventType string
	// SignatureID is the delivery id the signature headers carried
	// (Standard Webhooks' webhook-id), given back to the adapter on
	// replay; "" when none.
	SignatureID   string
	Outcome       DeliveryOutcome
	Status        int // the HTTP status answered
	ProblemType   string
	ProblemDetail string
	// Key identifies the delivery in its source's log (Keep): a delivery
	// of the same key is a repeat, counted on the kept row. Nil is the
	// SHA-256 of Body; a provider that keeps only what it signs gives the
	// hash of the signed fields, so that one signed item is one row however
	// it is wrapped. Listings do not read it.
	Key []byte
	// Body is the body as kept (redacted, or re-serialised from its
	// signed content); listings leave it nil (BodyBytes is its size).
	Body      []byte
	BodyBytes int
	// Headers are the request's headers that an allowlist let through:
	// never a signature, a secret or a cookie.
	Headers    map[string][]string
	RequestID  string
	ReceivedAt time.Time // first seen: retention counts from it
	LastSeenAt time.Time
	Seen       int // deliveries of this body (the PSP's retries)
	// Overflow: kept while its source was over its cap, as the newest
	// ignored delivery of its EventType (replaced by the next one).
	Overflow bool
	// ReplayedAt is when a replay recorded it (zero: never);
	// ReplayResult what the latest replay came to.
	ReplayedAt   time.Time
	ReplayResult string
}

// Deliveries is the delivery log.
type Deliveries struct {
	*base
}

// keepRepeatSQL counts one more delivery of a key the log holds.
const keepRepeatSQL = `UPDATE delivery_log SET seen = seen + 1, last_seen_at = now(), outcome = $3, status = $4,
	problem_type = nullif($5, ''), problem_detail = nullif($6, '')
WHERE source = $1 AND body_sha256 = $2 RETURNING id`

// keepBudgetSQL takes $2 bytes and one row of source $1's budget for the
// current hour, under the budget row's lock (held until COMMIT), unless
// the hour's rows reached $3 or its bytes would pass $4: then no row is
// returned. A new hour starts the budget afresh.
const keepBudgetSQL = `INSERT INTO delivery_log_budget AS b (source, window_start, rows, bytes)
VALUES ($1, date_trunc('hour', now()), 1, $2)
ON CONFLICT (source) DO UPDATE SET
	rows = CASE WHEN b.window_start = excluded.window_start THEN b.rows + 1 ELSE 1 END,
	bytes = CASE WHEN b.window_start = excluded.window_start THEN b.bytes + excluded.bytes ELSE excluded.bytes END,
	window_start = excluded.window_start
WHERE b.window_start <> excluded.window_start OR (b.rows < $3 AND b.bytes + excluded.bytes <= $4)
RETURNING rows`

// keepNewSQL inserts a key the log does not hold (no row is returned when
// it does).
const keepNewSQL = `INSERT INTO delivery_log (source, body_sha256, outcome, status, problem_type, problem_detail,
	event_id, signature_id, body, headers, request_id, event_type)
VALUES ($1, $2, $3, $4, nullif($5, ''), nullif($6, ''), nullif($7, ''), nullif($8, ''), $9, $10, $11, nullif($12, ''))
ON CONFLICT (source, body_sha256) DO NOTHING
RETURNING id`

// keepOverflowSQL keeps an ignored delivery of a capped source as the
// newest of its event type $12: it replaces the type's overflow row, or
// adds one while the source has fewer than $13 of them.
const keepOverflowSQL = `INSERT INTO delivery_log (source, body_sha256, outcome, status, problem_type, problem_detail,
	event_id, signature_id, body, headers, request_id, event_type, overflow)
SELECT $1, $2, $3, $4, nullif($5, ''), nullif($6, ''), nullif($7, ''), nullif($8, ''), $9, $10, $11, $12, true
WHERE EXISTS (SELECT 1 FROM delivery_log WHERE source = $1 AND overflow AND event_type = $12)
   OR (SELECT count(*) FROM delivery_log WHERE source = $1 AND overflow) < $13
ON CONFLICT (source, event_type) WHERE overflow DO UPDATE SET body_sha256 = excluded.body_sha256,
	outcome = excluded.outcome, status = excluded.status, problem_type = NULL, problem_detail = NULL,
	event_id = excluded.event_id, signature_id = excluded.signature_id, body = excluded.body,
	headers = excluded.headers, request_id = excluded.request_id, received_at = now(), last_seen_at = now(),
	seen = 1, replayed_at = NULL, replay_result = NULL
RETURNING id`

// Keep adds d to the log and returns its row's id: a delivery of a key
// the log holds for d's source (d.Key, else the SHA-256 of d.Body) is
// counted on its row (seen, last_seen_at, and the latest outcome); a new
// one is inserted if the source's budget for the current hour
// (Config.DeliveryLogCap rows, Config.DeliveryLogCapBytes bytes) allows,
// taken atomically under a per-source row lock. Over the budget, an
// ignored delivery with an EventType still replaces the kept newest of its
// type (Overflow), so that a flood never hides the latest real event of a
// type; anything else returns ErrDeliveryLogFull (d is not kept).
// ErrUnavailable for transient failures.
func (s *Deliveries) Keep(ctx context.Context, d Delivery) (int64, error) {
	key := d.Key
	if key == nil {
		sum := sha256.Sum256(d.Body)
		key = sum[:]
	}
	if len(d.EventType) > maxEventType {
		d.EventType = ""
	}
	body := d.Body
	if body == nil {
		body = []byte{}
	}
	headers, err := json.Marshal(d.Headers)
	if err != nil {
		return 0, fmt.Errorf("store: keep delivery: headers: %w", err)
	}
	for range 3 { // a concurrent insert of the same key is a repeat
		var id int64
		err := s.pool.QueryRow(ctx, keepRepeatSQL, d.Source, key, d.Outcome, d.Status, d.ProblemType, d.ProblemDetail).Scan(&id)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, translate("keep delivery", err)
		}
		id, err = s.keepNew(ctx, d, key, body, headers)
		switch {
		case err == nil:
			return id, nil
		case errors.Is(err, errKeyTaken):
			continue
		case errors.Is(err, ErrDeliveryLogFull) && d.Outcome == DeliveryIgnored && d.EventType != "":
			id, err = s.keepOverflow(ctx, d, key, body, headers)
			if errors.Is(err, errKeyTaken) {
				continue
			}
			return id, err
		}
		return 0, err
	}
	return 0, fmt.Errorf("%w: keep delivery: its key kept changing hands", ErrUnavailable)
}

// errKeyTaken: another delivery of the same key was kept meanwhile.
var errKeyTaken = errors.New("store: delivery key taken")

// keepNew inserts d under key within the source's budget, in one
// transaction: the budget's row lock makes the cap exact under
// concurrency, and a key inserted meanwhile gives the budget back
// (errKeyTaken).
func (s *Deliveries) keepNew(ctx context.Context, d Delivery, key, body, headers []byte) (int64, error) {
	if int64(len(body)) > s.cfg.DeliveryLogCapBytes {
		return 0, fmt.Errorf("%w: source %q: a body of %d bytes is over the hour's %d", ErrDeliveryLogFull, d.Source, len(body), s.cfg.DeliveryLogCapBytes)
	}
	var id int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var rows int
		err := tx.QueryRow(ctx, keepBudgetSQL, d.Source, int64(len(body)), s.cfg.DeliveryLogCap, s.cfg.DeliveryLogCapBytes).Scan(&rows)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: source %q", ErrDeliveryLogFull, d.Source)
		}
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, keepNewSQL, d.Source, key, d.Outcome, d.Status, d.ProblemType, d.ProblemDetail,
			d.EventID, d.SignatureID, body, headers, d.RequestID, d.EventType).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return errKeyTaken
		}
		return err
	})
	if errors.Is(err, ErrDeliveryLogFull) || errors.Is(err, errKeyTaken) {
		return 0, err
	}
	return id, translate("keep delivery", err)
}

// keepOverflow keeps d as the newest ignored delivery of its type while
// its source is over its cap.
func (s *Deliveries) keepOverflow(ctx context.Context, d Delivery, key, body, headers []byte) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, keepOverflowSQL, d.Source, key, d.Outcome, d.Status, d.ProblemType, d.ProblemDetail,
		d.EventID, d.SignatureID, body, headers, d.RequestID, d.EventType, maxOverflowTypes).Scan(&id)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, fmt.Errorf("%w: source %q (and %d event types kept beyond it)", ErrDeliveryLogFull, d.Source, maxOverflowTypes)
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "delivery_log_body_key":
		return 0, errKeyTaken
	}
	return id, translate("keep delivery beyond the cap", err)
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

// deliveryListColumns are a listing's: never the body, only its size
// (octet_length reads a stored value's size without fetching it).
const deliveryListColumns = `id, source, coalesce(event_id, ''), coalesce(event_type, ''), coalesce(signature_id, ''),
	outcome, status, coalesce(problem_type, ''), coalesce(problem_detail, ''), octet_length(body), request_id,
	received_at, last_seen_at, seen, overflow, replayed_at, coalesce(replay_result, '')`

// deliveryColumns are one delivery's: the listing's, its body and its
// headers.
const deliveryColumns = deliveryListColumns + `, body, headers`

// scanDelivery reads a row of deliveryListColumns, or with full of
// deliveryColumns.
func scanDelivery(row pgx.Row, full bool) (Delivery, error) {
	var d Delivery
	var headers []byte
	var replayed *time.Time
	dest := []any{&d.ID, &d.Source, &d.EventID, &d.EventType, &d.SignatureID, &d.Outcome, &d.Status, &d.ProblemType,
		&d.ProblemDetail, &d.BodyBytes, &d.RequestID, &d.ReceivedAt, &d.LastSeenAt, &d.Seen, &d.Overflow, &replayed, &d.ReplayResult}
	if full {
		dest = append(dest, &d.Body, &headers)
	}
	if err := row.Scan(dest...); err != nil {
		return d, err
	}
	if replayed != nil {
		d.ReplayedAt = *replayed
	}
	if !full {
		return d, nil
	}
	if err := json.Unmarshal(headers, &d.Headers); err != nil {
		return d, fmt.Errorf("store: delivery %d: headers: %w", d.ID, err)
	}
	return d, nil
}

// Deliveries lists the kept deliveries f selects, newest first, without
// their bodies and headers (Body nil, BodyBytes set): Delivery reads one
// whole.
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
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryListColumns+` FROM delivery_log
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
		d, err := scanDelivery(rows, false)
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
	d, err := scanDelivery(s.pool.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM delivery_log WHERE id = $1`, id), true)
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
