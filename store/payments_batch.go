package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of Config.BatchMax, Config.BatchWriters and Config.BatchStall.
const (
	DefaultBatchMax     = 64
	DefaultBatchWriters = 2
	DefaultBatchStall   = 50 * time.Millisecond
)

// batchRowsDesc names the histogram of rows per recording statement.
const batchRowsHelp = "Payments sent to Postgres in one recording statement (natural batching: 1 for a lone delivery, more while " +
	"other deliveries' inserts were in flight; at most PAYLOCK_BATCH_MAX)."

// batchStallsHelp is the help of the counter of writers added for a stall.
const batchStallsHelp = "Recording statements (writers) that took queued payments beyond PAYLOCK_BATCH_WRITERS because one waited " +
	"longer than PAYLOCK_BATCH_STALL for a writer: the statements in flight were slow (a loaded or locked database), " +
	"so the queue went to more statements instead of one long batch."

// batcher groups the payment inserts of concurrent deliveries (natural
// batching, no timer). A delivery that finds a writer slot free and nobody
// queued records at once on the single-row path, as without batching;
// otherwise it queues, and the next writer sends up to max queued payments
// as one multi-row statement (writeBatch). writers statements are in flight
// at a time, as a rule.
//
// A batch takes as long as its slowest part: a row that waits on another
// delivery's row lock, a trigger, a database that stalls. The rows queued
// behind such statements must not wait for them, nor pile up into a batch
// that is slower still. So a payment queued for longer than stall starts
// one more writer (counted in paylock_db_batch_stalls_total), up to limit
// (the pool's size: never more statements in flight than without
// batching). Once a writer finishes a statement while more than writers
// are active, it stops.
type batcher struct {
	max, writers, limit int
	stall               time.Duration
	rows                prometheus.Histogram
	stalls              prometheus.Counter

	mu      sync.Mutex
	active  int
	pending []*batchReq
}

func newBatcher(batchMax, writers, limit int, stall time.Duration) *batcher {
	return &batcher{
		max: batchMax, writers: writers, limit: max(limit, writers), stall: stall,
		rows: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "paylock_db_batch_rows", Help: batchRowsHelp,
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}),
		stalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paylock_db_batch_stalls_total", Help: batchStallsHelp,
		}),
	}
}

// await waits for req's result. While req is still queued, every stall it
// starts one more writer, up to limit; should its ctx end first, it leaves
// the queue unsent (ErrUnavailable), as writeBatch answers such a row.
func (s *Payments) await(req *batchReq) batchResult {
	b := s.batch
	var tick <-chan time.Time
	var t *time.Timer
	if b.stall > 0 && b.limit > b.writers {
		t = time.NewTimer(b.stall)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case res := <-req.done:
			return res
		case <-req.ctx.Done():
			b.mu.Lock()
			taken := req.taken
			if !taken {
				b.pending = slices.DeleteFunc(b.pending, func(r *batchReq) bool { return r == req })
			}
			b.mu.Unlock()
			if taken {
				return <-req.done // a writer has it: its answer comes
			}
			return batchResult{err: notSent(context.Cause(req.ctx))}
		case <-tick:
			b.mu.Lock()
			taken := req.taken
			if !taken && b.active < b.limit {
				b.active++
				go s.flush(true)
			}
			b.mu.Unlock()
			if taken {
				return <-req.done
			}
			t.Reset(b.stall)
		}
	}
}

// recordFn is a record hook (RecordPaymentFunc's fn).
type recordFn = func(context.Context, pgx.Tx, Payment) error

// batchReq is one queued payment and where its outcome goes.
type batchReq struct {
	ctx  context.Context
	p    Payment
	fn   recordFn
	done chan batchResult // buffered: the writer never waits for the reader
	// taken is set, under the batcher's mu, once a writer took the row
	// off the queue.
	taken bool
	// size and batch are written before done is: the rows of the
	// statement that carried this one, and its span (a multi-row one).
	size  int
	batch trace.SpanContext
}

