package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/store"
)

// listed is an EventLister of fixed events, then err.
type listed struct {
	events []provider.ListedEvent
	err    error
}

func (l listed) List(ctx context.Context, _ time.Time, fn func(provider.ListedEvent) error) error {
	for _, ev := range l.events {
		if err := fn(ev); err != nil {
			return err
		}
	}
	return l.err
}

// ingester answers each body (the event's Ref) as told, and counts the
// calls of Ingest and Check.
type ingester struct {
	results         map[string]handler.IngestResult
	errs            map[string]error
	ingests, checks int
}

func (i *ingester) answer(body []byte) (handler.IngestResult, error) {
	return i.results[string(body)], i.errs[string(body)]
}

func (i *ingester) Ingest(_ context.Context, _ string, body []byte) (handler.IngestResult, error) {
	i.ingests++
	return i.answer(body)
}

func (i *ingester) Check(_ context.Context, _ string, body []byte) (handler.IngestResult, error) {
	i.checks++
	return i.answer(body)
}

func record(ref, result string) handler.IngestResult {
	return handler.IngestResult{Result: result, Records: []handler.IngestRecord{{Ref: ref, Result: result}}}
}

func TestRunSettlesEachListedEventOnceAndTalliesWhatItFound(t *testing.T) {
	t.Parallel()
	ev := func(id, ref string) provider.ListedEvent {
		return provider.ListedEvent{ID: id, Ref: ref, Body: []byte(ref)}
	}
	events := listed{events: []provider.ListedEvent{
		ev("evt_1", "pi_new"), ev("evt_1", "pi_new"), ev("evt_2", "pi_old"), ev("evt_3", "pi_other"),
		ev("evt_4", "pi_broken"), ev("evt_5", "cus_1"),
	}}
	in := &ingester{
		results: map[string]handler.IngestResult{
			"pi_new": record("pi_new", "processed"), "pi_old": record("pi_old", "duplicate"),
			"cus_1": {Result: "ignored"},
		},
		errs: map[string]error{
			"pi_other":  fmt.Errorf("recorded otherwise: %w", store.ErrMismatch),
			"pi_broken": errors.New("database unavailable"),
		},
	}
	rep, err := reconcile.Payments{Source: "stripe", Events: events, Handler: in}.Run(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Seen != 5 || rep.AlreadyRecorded != 1 || rep.RecordedNow != 1 || rep.Ignored != 1 ||
		!slices.Equal(rep.Recorded, []string{"pi_new"}) || len(rep.Mismatched) != 1 || len(rep.Errors) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if d := rep.Mismatched[0]; d.EventID != "evt_3" || d.Ref != "pi_other" || !errors.Is(d.Err, store.ErrMismatch) {
		t.Errorf("mismatch %+v", d)
	}
	if d := rep.Errors[0]; d.EventID != "evt_4" || d.Ref != "pi_broken" {
		t.Errorf("error %+v", d)
	}
	if in.ingests != 5 || in.checks != 0 || rep.Clean() {
		t.Errorf("%d ingests, %d checks, clean %v", in.ingests, in.checks, rep.Clean())
	}

	in.ingests = 0
	if _, err := (reconcile.Payments{Source: "stripe", Events: events, Handler: in, DryRun: true}).Run(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if in.ingests != 0 || in.checks != 5 {
		t.Errorf("dry run: %d ingests, %d checks; want Check alone", in.ingests, in.checks)
	}
}

func TestRunReturnsTheListingsErrorWithTheReportSoFar(t *testing.T) {
	t.Parallel()
	refused := fmt.Errorf("listing: %w", provider.ErrRefused)
	in := &ingester{results: map[string]handler.IngestResult{"pi_1": record("pi_1", "duplicate")}}
	rep, err := reconcile.Payments{Events: listed{events: []provider.ListedEvent{{ID: "evt_1", Ref: "pi_1", Body: []byte("pi_1")}}, err: refused},
		Handler: in}.Run(context.Background(), time.Now())
	if !errors.Is(err, provider.ErrRefused) || rep.Seen != 1 || rep.AlreadyRecorded != 1 {
		t.Fatalf("Run = %+v, %v; want the one event settled and the refusal", rep, err)
	}
}
