package store

import (
	"bytes"
	"context"
	"fmt"
	"strings"
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
	// at is the offset, in each row's args, of the carried payment's
	// received_at (the zero time, receivedAtZero); -1 when it carries
	// none.
	at []int
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
// never a redelivery of one already recorded.
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
		lane.rows, lane.at = append(lane.rows, row), append(lane.at, receivedAtOffset(row.args))
	}
	return lane
}

// withLaneSQL is insert (insertManySQL or insertManyAccountSQL, whose
// last parameter is $last) with the express lane's rows of the payments
// it records, its parameters $last+1 to $last+9: the rows' destination,
// source, transaction id, message id, type, args, max attempts,
// traceparent and the offset of the received_at in args (-1: none), in
// the order their ids follow. The received_at the statement recorded
// overwrites the zero time at that offset, in the form encoding/json
// reads back (UTC, microseconds). A row whose payment the arbiter held is
// not inserted: its message was made when the payment was.
func withLaneSQL(insert string, last int) string {
	p := make([]any, 9)
	for i := range p {
		p[i] = last + 1 + i
	}
	return "WITH ins AS (" + strings.TrimSpace(insert) + `
), lane AS (
	INSERT INTO forward_express (destination, source, transaction_id, message_id, type, args, max_attempts, traceparent)
	SELECT f.d, f.s, f.t, f.m, f.y,
		CASE WHEN f.r >= 0 THEN overlay(f.a PLACING convert_to(
			to_char(ins.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'UTF8') FROM f.r + 1 FOR ` +
		fmt.Sprint(len(receivedAtZero)) + `)
		ELSE f.a END,
		f.n, f.p
	FROM unnest(` + fmt.Sprintf("$%d::text[], $%d::text[], $%d::text[], $%d::text[], $%d::text[], $%d::bytea[], $%d::int[], $%d::text[], $%d::int[]", p...) + `)
		WITH ORDINALITY AS f(d, s, t, m, y, a, n, p, r, o)
	JOIN ins ON ins.source = f.s AND ins.transaction_id = f.t
	ORDER BY f.o
)
SELECT source, transaction_id, received_at FROM ins`
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
	return append(expressArrays(lane), at)
}
