package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/propagation"
)

// The express lane of the outbox (table forward_express, migration 00018):
// with Config.ExpressForwards, a message's job is not a River job at
// first but a row of its own, one per message and destination, inserted
// in the transaction that makes the message like River's would be. Package
// forward's drainer claims the rows in batches (ClaimExpress), sends each
// once, and deletes those their destination took (DoneExpress) in one
// statement per batch. Every other case goes to River, which keeps
// everything it did: a message whose attempt failed, whose destination is
// failing or parked, whose payment has an earlier message waiting in
// River, that is paced, or that this replica cannot send (its destination
// defined otherwise) is handed over (HandOverExpress): its River job is
// inserted and its row deleted in one transaction, and from then on it
// is a forward job like any other (retries, the breaker, order, listing,
// retry and replay).
//
// What River cost for the message that is delivered at once, the common
// case: an insert into river_job and its indexes, then two updates of the
// row (running, completed) that each write every index again. A row here
// is inserted into a table with one secondary index, claimed by an update
// that touches no index (HOT), and deleted.
//
// The rows of one payment to one destination go in order: a row is
// claimed only when no earlier row of its order_key and destination is
// left, and a claimed row whose payment has a forward job in River not yet
// completed is handed over rather than sent, so that River's order
// (outbox_order.go) puts it after that job.

// ExpressMessage is a message of the express lane as a drainer claimed it.
type ExpressMessage struct {
	ID          int64
	Args        ForwardArgs
	MaxAttempts int
	CreatedAt   time.Time
	// Claims is how often the row was claimed, this claim included: more
	// than one when a drainer's lease ran out (a replica that died with
	// it), and the message may then have been sent already.
	Claims int
	// Held says that its payment has a forward job to its destination in
	// River not completed: it must go after it, handed over to River.
	Held bool
	// Trace is the W3C trace context of the delivery that made the
	// message (traceparent), empty when none.
	Trace propagation.MapCarrier
	// Body, when set, is the message's body as the replica that recorded
	// its payment rendered it (Outbox.Render): the drainer sends it as it
	// is. Its Args then carry no payment (a River job made of them reads
	// it). Nil: the message is built from Args.
	Body []byte
}

// ExpressHandover is a claimed message to hand over to River
// (HandOverExpress).
type ExpressHandover struct {
	Message ExpressMessage
	// At is when its job is due; zero: at once.
	At time.Time
	// Attempted says that the lane made an attempt that failed: the job
	// then gets one attempt fewer (never less than one).
	Attempted bool
	// Refused, when set, is the destination's refusal for good of the
	// lane's attempt (package forward's ErrPermanent): the job carries it
	// (JobExpressRefusal), and its worker gives it up without sending it
	// again, as if River had run that attempt.
	Refused string
}

// expressMark is what a job handed over by the lane notes in its metadata.
type expressMark struct {
	Refused string `json:"refused,omitempty"`
}

// JobExpressRefusal returns the refusal for good that the express lane's
// attempt of a job met (ExpressHandover.Refused), "" when none.
func JobExpressRefusal(metadata []byte) string {
	var m struct {
		Mark expressMark `json:"paylock_express"`
	}
	if len(metadata) > 0 {
		_ = json.Unmarshal(metadata, &m) // River's JSON; anything else carries no mark
	}
	return m.Mark.Refused
}

// expressRow is one row of the express lane to insert.
type expressRow struct {
	destination, source, transactionID, messageID, typ, traceparent string
	args, body                                                      []byte
	maxAttempts                                                     int
}

// expressRowOf encodes args's row with maxAttempts attempts, its trace
// context taken from ctx. A payment's message is ordered by its payment
// (River orders payments' messages only).
func expressRowOf(ctx context.Context, args ForwardArgs, maxAttempts int) (expressRow, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return expressRow{}, fmt.Errorf("store: forward %s: encode: %w", args.ID, err)
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	r := expressRow{destination: args.Destination, messageID: args.ID, typ: args.Type, traceparent: carrier.Get("traceparent"),
		args: raw, maxAttempts: maxAttempts}
	if args.TransactionID != "" {
		r.source, r.transactionID = args.Source, args.TransactionID
	}
	return r, nil
}

