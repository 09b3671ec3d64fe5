package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

// jobState returns forward job id's River state and its park mark.
func (b *bundle) jobState(t *testing.T, id int64) (string, ParkMark) {
	t.Helper()
	var state string
	var meta []byte
	if err := b.admin.QueryRow(context.Background(), `SELECT state, metadata FROM river_job WHERE id = $1`, id).Scan(&state, &meta); err != nil {
		t.Fatal(err)
	}
	return state, JobParkMark(meta)
}

// parkedJobs records n payments forwarded to dest and snoozes their jobs
// as a parked destination's are (scheduled a minute ahead); it returns
// their ids, oldest first.
func (b *bundle) parkedJobs(t *testing.T, dest string, n int) []int64 {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		p := newPayment(dest + "-" + string(rune('a'+i)))
		if _, err := b.store.Payments().RecordPaymentForwarded(ctx, p, dest); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Exec(t, b.store.pool, `UPDATE river_job SET state = 'scheduled', scheduled_at = now() + interval '1 minute'
		WHERE args->>'destination' = $1`, dest)
	var ids []int64
	rows, err := b.store.pool.Query(ctx, `SELECT id FROM river_job WHERE args->>'destination' = $1 ORDER BY id`, dest)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func TestADestinationMovesOnceFromAStateItIsInWithItsEventAndComesBackReleasingItsJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ob := b.store.Outbox()
	ids := b.parkedJobs(t, "ledger", 3)

	if hs, err := ob.DestinationHealth(ctx); err != nil || len(hs) != 0 {
		t.Fatalf("health before any move: %v, %v; want none", hs, err)
	}
	event := func(typ string) func(DestinationHealth) *ForwardArgs {
		return func(h DestinationHealth) *ForwardArgs {
			return &ForwardArgs{ID: OperatorEventID(typ + h.Destination), Type: typ, Destination: "ops",
				Operator: &ForwardedOperatorEvent{Destination: h.Destination, State: string(h.State), Failures: h.Failures}}
		}
	}
	// Ten replicas park it at once: one moves it, one event.
	var wg sync.WaitGroup
	var moves atomic.Int32
	for range 10 {
		wg.Go(func() {
			_, moved, _, err := ob.MoveDestination(ctx, DestinationMove{Destination: "ledger", To: DestinationParked,
				From: []DestinationState{DestinationHealthy, DestinationFailing}, Failures: 10,
				LastError: "forward: the receiver answered 500\nbody: secret", Probe: time.Minute, Event: event("destination.parked")})
			if err != nil {
				t.Error(err)
			}
			if moved {
				moves.Add(1)
			}
		})
	}
	wg.Wait()
	if moves.Load() != 1 {
		t.Fatalf("%d replicas moved it, want 1", moves.Load())
	}
	hs, err := ob.DestinationHealth(ctx)
	if err != nil || len(hs) != 1 {
		t.Fatalf("health: %v, %v", hs, err)
	}
	h := hs[0]
	if h.State != DestinationParked || h.Failures != 10 || h.LastError != "forward: the receiver answered 500" || h.Gen != 1 ||
		h.ProbeIn < 50*time.Second || h.ProbeIn > time.Minute {
		t.Fatalf("parked: %+v; want parked, 10 failures, the error's first line, gen 1, a probe in about a minute", h)
	}
	if events := testkit.Count(t, b.store.pool, `SELECT count(*) FROM river_job WHERE args->>'type' = 'destination.parked' AND args->>'destination' = 'ops'`); events != 1 {
		t.Fatalf("%d destination.parked jobs, want 1", events)
	}

	t.Run("NoProbeBeforeItIsDue", func(t *testing.T) {
		if _, claimed, err := ob.ClaimProbe(ctx, "ledger", 10*time.Second); err != nil || claimed {
			t.Fatalf("claimed %v, %v: want no probe before it is due", claimed, err)
		}
	})
	testkit.Exec(t, b.store.pool, `UPDATE forward_destination_health SET probe_at = now() - interval '1 second' WHERE destination = 'ledger'`)
	var probe DestinationHealth
	t.Run("OneReplicaClaimsTheDueProbeAndItIsTheOldestJob", func(t *testing.T) {
		var claims atomic.Int32
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				h, claimed, err := ob.ClaimProbe(ctx, "ledger", 90*time.Second)
				if err != nil {
					t.Error(err)
				}
				if claimed {
					claims.Add(1)
					probe = h
				}
			})
		}
		wg.Wait()
		if claims.Load() != 1 || probe.ProbeJobID != ids[0] || probe.Gen != 2 {
			t.Fatalf("%d claims, probe %+v; want 1 claim of job %d at gen 2", claims.Load(), probe, ids[0])
		}
		if probe.ProbeIn < 50*time.Second {
			t.Errorf("next probe in %v, want the interval (1m)", probe.ProbeIn)
		}
		state, mark := b.jobState(t, ids[0])
		if state != "available" || mark != (ParkMark{Gen: 2, Probe: true}) {
			t.Errorf("probe job: %s %+v; want available, marked as gen 2's probe", state, mark)
		}
		if state, _ := b.jobState(t, ids[1]); state != "scheduled" {
			t.Errorf("the next job is %s, want still scheduled", state)
		}
		if interval := testkit.Count(t, b.store.pool, `SELECT extract(epoch FROM probe_interval)::int FROM forward_destination_health WHERE destination = 'ledger'`); interval != 90 {
			t.Errorf("probe interval after a claim: %vs, want doubled to 2m and capped at 90s", interval)
		}
	})
	t.Run("TheProbeIsConsumedOnce", func(t *testing.T) {
		first, err := ob.ConsumeProbe(ctx, "ledger", ids[0])
		if err != nil || !first {
			t.Fatalf("first consume: %v, %v", first, err)
		}
		if again, err := ob.ConsumeProbe(ctx, "ledger", ids[0]); err != nil || again {
			t.Fatalf("second consume: %v, %v; want false", again, err)
		}
		if other, err := ob.ConsumeProbe(ctx, "ledger", ids[1]); err != nil || other {
			t.Fatalf("another job: %v, %v; want false", other, err)
		}
		// While the sent probe runs, no other is claimed, even when due.
		testkit.Exec(t, b.store.pool, `UPDATE forward_destination_health SET probe_at = now() - interval '1 second' WHERE destination = 'ledger'`)
		testkit.Exec(t, b.store.pool, `UPDATE river_job SET state = 'running', attempted_at = now(), attempt = 1 WHERE id = $1`, ids[0])
		if h, claimed, err := ob.ClaimProbe(ctx, "ledger", 90*time.Second); err != nil || claimed {
			t.Fatalf("a claim while the probe runs: %+v %v, %v; want none", h, claimed, err)
		}
		// It failed (snoozed, no attempt spent): the next claim prefers a
		// job never probed.
		testkit.Exec(t, b.store.pool, `UPDATE river_job SET state = 'scheduled', attempt = 0, scheduled_at = now() + interval '1 minute' WHERE id = $1`, ids[0])
		h, claimed, err := ob.ClaimProbe(ctx, "ledger", 90*time.Second)
		if err != nil || !claimed || h.ProbeJobID != ids[1] {
			t.Fatalf("the next claim: %+v %v, %v; want job %d, the oldest never probed", h, claimed, err, ids[1])
		}
	})
	t.Run("ComingBackReleasesEveryWaitingJobMarked", func(t *testing.T) {
		h, moved, released, err := ob.MoveDestination(ctx, DestinationMove{Destination: "ledger", To: DestinationHealthy,
			From: []DestinationState{DestinationFailing, DestinationParked}, Event: event("destination.recovered")})
		if err != nil || !moved || h.State != DestinationHealthy || h.Gen != 4 {
			t.Fatalf("recovered: %+v moved %v, %v", h, moved, err)
		}
		if released != 2 {
			t.Errorf("released %d jobs, want the 2 still scheduled (the failed probe and the last)", released)
		}
		for _, id := range []int64{ids[0], ids[2]} {
			if state, mark := b.jobState(t, id); state != "available" || mark != (ParkMark{Gen: 4, Released: true}) {
				t.Errorf("job %d: %s %+v; want available, released at gen 4", id, state, mark)
			}
		}
		if _, moved, _, err := ob.MoveDestination(ctx, DestinationMove{Destination: "ledger", To: DestinationHealthy,
			From: []DestinationState{DestinationFailing, DestinationParked}, Event: event("destination.recovered")}); err != nil || moved {
			t.Fatalf("a second recovery: moved %v, %v; want nothing", moved, err)
		}
		// A job parked by a worker whose view was a moment old, after the
		// release; and one snoozed briefly (its order, its rate).
		testkit.Exec(t, b.store.pool, `UPDATE river_job SET state = 'scheduled', scheduled_at = now() + interval '1 minute' WHERE id = $1`, ids[1])
		testkit.Exec(t, b.store.pool, `UPDATE river_job SET state = 'scheduled', scheduled_at = now() + interval '2 seconds' WHERE id = $1`, ids[2])
		if n, err := ob.ReleaseSnoozed(ctx, "ledger", 3, 45*time.Second); err != nil || n != 0 {
			t.Fatalf("ReleaseSnoozed at an older generation: %d, %v; want nothing", n, err)
		}
		if n, err := ob.ReleaseSnoozed(ctx, "ledger", 4, 45*time.Second); err != nil || n != 1 {
			t.Fatalf("ReleaseSnoozed: %d, %v; want the parked one alone", n, err)
		}
		if state, _ := b.jobState(t, ids[1]); state != "available" {
			t.Errorf("the late-parked job is %s, want available", state)
		}
		if state, _ := b.jobState(t, ids[2]); state != "scheduled" {
			t.Errorf("the briefly snoozed job is %s, want left alone", state)
		}
	})
	t.Run("BadMovesAreRefused", func(t *testing.T) {
		for _, m := range []DestinationMove{{To: DestinationParked, Probe: time.Second}, {Destination: "x", To: "sick"},
			{Destination: "x", To: DestinationParked}} {
			if _, _, _, err := ob.MoveDestination(ctx, m); !errors.Is(err, ErrDestinationMove) {
				t.Errorf("%+v: %v, want ErrDestinationMove", m, err)
			}
		}
	})
}

