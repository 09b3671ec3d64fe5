package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// A payment.recorded message whose every destination takes it through
// the express lane (outbox_express.go) need not make its payment's
// recording a transaction: its lane rows are made before the insert
// (prerouteRecorded) and inserted by the recording statement itself, a
// data-modifying CTE that inserts only the rows of the payments it
// recorded (withLaneSQL). The recording stays one statement in
// autocommit, one round trip, whose answer is the commit's: the payment
// and its messages commit together or not at all, as in the transaction
// they replace (BEGIN, the insert, the lane's insert, COMMIT).
//
// The message's payment is encoded before the database sets its
// received_at: its args hold the zero time at a known offset, which the
// statement overwrites with the received_at it recorded (withLaneSQL), so
// that the row is, byte for byte, what any paylock's drainer expects.

// expressLane is the express lane's rows of a payment's payment.recorded
// message, made before the payment is recorded: none when no destination
// takes it.
type expressLane struct {
	rows []expressRow
	// at is the offset, in each row's body, or its args when it has none,
	// of the payment's received_at (the zero time, receivedAtZero); -1
	// when it carries none.
	at []int
	// args are the rows' args, for the messages this process takes at
	// birth (Outbox.TakeExpress).
	args []ForwardArgs
}

// receivedAtZero is how a carried payment's received_at is encoded before
// it is recorded, followed by the payload, which comes next in
// ForwardedPayment: the first match in a row's args is its received_at,
// since no string JSON escapes can hold its quotes and the payload
// follows it.
const (
	receivedAtZero     = "0001-01-01T00:00:00Z"
	receivedAtZeroNext = `","payload":`
)

// receivedAtOffset is the offset in args of the zero received_at of the
// payment it carries, -1 when it carries none.
func receivedAtOffset(args []byte) int {
	i := bytes.Index(args, []byte(`"received_at":"`+receivedAtZero+receivedAtZeroNext))
	if i < 0 {
		return -1
	}
	return i + len(`"received_at":"`)
}

// prerouteRecorded makes the express lane's rows of p's payment.recorded
// message, before p is recorded. It returns nil when the message is to be
// routed in the recording transaction instead (recordHook): p's source
// forwards nothing, the lane is off, a destination takes it as a River
// job (a single attempt), the route needs p as recorded
// (ErrRouteAfterRecord), or the route or an encoding failed: routed again
// after the insert, the failure then meets only a payment newly recorded,
// never a redelivery of one already recorded. With a renderer (Render),
// the rows carry the message's body, rendered once for every destination,
// and their args no payment (laneBody).
func (s *Outbox) prerouteRecorded(ctx context.Context, p Payment) *expressLane {
	route := s.routeOf(p.Source)
	if route == nil || !s.cfg.ExpressForwards || p.TransactionID == "" || p.Lifecycle != nil {
		return nil
	}
	args := ForwardArgs{ID: PaymentForwardID(p.Source, p.TransactionID), Type: ForwardPaymentRecorded,
		Source: p.Source, TransactionID: p.TransactionID, Payment: carriedPayload(p)}
	targets, err := route(ctx, args, &p)
	if err != nil {
		return nil
	}
	body, at := s.laneBody(args, p)
	if body != nil {
		args.Payment = nil // the body says it: a River job made of the row reads it
	}
	lane := &expressLane{rows: make([]expressRow, 0, len(targets)), at: make([]int, 0, len(targets))}
	for _, t := range targets {
		n := t.MaxAttempts
		if n <= 0 {
			n = s.cfg.ForwardMaxAttempts
		}
		if t.Destination == "" || n <= 1 {
			return nil // refused, or a River job from the start (insertForwardAttempts)
		}
		a := args
		a.Destination, a.Fingerprint = t.Destination, t.Fingerprint
		row, err := expressRowOf(ctx, a, n)
		if err != nil {
			return nil
		}
		if body == nil {
			at = receivedAtOffset(row.args)
		}
		row.body = body
		lane.rows, lane.at, lane.args = append(lane.rows, row), append(lane.at, at), append(lane.args, a)
	}
	return lane
}

// laneBody is the body of args's message of p (not yet recorded) as the
// renderer renders it (Render), and the offset in it of p's zero
// received_at; nil when there is no renderer, args carries no payment (p's
// payload is too large: the drainer reads it) or the renderer failed or
// wrote no zero received_at where the statement can write the recorded
// one (the row's args then carry the payment, as without a renderer).
func (s *Outbox) laneBody(args ForwardArgs, p Payment) ([]byte, int) {
	r := s.render.Load()
	if r == nil || args.Payment == nil {
		return nil, -1
	}
	body, err := (*r)(args, p)
	if err != nil {
		return nil, -1
	}
	at := receivedAtOffset(body)
	if at < 0 {
		return nil, -1
	}
	return body, at
}

