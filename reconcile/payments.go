// Package reconcile compares what paylock recorded with what a provider's
// API says happened, and records what paylock missed through the pipeline
// a webhook takes (handler.Handler.Ingest).
//
// Payments lists a source's events for a window through its provider's
// API (a provider.EventLister: the stripe provider's lists GET /v1/events)
// and gives each one to the handler: an event already recorded is a
// duplicate, one paylock never received is recorded now (with the same
// lock, insert and forward hook as its webhook), one recorded with other
// content is a mismatch. With DryRun it only reads (handler.Handler.Check).
// Worker runs it periodically as a River job.
//
// Disbursements compares the disbursements paylock has not settled with
// the payout provider's payouts for their idempotency keys (Compare says
// which disagreements are differences, and of which kind); it changes
// nothing.
//
// Each run is a span (SpanPayments, SpanDisbursements) with its report's
// counts as attributes; the events it records and the lookups it makes are
// its children. Their TracerProvider fields default to the global
// provider.
package reconcile

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/store"
)

// Ingester is the part of *handler.Handler reconciliation uses.
type Ingester interface {
	Ingest(ctx context.Context, source string, body []byte) (handler.IngestResult, error)
	Check(ctx context.Context, source string, body []byte) (handler.IngestResult, error)
}

// Payments reconciles one source's payments.
type Payments struct {
	Source  string               // the source's name, as given to handler.New
	Events  provider.EventLister // the source's events at its provider's API
	Handler Ingester
	DryRun  bool // read only: report what would be recorded
	// TracerProvider makes each run's span (SpanPayments); nil: the
	// global provider.
	TracerProvider trace.TracerProvider
}

// Difference is one event that did not agree with paylock.
type Difference struct {
	EventID string
	Ref     string // what the event is about: the transaction id
	Err     error  // wraps store.ErrMismatch for a mismatch
}

// Report is what a reconciliation found.
type Report struct {
	Seen            int // events listed (each once)
	AlreadyRecorded int
	RecordedNow     int          // with DryRun: that would be recorded
	Ignored         int          // events the source records nothing of
	Recorded        []string     // transaction ids recorded now (would be, with DryRun)
	Mismatched      []Difference // recorded by paylock with other content
	Errors          []Difference // events that could not be settled (tried again next run)
}

// Clean reports whether every event was already recorded as listed.
func (r Report) Clean() bool {
	return r.RecordedNow == 0 && len(r.Mismatched) == 0 && len(r.Errors) == 0
}

// Run lists the events created at or after since and settles each one
// once (an event listed twice is settled once). An event that fails is
// reported in Errors and the others go on; Run returns an error only when
// the listing fails (ctx's error included), with the report of the events
// settled so far.
func (p Payments) Run(ctx context.Context, since time.Time) (rep Report, err error) {
	ctx, span := p.startSpan(ctx, since)
	defer func() {
		span.SetAttributes(rep.attributes()...)
		endRun(span, err)
	}()
	seen := map[string]bool{}
	err = p.Events.List(ctx, since, func(ev provider.ListedEvent) error {
		if seen[ev.ID] {
			return nil
		}
		seen[ev.ID] = true
		rep.Seen++
		p.settle(ctx, Difference{EventID: ev.ID, Ref: ev.Ref}, ev.Body, &rep)
		return ctx.Err()
	})
	return rep, err
}

func (p Payments) settle(ctx context.Context, d Difference, ev []byte, rep *Report) {
	fn := p.Handler.Ingest
	if p.DryRun {
		fn = p.Handler.Check
	}
	res, err := fn(ctx, p.Source, ev)
	switch {
	case errors.Is(err, store.ErrMismatch):
		d.Err = err
		rep.Mismatched = append(rep.Mismatched, d)
		return
	case err != nil:
		d.Err = err
		rep.Errors = append(rep.Errors, d)
		return
	case len(res.Records) == 0:
		rep.Ignored++
		return
	}
	for _, r := range res.Records {
		switch r.Result {
		case "duplicate":
			rep.AlreadyRecorded++
		default: // "processed", or "missing" with DryRun
			rep.RecordedNow++
			rep.Recorded = append(rep.Recorded, r.Ref)
		}
	}
}
