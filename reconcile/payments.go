// Package reconcile compares what paylock recorded with what a provider's
// API says happened, and records what paylock missed through the pipeline
// a webhook takes (handler.Handler.Ingest).
//
// Payments lists a Stripe source's successful payment events for a window
// (StripeEvents, GET /v1/events) and gives each one to the handler: an
// event already recorded is a duplicate, one paylock never received is
// recorded now (with the same lock, insert and forward hook as its
// webhook), one recorded with other content is a mismatch. With DryRun it
// only reads (handler.Handler.Check).
package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/store"
)

// Ingester is the part of *handler.Handler reconciliation uses.
type Ingester interface {
	Ingest(ctx context.Context, source string, body []byte) (handler.IngestResult, error)
	Check(ctx context.Context, source string, body []byte) (handler.IngestResult, error)
}

// EventLister lists a provider's events of one type created since a time
// (StripeEvents).
type EventLister interface {
	List(ctx context.Context, typ string, since time.Time, fn func(event json.RawMessage) error) error
}

// Payments reconciles one source's payments.
type Payments struct {
	Source  string      // the source's name, as given to handler.New
	Types   []string    // the event types the source records (each is listed)
	Events  EventLister // the provider's API
	Handler Ingester
	DryRun  bool // read only: report what would be recorded
}

// Difference is one event that did not agree with paylock.
type Difference struct {
	EventID string
	Ref     string // the event's data.object.id (the transaction id)
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

// Run lists the events created at or after since and settles each one.
// An event that fails is reported in Errors and the others go on; Run
// returns an error only when the listing fails (ctx's error included),
// with the report of the events settled so far.
func (p Payments) Run(ctx context.Context, since time.Time) (Report, error) {
	var rep Report
	types := p.Types
	if len(types) == 0 {
		types = []string{"payment_intent.succeeded"}
	}
	seen := map[string]bool{}
	for _, typ := range types {
		err := p.Events.List(ctx, typ, since, func(ev json.RawMessage) error {
			var head struct {
				ID   string `json:"id"`
				Data struct {
					Object struct {
						ID string `json:"id"`
					} `json:"object"`
				} `json:"data"`
			}
			_ = json.Unmarshal(ev, &head)
			if seen[head.ID] {
				return nil
			}
			seen[head.ID] = true
			rep.Seen++
			p.settle(ctx, Difference{EventID: head.ID, Ref: head.Data.Object.ID}, ev, &rep)
			return ctx.Err()
		})
		if err != nil {
			return rep, fmt.Errorf("listing %s events: %w", typ, err)
		}
	}
	return rep, nil
}

func (p Payments) settle(ctx context.Context, d Difference, ev json.RawMessage, rep *Report) {
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
