package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/store"
)

// The kinds of difference between a disbursement and the payout provider's
// payout for its idempotency key (DisbursementDiff.Kind).
const (
	// PendingHasPayout: pending here, but the provider has a payout for the
	// key (a row untouched for the grace, or flagged for review).
	PendingHasPayout = "pending_has_payout"
	// SentMissing: sent here, but the provider has no payout for the key.
	SentMissing = "sent_missing"
	// SentOtherPayout: sent here as one payout, the provider's for the key
	// is another.
	SentOtherPayout = "sent_other_payout"
	// SettledUnrecorded: the provider says paid or failed, the row is still
	// sent after the grace (its status notification was lost).
	SettledUnrecorded = "settled_unrecorded"
	// FailedHasPayout: failed here (retried, no provider_ref), but the
	// provider has a payout for the key: the money may have gone out.
	FailedHasPayout = "failed_has_payout"
	// LookupRefused: the provider refused the lookup (a 4xx other than 404).
	LookupRefused = "lookup_refused"
	// LookupFailed: the lookup failed (timeout, 5xx...) LookupTries times.
	LookupFailed = "lookup_failed"
)

// LookupTries and LookupConcurrency bound the calls to the provider:
// temporary failures are tried again after 1s and 2s (or the provider's
// Retry-After, up to 10s); LookupConcurrency lookups run at once.
const (
	LookupTries       = 3
	LookupConcurrency = 4
)

// DisbursementDiff is one disbursement that does not agree with the
// provider.
type DisbursementDiff struct {
	Kind         string // PendingHasPayout, SentMissing, ...
	Disbursement store.Disbursement
	Theirs       string // the provider's payout ("po_1 paid"), "none" or "?"
	Detail       string
}

// Lookup is the provider's answer for one disbursement's key.
type Lookup struct {
	Payout payout.Payout
	Err    error // wraps payout.ErrNotFound, ErrRefused or ErrTemporary
}

// Compare decides whether the provider's answer for d's key is a
// difference. now and grace judge how long a row may lag behind the
// provider: a pending row the worker touched within grace may be waiting
// for an answer it lost; a sent row whose status notification is within
// grace may still be on its way.
func Compare(d store.Disbursement, r Lookup, grace time.Duration, now time.Time) (DisbursementDiff, bool) {
	diff := DisbursementDiff{Disbursement: d, Theirs: "?"}
	switch {
	case errors.Is(r.Err, payout.ErrNotFound):
		diff.Theirs = "none"
	case errors.Is(r.Err, payout.ErrRefused):
		diff.Kind, diff.Detail = LookupRefused, r.Err.Error()
		return diff, true
	case r.Err != nil:
		diff.Kind, diff.Detail = LookupFailed, r.Err.Error()
		return diff, true
	default:
		diff.Theirs = r.Payout.ID + " " + r.Payout.Status
	}
	found := r.Err == nil
	switch d.Status {
	case store.StatusPending:
		return comparePending(diff, found, grace, now)
	case store.StatusSent:
		return compareSent(diff, r.Payout, found, grace, now)
	case store.StatusFailed:
		// Only retried failures without a provider_ref are looked up: an
		// earlier attempt's answer may have been lost after the provider
		// created the payout, and the refusal that failed the row said
		// nothing about it.
		if found {
			diff.Kind, diff.Detail = FailedHasPayout, fmt.Sprintf("failed after %d attempts (%s), but the provider has the payout: adopt it (docs/disbursements.md)", d.Attempts, d.LastError)
			return diff, true
		}
	}
	return diff, false
}

func comparePending(diff DisbursementDiff, found bool, grace time.Duration, now time.Time) (DisbursementDiff, bool) {
	d := diff.Disbursement
	switch {
	case !found:
		return diff, false
	case d.ReviewReason != "":
		diff.Kind, diff.Detail = PendingHasPayout, "flagged for review, but the provider has the payout: adopt it (docs/disbursements.md)"
		return diff, true
	case now.Sub(d.UpdatedAt) > grace:
		diff.Kind, diff.Detail = PendingHasPayout, fmt.Sprintf("the worker has not saved the provider's answer for %s: is it running?", now.Sub(d.UpdatedAt).Round(time.Second))
		return diff, true
	}
	return diff, false
}

