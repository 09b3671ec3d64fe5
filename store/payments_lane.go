package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// A payment.recorded message whose every destination takes it through
// the express lane (outbox_express.go) need not make its payment's
// recording a transaction: its lane rows are made before the insert
// (prerouteRecorded) and inserted by the recording statement itself, a
// data-modifying CTE that inserts only the rows of the payments it
// recorded (insertManyLane). The recording stays one statement in
// autocommit, one round trip, whose answer is the commit's: the payment
// and its messages commit together or not at all, as in the transaction
// they replace (BEGIN, the insert, the lane's insert, COMMIT).
//
// The message's payment carries no received_at then: the row takes its
// created_at, which the same statement sets to the same now() (the
// statement's transaction's start), when it is claimed (ClaimExpress).

// expressLane is the express lane's rows of a payment's payment.recorded
// message, made before the payment is recorded: none when no destination
// takes it.
type expressLane struct {
	rows []expressRow
}

// prerouteRecorded makes the express lane's rows of p's payment.recorded
// message, before p is recorded. It returns nil when the message must be
// routed in the recording transaction instead (recordHook): p's source
// forwards nothing, the lane is off, a destination takes it as a River
// job (a single attempt), or the route needs p as recorded
// (ErrRouteAfterRecord). A route's error is returned as the hook would
// meet it: nothing is then recorded.
func (s *Outbox) prerouteRecorded(ctx context.Context, p Payment) (*expressLane, error) {
	route := s.routeOf(p.Source)
	if route == nil || !s.cfg.ExpressForwards || p.TransactionID == "" || p.Lifecycle != nil {
		return nil, nil
	}
	args := ForwardArgs{ID: PaymentForwardID(p.Source, p.TransactionID), Type: ForwardPaymentRecorded,
		Source: p.Source, TransactionID: p.TransactionID, Payment: carriedPayload(p)}
	targets, err := route(ctx, args, &p)
	switch {
	case errors.Is(err, ErrRouteAfterRecord):
		return nil, nil
	case err != nil:
		return nil, forwardFailed(fmt.Errorf("store: route forward %s: %w", args.ID, err))
	}
	lane := &expressLane{rows: make([]expressRow, 0, len(targets))}
	for _, t := range targets {
		if t.Destination == "" {
			return nil, forwardFailed(fmt.Errorf("%w: a forward target without a destination", ErrForward))
		}
		n := t.MaxAttempts
		if n <= 0 {
			n = s.cfg.ForwardMaxAttempts
		}
		if n <= 1 {
			return nil, nil // a River job from the start (insertForwardAttempts)
		}
		a := args
		a.Destination, a.Fingerprint = t.Destination, t.Fingerprint
		row, err := expressRowOf(ctx, a, n)
		if err != nil {
			return nil, forwardFailed(err)
		}
		lane.rows = append(lane.rows, row)
	}
	return lane, nil
}

// withLaneSQL is insert (insertManySQL or insertManyAccountSQL, whose
// last parameter is $last) with the express lane's rows of the payments
// it records, its parameters $last+1 to $last+8: the rows' destination,
// source, transaction id, message id, type, args, max attempts and
// traceparent, in the order their ids follow. A row whose payment the
// arbiter held is not inserted: its message was made when the payment was.
func withLaneSQL(insert string, last int) string {
	p := make([]any, 8)
	for i := range p {
		p[i] = last + 1 + i
	}
	return "WITH ins AS (" + strings.TrimSpace(insert) + `
), lane AS (
	INSERT INTO forward_express (destination, source, transaction_id, message_id, type, args, max_attempts, traceparent)
	SELECT f.d, f.s, f.t, f.m, f.y, f.a, f.n, f.p
	FROM unnest(` + fmt.Sprintf("$%d::text[], $%d::text[], $%d::text[], $%d::text[], $%d::text[], $%d::bytea[], $%d::int[], $%d::text[]", p...) + `)
		WITH ORDINALITY AS f(d, s, t, m, y, a, n, p, o)
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
	for _, r := range rows {
		if r.p.lane != nil {
			lane = append(lane, r.p.lane.rows...)
		}
	}
	if lane == nil {
		return nil
	}
	return expressArrays(lane)
}
