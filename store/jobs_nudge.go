package store

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// River's insert notifications, completed. A River client notifies a
// queue's workers of a job it inserts (pg_notify, delivered at COMMIT),
// but at most once per queue per its FetchCooldown (100ms for the store's
// insert-only client): NOTIFY serializes the commits that send one. A job
// inserted within that of another gets no notification of its own, and
// when the workers fetched before its COMMIT and no later job comes, it
// waited for the queue's next poll (PAYLOCK_WORKER_POLL, 5s): the tail of
// a burst of forwards, seconds late. insertNudge sends the queue one
// notification more, outside any transaction, NudgeAfter after a job was
// inserted on it: at most one per queue per NudgeAfter, however many jobs.
// A transaction that commits later than that is found by the poll.

// NudgeAfter is how long after inserting a job the store notifies its
// queue again: past the insert-only client's FetchCooldown (River's
// default, 100ms), so that the jobs whose notification River left out are
// committed by then.
const NudgeAfter = 150 * time.Millisecond

// insertNudge is the insert-only client's middleware that schedules the
// notifications (a nudge per queue pending at most).
type insertNudge struct {
	river.MiddlewareDefaults
	pool  *pgxpool.Pool
	after time.Duration
	mu    sync.Mutex
	armed map[string]bool
}

func newInsertNudge(pool *pgxpool.Pool, after time.Duration) *insertNudge {
	return &insertNudge{pool: pool, after: after, armed: map[string]bool{}}
}

func (n *insertNudge) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams,
	doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	res, err := doInner(ctx)
	if err != nil {
		return res, err
	}
	now := time.Now()
	for _, p := range params {
		// A job due later is found by the poll that makes it due.
		if p.State == rivertype.JobStateAvailable || p.ScheduledAt == nil || !p.ScheduledAt.After(now) {
			n.soon(p.Queue)
		}
	}
	return res, nil
}

// soon schedules a notification of queue after n.after, unless one is
// pending: that one is sent after this job's insert too.
func (n *insertNudge) soon(queue string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.armed[queue] {
		return
	}
	n.armed[queue] = true
	time.AfterFunc(n.after, func() {
		n.mu.Lock()
		delete(n.armed, queue) // a job inserted from now on schedules another
		n.mu.Unlock()
		payload, _ := json.Marshal(map[string]string{"queue": queue})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		// Best effort: a notification lost is a job found by the poll.
		_, _ = n.pool.Exec(ctx, `SELECT pg_notify(current_schema() || '.river_insert', $1)`, string(payload))
	})
}