// batchNext says what the delivery still has to do with a batch's result.
type batchNext int

const (
	batchDone     batchNext = iota // rec, err is the outcome
	batchConflict                  // the arbiter held the id: confirm by a fresh read
	batchSingle                    // nothing of the row committed: record it alone
)

type batchResult struct {
	rec  Payment
	err  error
	next batchNext
}

func (r *batchReq) answer(res batchResult) { r.done <- res }

// recordBatched is RecordPaymentFunc with natural batching: its outcomes
// are RecordPaymentFunc's, each from the payment's own row.
func (s *Payments) recordBatched(ctx context.Context, p Payment, fn recordFn) (Payment, error) {
	b := s.batch
	b.mu.Lock()
	if b.active < b.writers && len(b.pending) == 0 {
		b.active++
		b.mu.Unlock()
		b.rows.Observe(1)
		batchSize(ctx, 1, trace.SpanContext{})
		rec, err := func() (Payment, error) {
			defer s.handOff() // even if fn panics
			return s.recordSingle(ctx, p, fn)
		}()
		return s.settle(ctx, p, fn, batchResult{rec: rec, err: err})
	}
	req := &batchReq{ctx: ctx, p: p, fn: fn, done: make(chan batchResult, 1)}
	b.pending = append(b.pending, req)
	if b.active < b.writers {
		b.active++
		go s.flush(false)
	}
	b.mu.Unlock()
	res := s.await(req)
	// A row the writer sent back is recorded alone (settle): one row.
	size := req.size
	if size == 0 || res.next == batchSingle {
		size = 1
	}
	batchSize(ctx, size, req.batch)
	return s.settle(ctx, p, fn, res)
}

// settle finishes a delivery from its batch's result: a conflict is
// confirmed by a fresh read (outside any transaction, after the batch's
// commit), a row sent back is recorded alone.
func (s *Payments) settle(ctx context.Context, p Payment, fn recordFn, r batchResult) (Payment, error) {
	switch {
	case r.next == batchSingle:
		if cause := leaseCause(ctx); cause != nil {
			return Payment{}, notSent(cause)
		}
		s.batch.rows.Observe(1) // a statement of its own: counted as the writer counts a lone row
		rec, err := s.recordSingle(ctx, p, fn)
		return s.settle(ctx, p, fn, batchResult{rec: rec, err: err})
	case r.next == batchConflict, errors.Is(r.err, errConflict):
		return s.confirmConflictFunc(ctx, p, fn)
	}
	return r.rec, r.err
}

// handOff frees the caller's writer slot, or hands it to a new writer of
// the deliveries that queued meanwhile.
func (s *Payments) handOff() {
	b := s.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 || b.active > b.writers {
		b.active--
		return
	}
	go s.flush(false)
}

// flush writes queued payments, up to max at a time, until none is left
// or more than writers are active (a writer a stall added). stalled says
// that a stall started it: it is counted once it takes rows.
func (s *Payments) flush(stalled bool) {
	b := s.batch
	for first := true; ; first = false {
		b.mu.Lock()
		n := min(len(b.pending), b.max)
		if n == 0 || !first && b.active > b.writers {
			b.active--
			b.mu.Unlock()
			return
		}
		if first && stalled {
			b.stalls.Inc()
		}
		batch := slices.Clone(b.pending[:n])
		for _, r := range batch {
			r.taken = true
		}
		b.pending = slices.Delete(b.pending, 0, n)
		b.mu.Unlock()
		s.writeBatch(batch)
	}
}