const insertExpressSQL = `INSERT INTO forward_express (destination, source, transaction_id, message_id, type, args, max_attempts, traceparent, body)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::int[], $8::text[], $9::bytea[])`

// expressArrays are rows as the parameters of insertExpressSQL: their
// columns' arrays.
func expressArrays(rows []expressRow) []any {
	n := len(rows)
	dest, src, txn, id, typ, args, attempts, trace, body := make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([][]byte, n), make([]int32, n), make([]string, n), make([][]byte, n)
	for i, r := range rows {
		dest[i], src[i], txn[i], id[i], typ[i], args[i], attempts[i], trace[i], body[i] = r.destination, r.source, r.transactionID,
			r.messageID, r.typ, r.args, int32(r.maxAttempts), r.traceparent, r.body // a nil body is NULL
	}
	return []any{dest, src, txn, id, typ, args, attempts, trace, body}
}

// insertExpress inserts rows in tx, in one statement, in their order.
func insertExpress(ctx context.Context, tx pgx.Tx, rows []expressRow) error {
	if len(rows) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, insertExpressSQL, expressArrays(rows)...); err != nil {
		return translate("insert forward (express)", err)
	}
	return nil
}

// claimExpressSQL deletes the rows $3 (delivered since the last claim),
// noting them in forward_sent, then claims up to $1 rows, oldest first, for $2 seconds: those
// unclaimed or whose lease ran out, and of a payment's rows to a
// destination only the oldest (the rows deleted here still count: the
// statement sees the table as it stood before it). SKIP LOCKED lets
// drainers claim at once without waiting for each other. held says that
// the row's payment has a forward job to the same destination in River
// not completed (River's order index, forwardOrderIndex, keeps it to a
// probe per row).
const claimExpressSQL = `
WITH done AS (
	DELETE FROM forward_express WHERE id = ANY($3::bigint[])
	RETURNING message_id, type, destination, source, transaction_id, created_at
), sent AS (
	INSERT INTO forward_sent (message_id, type, destination, source, transaction_id, created_at)
	SELECT * FROM done
), c AS (
	SELECT o.id FROM forward_express o
	WHERE (o.claimed_until IS NULL OR o.claimed_until < now())
		AND (o.transaction_id = '' OR NOT EXISTS (
			SELECT 1 FROM forward_express e
			WHERE e.destination = o.destination AND e.source = o.source AND e.transaction_id = o.transaction_id
				AND e.id < o.id))
	ORDER BY o.id
	LIMIT $1
	FOR UPDATE SKIP LOCKED
)
UPDATE forward_express o SET claimed_until = now() + make_interval(secs => $2), claims = o.claims + 1
WHERE o.id = ANY(ARRAY(SELECT id FROM c))
RETURNING o.id, o.args, o.max_attempts, o.created_at, o.claims, o.traceparent, o.body,
	o.transaction_id <> '' AND EXISTS (
		SELECT 1 FROM river_job j
		WHERE j.kind = 'forward' AND j.state <> 'completed'
			AND (j.args->>'transaction_id') = o.transaction_id AND (j.args->>'source') = o.source
			AND coalesce(j.args->>'destination', '') = o.destination)`