// withLaneSQL is insert (insertManySQL or insertManyAccountSQL, whose
// last parameter is $last) with the express lane's rows of the payments
// it records, its parameters $last+1 to $last+11: the rows' destination,
// source, transaction id, message id, type, args, max attempts,
// traceparent, body (NULL: none) and the offset of the received_at in the
// body, or in args when the row has no body (-1: none), in the order
// their ids follow, then the lease in seconds of the rows claimed at
// birth by the process that records them (Outbox.TakeExpress; 0: none,
// the rows wait for a claim). The received_at the statement recorded
// overwrites the zero time at that offset, in the form encoding/json
// writes it (UTC, RFC 3339 with the fraction's trailing zeros cut, as
// time.RFC3339Nano). A row whose payment the arbiter held is not
// inserted: its message was made when the payment was. Each payment
// recorded comes back with its rows' ids and destinations, and when they
// were made.
func withLaneSQL(insert string, last int) string {
	p := make([]any, 10)
	for i := range p {
		p[i] = last + 1 + i
	}
	lease := fmt.Sprintf("$%d::float8", last+11)
	at := `overlay(%s PLACING convert_to(` + receivedAtText("ins.received_at") + `, 'UTF8')
			FROM f.r + 1 FOR ` + fmt.Sprint(len(receivedAtZero)) + `)`
	return "WITH ins AS (" + strings.TrimSpace(insert) + `
), lane AS (
	INSERT INTO forward_express (destination, source, transaction_id, message_id, type, args, max_attempts, traceparent, body,
		claimed_until, claims)
	SELECT f.d, f.s, f.t, f.m, f.y,
		CASE WHEN f.r >= 0 AND f.b IS NULL THEN ` + fmt.Sprintf(at, "f.a") + ` ELSE f.a END,
		f.n, f.p,
		CASE WHEN f.r >= 0 AND f.b IS NOT NULL THEN ` + fmt.Sprintf(at, "f.b") + ` ELSE f.b END,
		CASE WHEN ` + lease + ` > 0 THEN now() + make_interval(secs => ` + lease + `) END,
		CASE WHEN ` + lease + ` > 0 THEN 1 ELSE 0 END
	FROM unnest(` + fmt.Sprintf("$%d::text[], $%d::text[], $%d::text[], $%d::text[], $%d::text[], $%d::bytea[], $%d::int[], $%d::text[], $%d::bytea[], $%d::int[]", p...) + `)
		WITH ORDINALITY AS f(d, s, t, m, y, a, n, p, b, r, o)
	JOIN ins ON ins.source = f.s AND ins.transaction_id = f.t
	ORDER BY f.o
	RETURNING id, source, transaction_id, destination, created_at
)
SELECT ins.source, ins.transaction_id, ins.received_at, coalesce(l.ids, '{}'), coalesce(l.dests, '{}'), coalesce(l.made, ins.received_at)
FROM ins LEFT JOIN (
	SELECT source, transaction_id, array_agg(id) AS ids, array_agg(destination) AS dests, min(created_at) AS made
	FROM lane GROUP BY source, transaction_id
) l ON l.source = ins.source AND l.transaction_id = ins.transaction_id`
}

// receivedAtText is the SQL of the text of the timestamptz column as
// encoding/json writes a time.Time in UTC (time.RFC3339Nano: the
// fraction's trailing zeros cut, none when it is zero), to the
// microsecond, Postgres's precision.
func receivedAtText(column string) string {
	return `regexp_replace(to_char(` + column + ` AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '\.?0+$', '') || 'Z'`
}

var (
	insertManyLaneSQL        = withLaneSQL(insertManySQL, 6)
	insertManyAccountLaneSQL = withLaneSQL(insertManyAccountSQL, 7)
)

// laneArgs are the parameters of withLaneSQL's lane for rows, nil when no
// row carries lane rows.
func laneArgs(rows []*batchReq) []any {
	var lane []expressRow
	var at []int32
	for _, r := range rows {
		if r.p.lane != nil {
			lane = append(lane, r.p.lane.rows...)
			for _, o := range r.p.lane.at {
				at = append(at, int32(o))
			}
		}
	}
	if lane == nil {
		return nil
	}
	return append(expressArrays(lane), at, 0.0)
}

// born appends to ms the messages of the lane's rows, as the statement
// that recorded their payment inserted them, claimed at birth
// (Outbox.TakeExpress): ids and dests are the rows' ids and destinations,
// receivedAt the payment's as recorded, made the rows' created_at. A row
// the statement did not return (none, as the rows of a payment are all
// inserted or none) is left out.
func (l *expressLane) born(ms []ExpressMessage, ids []int64, dests []string, receivedAt, made time.Time) []ExpressMessage {
	var body []byte // the rows' one body, its received_at written in
	for i, id := range ids {
		j := slices.IndexFunc(l.rows, func(r expressRow) bool { return r.destination == dests[i] })
		if j < 0 {
			continue
		}
		row, a := l.rows[j], l.args[j]
		m := ExpressMessage{ID: id, Args: a, MaxAttempts: row.maxAttempts, CreatedAt: made, Claims: 1}
		switch at := l.at[j]; {
		case row.body != nil && at >= 0:
			if body == nil {
				body = withReceivedAt(row.body, at, receivedAt)
			}
			m.Body = body
		case a.Payment != nil:
			carried := *a.Payment
			carried.ReceivedAt = receivedAt
			m.Args.Payment = &carried
		}
		if row.traceparent != "" {
			m.Trace = propagation.MapCarrier{"traceparent": row.traceparent}
		}
		ms = append(ms, m)
	}
	return ms
}

// withReceivedAt is body with receivedAt, as encoding/json writes it, in
// place of the zero time at offset at: what the recording statement
// wrote into the row (withLaneSQL).
func withReceivedAt(body []byte, at int, receivedAt time.Time) []byte {
	out := make([]byte, 0, len(body)+len(time.RFC3339Nano))
	out = append(out, body[:at]...)
	out = receivedAt.UTC().AppendFormat(out, time.RFC3339Nano)
	return append(out, body[at+len(receivedAtZero):]...)
}