func compareSent(diff DisbursementDiff, p payout.Payout, found bool, grace time.Duration, now time.Time) (DisbursementDiff, bool) {
	d := diff.Disbursement
	switch {
	case !found:
		diff.Kind, diff.Detail = SentMissing, "the provider has no payout under the key this row was sent with"
		return diff, true
	case p.ID != d.ProviderRef:
		diff.Kind, diff.Detail = SentOtherPayout, fmt.Sprintf("recorded as %s, the provider's payout for the key is %s", d.ProviderRef, p.ID)
		return diff, true
	case (p.Status == "paid" || p.Status == "failed") && now.Sub(d.StatusSince) > grace:
		diff.Kind, diff.Detail = SettledUnrecorded, fmt.Sprintf("the provider says %s; no status notification reached paylock in %s", p.Status, now.Sub(d.StatusSince).Round(time.Second))
		return diff, true
	}
	return diff, false
}

// DisbursementRows is what Disbursements reads from the store
// (*store.Disbursements).
type DisbursementRows interface {
	StuckDisbursements(ctx context.Context, olderThan time.Duration) ([]store.Disbursement, error)
	RetriedFailures(ctx context.Context) ([]store.Disbursement, error)
}

// PayoutLookup is what Disbursements asks the payout provider
// (*payout.Client).
type PayoutLookup interface {
	Lookup(ctx context.Context, key string) (payout.Payout, error)
}

// Disbursements compares the disbursements paylock has not settled with
// the payout provider: every pending and sent row (flagged ones included),
// and every failed one without a provider_ref that was attempted more than
// once. It changes nothing.
type Disbursements struct {
	Rows     DisbursementRows
	Provider PayoutLookup
	Timeout  time.Duration    // one lookup; tried LookupTries times while the provider is unavailable
	Grace    time.Duration    // how long a row may lag behind the provider (Compare)
	Now      func() time.Time // the clock rows are judged by once looked up; nil: time.Now
	// TracerProvider makes each run's span (SpanDisbursements); nil: the
	// global provider.
	TracerProvider trace.TracerProvider
}

// DisbursementReport is what Disbursements.Run found.
type DisbursementReport struct {
	Diffs                 []DisbursementDiff
	Pending, Sent, Failed int       // the rows compared, by status
	At                    time.Time // when they were compared, after the lookups
}

// Run reads the rows, looks each key up at the provider and compares. It
// returns ctx's error when ctx ends before every row is looked up.
func (c Disbursements) Run(ctx context.Context) (rep DisbursementReport, err error) {
	ctx, span := startRun(ctx, c.TracerProvider, SpanDisbursements)
	defer func() {
		span.SetAttributes(rep.attributes()...)
		endRun(span, err)
	}()
	// Every row pending or sent (in its status for longer than nothing),
	// flagged ones included, oldest first.
	rows, err := c.Rows.StuckDisbursements(ctx, 0)
	if err != nil {
		return DisbursementReport{}, err
	}
	retried, err := c.Rows.RetriedFailures(ctx)
	if err != nil {
		return DisbursementReport{}, err
	}
	rows = append(rows, retried...)
	results := c.lookupAll(ctx, rows)
	if err := ctx.Err(); err != nil {
		return DisbursementReport{}, err
	}
	rep = DisbursementReport{At: time.Now()}
	if c.Now != nil {
		rep.At = c.Now()
	}
	for i, d := range rows {
		switch d.Status {
		case store.StatusPending:
			rep.Pending++
		case store.StatusSent:
			rep.Sent++
		default:
			rep.Failed++
		}
		if diff, ok := Compare(d, results[i], c.Grace, rep.At); ok {
			rep.Diffs = append(rep.Diffs, diff)
		}
	}
	return rep, nil
}

// lookupAll looks up every row's key, LookupConcurrency at a time.
// results[i] is rows[i]'s.
func (c Disbursements) lookupAll(ctx context.Context, rows []store.Disbursement) []Lookup {
	results := make([]Lookup, len(rows))
	sem := make(chan struct{}, LookupConcurrency)
	var wg sync.WaitGroup
	for i, d := range rows {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			results[i].Err = ctx.Err()
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			results[i] = c.lookup(ctx, d.IdempotencyKey)
		})
	}
	wg.Wait()
	return results
}

// lookup asks for key's payout, each call bounded by Timeout, tried
// LookupTries times while the provider is unavailable.
func (c Disbursements) lookup(ctx context.Context, key string) Lookup {
	wait := time.Second
	for try := 1; ; try++ {
		cctx, cancel := context.WithTimeout(ctx, c.Timeout)
		p, err := c.Provider.Lookup(cctx, key)
		cancel()
		if err == nil || !errors.Is(err, payout.ErrTemporary) || try == LookupTries {
			return Lookup{Payout: p, Err: err}
		}
		d := wait
		var se *payout.StatusError
		if errors.As(err, &se) && se.RetryAfter > d {
			d = min(se.RetryAfter, 10*time.Second)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return Lookup{Err: err}
		case <-t.C:
		}
		wait *= 2
	}
}