// ClaimExpress deletes the messages done of the express lane, which
// their destinations took, then claims up to limit messages, oldest
// first, each for lease: no other drainer claims them until the lease
// runs out. The caller sends each and then deletes it (done of its next
// claim, or DoneExpress) or hands it over to River (HandOverExpress); one
// it neither sends nor hands over it gives back (ReleaseExpress). A
// message whose payment has a forward job to its destination in River
// not completed is Held: it must go after that job, handed over. Errors
// wrap ErrUnavailable when the database failed transiently; done is then
// not deleted either.
func (s *Outbox) ClaimExpress(ctx context.Context, limit int, lease time.Duration, done []int64) ([]ExpressMessage, error) {
	if limit <= 0 && len(done) == 0 {
		return nil, nil
	}
	if done == nil {
		done = []int64{}
	}
	rows, err := s.pool.Query(ctx, claimExpressSQL, max(limit, 0), lease.Seconds(), done)
	if err != nil {
		return nil, translate("claim forwards (express)", err)
	}
	defer rows.Close()
	var out []ExpressMessage
	for rows.Next() {
		var m ExpressMessage
		var args []byte
		var tp string
		if err := rows.Scan(&m.ID, &args, &m.MaxAttempts, &m.CreatedAt, &m.Claims, &tp, &m.Body, &m.Held); err != nil {
			return nil, translate("claim forwards (express)", err)
		}
		if err := json.Unmarshal(args, &m.Args); err != nil {
			return nil, fmt.Errorf("store: forward %d (express): args: %w", m.ID, err)
		}
		if tp != "" {
			m.Trace = propagation.MapCarrier{"traceparent": tp}
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("claim forwards (express)", err)
	}
	// The rows come back in no particular order: oldest first.
	slices.SortFunc(out, func(a, b ExpressMessage) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// DoneExpress deletes the messages ids of the express lane, which their
// destinations took, noting them in forward_sent.
func (s *Outbox) DoneExpress(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `WITH done AS (
		DELETE FROM forward_express WHERE id = ANY($1)
		RETURNING message_id, type, destination, source, transaction_id, created_at
	) INSERT INTO forward_sent (message_id, type, destination, source, transaction_id, created_at) SELECT * FROM done`, ids); err != nil {
		return translate("complete forwards (express)", err)
	}
	return nil
}

// ReleaseExpress gives back claimed messages ids unsent: any drainer may
// claim them again after after (at once when after is 0).
func (s *Outbox) ReleaseExpress(ctx context.Context, ids []int64, after time.Duration) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `UPDATE forward_express
		SET claimed_until = CASE WHEN $2 > 0 THEN now() + make_interval(secs => $2) END WHERE id = ANY($1)`,
		ids, after.Seconds())
	if err != nil {
		return translate("release forwards (express)", err)
	}
	return nil
}

// HandOverExpress hands messages of the express lane over to River: in
// one transaction, their rows are deleted and a forward job inserted for
// each row that was still there (a row another drainer completed after
// this one's lease ran out is not handed over). A job already held for
// the same message and destination (a replay's) is left as it is (the
// jobs' uniqueness). Errors wrap ErrUnavailable when the database failed
// transiently; nothing is then handed over.
func (s *Outbox) HandOverExpress(ctx context.Context, hs []ExpressHandover) error {
	if len(hs) == 0 {
		return nil
	}
	ids := make([]int64, len(hs))
	for i, h := range hs {
		ids[i] = h.Message.ID
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM forward_express WHERE id = ANY($1) RETURNING id`, ids)
		if err != nil {
			return err
		}
		gone := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			gone[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		params := make([]river.InsertManyParams, 0, len(gone))
		for _, h := range hs {
			if !gone[h.Message.ID] {
				continue
			}
			attempts := h.Message.MaxAttempts
			if h.Attempted {
				attempts = max(1, attempts-1)
			}
			opts := &river.InsertOpts{MaxAttempts: attempts, ScheduledAt: h.At}
			if h.Refused != "" {
				meta, err := json.Marshal(map[string]expressMark{"paylock_express": {Refused: h.Refused}})
				if err != nil {
					return err
				}
				opts.Metadata = meta
			}
			if len(h.Message.Trace) > 0 && !tracingOff(s.cfg.TracerProvider) {
				// The job's trace context is the delivery's that made the
				// message, as for a job inserted in its transaction.
				opts = withRowTrace(propagation.TraceContext{}.Extract(ctx, h.Message.Trace), opts)
			}
			params = append(params, river.InsertManyParams{Args: h.Message.Args, InsertOpts: opts})
		}
		if len(params) == 0 {
			return nil
		}
		_, err = s.jobs.InsertManyTx(ctx, tx, params)
		return err
	})
	if err != nil {
		return translate("hand forwards over to River (express)", err)
	}
	return nil
}

// ExpressBacklog is a destination's messages waiting in the express lane.
type ExpressBacklog struct {
	Destination string
	Waiting     int
	// Age is how long the oldest waiting message has waited, by the
	// database's clock.
	Age time.Duration
}

// ExpressBacklogs returns each destination's waiting messages in the
// express lane, ordered by name; a destination with none is absent.
func (s *Outbox) ExpressBacklogs(ctx context.Context) ([]ExpressBacklog, error) {
	rows, err := s.pool.Query(ctx, `SELECT destination, count(*), extract(epoch FROM now() - min(created_at))::float8
		FROM forward_express GROUP BY destination ORDER BY destination`)
	if err != nil {
		return nil, translate("express backlog", err)
	}
	defer rows.Close()
	var out []ExpressBacklog
	for rows.Next() {
		var b ExpressBacklog
		var age float64
		if err := rows.Scan(&b.Destination, &b.Waiting, &age); err != nil {
			return nil, translate("express backlog", err)
		}
		b.Age = time.Duration(age * float64(time.Second))
		out = append(out, b)
	}
	return out, translate("express backlog", rows.Err())
}

// ExpressSentRetention is how long forward_sent keeps what the express
// lane delivered: as long as River keeps a completed job.
const ExpressSentRetention = 24 * time.Hour

// PurgeExpressSent deletes what forward_sent noted more than
// ExpressSentRetention ago, and returns how many rows it deleted.
func (s *Outbox) PurgeExpressSent(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM forward_sent WHERE sent_at < now() - make_interval(secs => $1)`,
		ExpressSentRetention.Seconds())
	if err != nil {
		return 0, translate("purge forward_sent", err)
	}
	return tag.RowsAffected(), nil
}