func TestResumeReleasesAndRecoverPutsBackOnlyTheWindowsGivenUpJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ob := b.store.Outbox()
	ids := b.parkedJobs(t, "crm", 4)
	if _, _, _, err := ob.MoveDestination(ctx, DestinationMove{Destination: "crm", To: DestinationParked, Probe: time.Minute}); err != nil {
		t.Fatal(err)
	}
	h, moved, released, err := ob.ResumeDestination(ctx, "crm", nil)
	if err != nil || !moved || released != 4 || h.State != DestinationHealthy {
		t.Fatalf("resume: %+v moved %v released %d, %v; want healthy, 4 released", h, moved, released, err)
	}
	if _, moved, _, err := ob.ResumeDestination(ctx, "crm", nil); err != nil || moved {
		t.Fatalf("resume a healthy destination: moved %v, %v", moved, err)
	}

	// Job 0 was discarded 3 hours ago, 1 and 2 an hour ago, 3 is pending.
	testkit.Exec(t, b.store.pool, `UPDATE river_job SET state = 'discarded', attempt = max_attempts,
		finalized_at = now() - interval '3 hours' WHERE id = $1`, ids[0])
	testkit.Exec(t, b.store.pool, `UPDATE river_job SET state = 'discarded', attempt = max_attempts,
		finalized_at = now() - interval '1 hour' WHERE id = $1 OR id = $2`, ids[1], ids[2])
	n, err := ob.RecoverForwards(ctx, "crm", time.Now().Add(-2*time.Hour), time.Time{})
	if err != nil || n != 2 {
		t.Fatalf("recover: %d, %v; want the 2 given up within the window", n, err)
	}
	for i, want := range []string{"discarded", "available", "available", "available"} {
		if state, _ := b.jobState(t, ids[i]); state != want {
			t.Errorf("job %d: %s, want %s", i, state, want)
		}
	}
	if n, err := ob.RecoverForwards(ctx, "other", time.Now().Add(-24*time.Hour), time.Time{}); err != nil || n != 0 {
		t.Errorf("another destination's window: %d, %v; want 0", n, err)
	}
}

func TestEnqueueForwardInsertsOnceAndRefusesAnIncompleteOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ev := ForwardArgs{ID: OperatorEventID("message.exhausted:1:25"), Type: "message.exhausted", Destination: "ops",
		Operator: &ForwardedOperatorEvent{Destination: "ledger", JobID: 1, Attempts: 25}}
	for range 2 {
		if err := b.store.Outbox().EnqueueForward(ctx, ev, 3); err != nil {
			t.Fatal(err)
		}
	}
	jobs := b.forwardJobs(t)
	if len(jobs) != 1 || jobs[0].MaxAttempts != 3 || jobs[0].Args.Operator == nil || jobs[0].Args.Operator.JobID != 1 {
		t.Fatalf("jobs %+v: want one, with 3 attempts, carrying its operator event", jobs)
	}
	if err := b.store.Outbox().EnqueueForward(ctx, ForwardArgs{Type: "message.exhausted"}, 0); !errors.Is(err, ErrForward) {
		t.Fatalf("an event without id: %v, want ErrForward", err)
	}
}