// writeBatch records batch. A row whose ctx is done (its lease lost, its
// client gone) is answered without being sent, as the single-row path
// does. A row whose source and transaction id an earlier row of the batch
// carries waits for the batch's end and is then recorded alone. One row
// left goes the single-row way.
func (s *Payments) writeBatch(batch []*batchReq) {
	rows := make([]*batchReq, 0, len(batch))
	seen := make(map[[2]string]bool, len(batch))
	var later []*batchReq
	for _, r := range batch {
		k := [2]string{r.p.Source, r.p.TransactionID}
		switch {
		case leaseCause(r.ctx) != nil:
			r.answer(batchResult{err: notSent(leaseCause(r.ctx))})
		case seen[k]:
			later = append(later, r)
		default:
			seen[k] = true
			rows = append(rows, r)
		}
	}
	defer func() {
		// Recorded alone once the batch is over: the insert then meets the
		// earlier row's if it committed (a conflict, confirmed by a read),
		// or records it if it did not.
		for _, r := range later {
			r.answer(batchResult{next: batchSingle})
		}
	}()
	switch {
	case len(rows) == 0:
		return
	case len(rows) == 1 && rows[0].fn != nil && rows[0].p.lane == nil:
		// Its caller records it: a panicking fn must not take the writer
		// (and the process) down with it.
		rows[0].answer(batchResult{next: batchSingle})
		return
	case len(rows) == 1:
		s.batch.rows.Observe(1)
		rec, err := s.recordSingle(rows[0].ctx, rows[0].p, rows[0].fn)
		rows[0].answer(batchResult{rec: rec, err: err})
		return
	}
	// In key order: two batches that carry the same payments (no lock
	// between their deliveries: PAYLOCK_LOCK=off, an expired lock) then
	// take their row locks in the same order and never deadlock.
	slices.SortFunc(rows, func(a, b *batchReq) int {
		return cmp.Or(strings.Compare(a.p.Source, b.p.Source), strings.Compare(a.p.TransactionID, b.p.TransactionID))
	})
	s.batch.rows.Observe(float64(len(rows)))
	for _, r := range rows {
		r.size = len(rows)
	}
	if slices.ContainsFunc(rows, func(r *batchReq) bool { return r.fn != nil && r.p.lane == nil }) {
		s.batchInTx(rows)
	} else {
		s.batchAutocommit(rows)
	}
}

// batchCtx bounds a batch's statements: no single delivery's context may
// cancel the statement that carries the others' rows. It carries the
// batch's span (startBatch), which done ends.
func (s *Payments) batchCtx(rows []*batchReq) (ctx context.Context, done func()) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StatementTimeout+s.cfg.CommitTimeout)
	ctx, span := s.startBatch(ctx, rows)
	return ctx, func() { span.End(); cancel() }
}

// batchAutocommit inserts rows with one statement outside any transaction:
// its answer is the commit's. An ERROR rolled the whole statement back: each
// row is then recorded alone, so that one bad row fails only itself. No
// answer leaves every row's outcome unknown.
func (s *Payments) batchAutocommit(rows []*batchReq) {
	ctx, done := s.batchCtx(rows)
	defer done()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		answerAll(rows, batchResult{next: batchSingle})
		return
	}
	defer conn.Release()
	recorded, err := s.insertMany(ctx, conn.Conn(), rows, true)
	switch {
	case err == nil:
		answerRecorded(rows, recorded)
	case sentWithoutAnswer(err):
		answerAll(rows, batchResult{err: fmt.Errorf("%w: record payments: batch insert: %w", ErrCommitUnknown, err)})
	default:
		answerAll(rows, batchResult{next: batchSingle})
	}
}

// answerRecorded answers each row: recorded (with its received_at) or held
// by the arbiter (confirmed by a read).
func answerRecorded(rows []*batchReq, recorded map[[2]string]Payment) {
	for _, r := range rows {
		if rec, ok := recorded[[2]string{r.p.Source, r.p.TransactionID}]; ok {
			r.answer(batchResult{rec: rec})
		} else {
			r.answer(batchResult{next: batchConflict})
		}
	}
}

func answerAll(rows []*batchReq, res batchResult) {
	for _, r := range rows {
		r.answer(res)
	}
}