// ErrVacuumDenied means this role may not vacuum forward_express: it owns
// neither the table nor the database, and is no superuser (VacuumExpress).
var ErrVacuumDenied = errors.New("store: this role may not vacuum forward_express (it owns neither the table nor the database)")

// VacuumExpress vacuums forward_express, unless another session already
// does (SKIP_LOCKED). The lane's rows live milliseconds: a claim scans
// its primary key from the oldest, and every row deleted since the last
// vacuum is an index entry it steps over. Autovacuum visits a table at
// most once a minute (autovacuum_naptime), in which a busy lane leaves
// a minute's rows dead; the drainer calls this every few seconds instead
// (forward.Worker.RunExpress). The table's empty tail is kept
// (TRUNCATE false): truncating it would take a lock that the recording
// statements, which insert into the table, wait for. A role that may not
// vacuum the table gets ErrVacuumDenied, and nothing is sent.
func (s *Outbox) VacuumExpress(ctx context.Context) error {
	var may bool
	err := s.pool.QueryRow(ctx, `SELECT pg_has_role(c.relowner, 'USAGE') OR pg_has_role(d.datdba, 'USAGE')
			OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
		FROM pg_class c, pg_database d
		WHERE c.oid = 'forward_express'::regclass AND d.datname = current_database()`).Scan(&may)
	switch {
	case err != nil:
		return translate("vacuum forward_express: owner", err)
	case !may:
		return ErrVacuumDenied
	}
	if _, err := s.pool.Exec(ctx, `VACUUM (SKIP_LOCKED, TRUNCATE false) forward_express`); err != nil {
		return translate("vacuum forward_express", err)
	}
	return nil
}

// forwardMessagesView lists every forward message, wherever it is: River's
// forward jobs (their state), the express lane's rows ('express'), and
// what the lane delivered ('completed', as River's). Operators and the
// chaos suite read it; applyMigrations creates it after River's
// migrations (river_job is River's).
const (
	forwardMessagesView    = "forward_messages"
	forwardMessagesViewSQL = `CREATE OR REPLACE VIEW forward_messages AS
	SELECT args->>'id' AS id, args->>'type' AS type, coalesce(args->>'destination', '') AS destination,
		coalesce(args->>'source', '') AS source, coalesce(args->>'transaction_id', '') AS transaction_id,
		state::text AS state, created_at, 'river' AS lane, id AS job_id
	FROM river_job WHERE kind = 'forward'
	UNION ALL
	SELECT message_id, type, destination, source, transaction_id, 'express', created_at, 'express', NULL
	FROM forward_express
	UNION ALL
	SELECT message_id, type, destination, source, transaction_id, 'completed', created_at, 'express', NULL
	FROM forward_sent`
)
