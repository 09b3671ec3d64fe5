package paylocktest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// counting counts the payments a replica records.
type counting struct {
	handler.Recorder
	n *atomic.Int32
}

func (c counting) RecordPayment(ctx context.Context, p store.Payment) (store.Payment, error) {
	c.n.Add(1)
	return c.Recorder.RecordPayment(ctx, p)
}

func pay(t *testing.T, r *paylocktest.Replica, tx string) string {
	t.Helper()
	res, err := http.Post(r.URL+"/webhooks/payments", "application/json",
		bytes.NewReader([]byte(`{"transaction_id":"`+tx+`","amount":100,"currency":"JPY"}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var a struct{ Result string }
	if err := json.NewDecoder(res.Body).Decode(&a); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v", tx, res.StatusCode, err)
	}
	return a.Result
}

func TestReplicasShareOneSchemaAndOneRedis(t *testing.T) {
	t.Parallel()
	var recorded atomic.Int32
	reps := paylocktest.StartReplicas(t, 2, paylocktest.Options{
		Wrap: func(r handler.Recorder) handler.Recorder { return counting{r, &recorded} },
	})
	if got := []string{pay(t, reps[0], "tx-1"), pay(t, reps[1], "tx-1")}; got[0] != "processed" || got[1] != "duplicate" {
		t.Fatalf("answers %v, want processed then duplicate", got)
	}
	if n := testkit.PaymentRows(t, reps[1].Store.Pool(), "tx-1"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	if recorded.Load() == 0 {
		t.Fatal("Wrap's store was not used")
	}
	if reps[0].DSN != reps[1].DSN || reps[0].Config.LockPrefix == "" || reps[0].LockKey("tx-1") != reps[1].LockKey("tx-1") {
		t.Fatalf("replicas %+v and %+v do not share their database and lock keys", reps[0], reps[1])
	}
}

func TestReplicasOnAnotherSchemaSeeNothingOfTheFirst(t *testing.T) {
	t.Parallel()
	dsn, st := paylocktest.MigratedSchema(t)
	a := paylocktest.StartReplica(t, paylocktest.Options{DSN: dsn})
	b := paylocktest.StartReplica(t, paylocktest.Options{})
	pay(t, a, "tx-1")
	if got := pay(t, b, "tx-1"); got != "processed" {
		t.Fatalf("another schema answered %q", got)
	}
	if n := testkit.PaymentRows(t, st.Pool(), ""); n != 1 {
		t.Fatalf("%d rows in the first schema, want 1", n)
	}
}