// insertManySQL is insertPaymentSQL for many rows: the arrays' elements
// side by side (unnest), the same arbiter, the same synchronous_commit. A
// row that the arbiter holds returns nothing; the others return their
// source and transaction id with received_at.
const insertManySQL = `
INSERT INTO payments (source, transaction_id, amount, currency, payload, event_id)
SELECT r.s, r.t, r.a, r.c, r.p::jsonb, NULLIF(r.e, '')
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[]) AS r(s, t, a, c, p, e)
WHERE set_config('synchronous_commit', 'on', true) = 'on'
ON CONFLICT ON CONSTRAINT payments_transaction_id_key DO NOTHING
RETURNING source, transaction_id, received_at`

// insertManyAccountSQL is insertManySQL for a batch of which some payment
// names its merchant account ($7; "" for none).
const insertManyAccountSQL = `
INSERT INTO payments (source, transaction_id, amount, currency, payload, event_id, account)
SELECT r.s, r.t, r.a, r.c, r.p::jsonb, NULLIF(r.e, ''), NULLIF(r.m, '')
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[]) AS r(s, t, a, c, p, e, m)
WHERE set_config('synchronous_commit', 'on', true) = 'on'
ON CONFLICT ON CONSTRAINT payments_transaction_id_key DO NOTHING
RETURNING source, transaction_id, received_at`

type rowQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// insertMany runs insertManySQL for rows (distinct source and transaction
// ids) and returns the payments it recorded, by source and transaction id.
// With lane, the statement also inserts the express lane's rows of the
// payments it records (withLaneSQL); without, the rows' fn do (batchInTx).
func (s *Payments) insertMany(ctx context.Context, q rowQuerier, rows []*batchReq, lane bool) (map[[2]string]Payment, error) {
	n := len(rows)
	src, tx, cur, payload, ev := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	var acc []string // nil unless a payment names its merchant account
	amt := make([]int64, n)
	byKey := make(map[[2]string]Payment, n)
	for i, r := range rows {
		src[i], tx[i], amt[i], cur[i], ev[i] = r.p.Source, r.p.TransactionID, r.p.Amount, r.p.Currency, r.p.EventID
		if r.p.Account != "" && acc == nil {
			acc = make([]string, n)
		}
		if acc != nil {
			acc[i] = r.p.Account
		}
		payload[i] = string(json.RawMessage(r.p.Payload))
		byKey[[2]string{r.p.Source, r.p.TransactionID}] = r.p
	}
	sql, args := insertManySQL, []any{src, tx, amt, cur, payload, ev}
	if acc != nil {
		sql, args = insertManyAccountSQL, append(args, acc)
	}
	var taker *expressTaker
	if la := laneArgs(rows); lane && la != nil {
		sql = insertManyLaneSQL
		if acc != nil {
			sql = insertManyAccountLaneSQL
		}
		if taker = s.outbox.taker.Load(); taker != nil {
			la[len(la)-1] = taker.lease.Seconds() // claimed at birth
		}
		args = append(args, la...)
	} else {
		lane = false
	}
	res, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	recorded := make(map[[2]string]Payment, n)
	var k [2]string
	var p Payment
	var ids []int64
	var dests []string
	var made time.Time
	var born []ExpressMessage
	scan := []any{&k[0], &k[1], &p.ReceivedAt}
	if lane {
		scan = append(scan, &ids, &dests, &made)
	}
	_, err = pgx.ForEachRow(res, scan, func() error {
		rec := byKey[k]
		if taker != nil && rec.lane != nil {
			born = rec.lane.born(born, ids, dests, p.ReceivedAt, made)
		}
		rec.ReceivedAt, rec.lane = p.ReceivedAt, nil
		recorded[k] = rec
		return nil
	})
	if err == nil && len(born) > 0 {
		// Committed (autocommit: the answer is the commit's) and claimed by
		// this process: its drainer sends them.
		taker.take(born)
	}
	return recorded, err
}

// batchInTx records rows in one transaction: the multi-row insert, each
// recorded row's hook (fn, with the row's own ctx), the forward jobs the
// hooks asked for in one River InsertManyTx, and COMMIT.
//
// Every row's guarantee holds as on the single-row path because the batch
// commits only whole: a hook's error or panic, a failed statement, or a
// row whose ctx is done once the hooks ran (its lease lost: its hook's
// work must not commit) rolls the whole transaction back, before COMMIT is
// sent, and every row is then recorded alone, where its own checks apply
// (the row whose lease was lost is answered ErrUnavailable without being
// sent). A COMMIT that gets no answer is ErrCommitUnknown for every row.
func (s *Payments) batchInTx(rows []*batchReq) {
	ctx, done := s.batchCtx(rows)
	defer done()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		answerAll(rows, batchResult{next: batchSingle})
		return
	}
	recorded, err := s.batchWrite(ctx, tx, rows)
	if err != nil {
		s.rollback(ctx, tx)
		answerAll(rows, batchResult{next: batchSingle})
		return
	}
	switch err := s.commit(ctx, tx); {
	case err == nil:
		answerRecorded(rows, recorded)
	case errors.Is(err, ErrCommitUnknown):
		answerAll(rows, batchResult{err: fmt.Errorf("record payments: batch of %d: %w", len(rows), err)})
	default:
		answerAll(rows, batchResult{next: batchSingle})
	}
}

// errBatchLease stops a batch one of whose rows' ctx is done.
var errBatchLease = errors.New("store: a batched row's context ended before COMMIT")

// batchWrite is batchInTx's work before COMMIT. A hook that panics is
// reported as an error here; the row's own retry alone meets the panic
// again, in its caller's goroutine.
func (s *Payments) batchWrite(ctx context.Context, tx pgx.Tx, rows []*batchReq) (recorded map[[2]string]Payment, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: record hook panicked in a batch: %v", r)
		}
	}()
	recorded, err = s.insertMany(ctx, tx, rows, false)
	if err != nil {
		return nil, err
	}
	jobs := &jobCollector{tx: tx}
	for _, r := range rows {
		rec, ok := recorded[[2]string{r.p.Source, r.p.TransactionID}]
		if !ok || r.fn == nil {
			continue
		}
		if leaseCause(r.ctx) != nil {
			return nil, errBatchLease
		}
		if err := r.fn(context.WithValue(r.ctx, jobCollectorKey{}, jobs), tx, rec); err != nil {
			return nil, err
		}
	}
	if len(jobs.params) > 0 {
		if _, err := s.jobs.InsertManyTx(ctx, tx, jobs.params); err != nil {
			return nil, err
		}
	}
	if err := insertExpress(ctx, tx, jobs.express); err != nil {
		return nil, err
	}
	for _, r := range rows {
		if leaseCause(r.ctx) != nil {
			return nil, errBatchLease
		}
	}
	return recorded, nil
}

// jobCollector gathers the River jobs that the hooks of a batch insert
// through its transaction, so that the batch inserts them in one
// InsertManyTx (Outbox.insertForward).
type jobCollector struct {
	tx     pgx.Tx
	params []river.InsertManyParams
	// express are the rows of the outbox's express lane, inserted in one
	// statement (outbox_express.go).
	express []expressRow
}

type jobCollectorKey struct{}

// collect adds a job to the batch of ctx when tx is that batch's
// transaction, and reports whether it did.
func collect(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) bool {
	c, ok := ctx.Value(jobCollectorKey{}).(*jobCollector)
	if !ok || c.tx != tx {
		return false
	}
	c.params = append(c.params, river.InsertManyParams{Args: args, InsertOpts: opts})
	return true
}

// collectExpress is collect for a row of the express lane.
func collectExpress(ctx context.Context, tx pgx.Tx, row expressRow) bool {
	c, ok := ctx.Value(jobCollectorKey{}).(*jobCollector)
	if !ok || c.tx != tx {
		return false
	}
	c.express = append(c.express, row)
	return true
}
