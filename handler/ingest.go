package handler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// ErrUnknownSource is returned by Ingest and Check for a source name New was
// not given.
var ErrUnknownSource = errors.New("handler: unknown source")

// IngestResult is what one body given to Ingest or Check came to.
type IngestResult struct {
	// Result is the body's overall result, as a delivery's answer would
	// say it: "processed" when a record was written, "duplicate" when all
	// were already recorded, "ignored" when the body carries nothing to
	// record; Check says "missing" when a record is not stored yet.
	Result string
	// Records are the body's records, in order.
	Records []IngestRecord
}

// IngestRecord is one record of an ingested body.
type IngestRecord struct {
	// Ref identifies the record: a payment's transaction id.
	Ref string
	// Result is "processed" (recorded now) or "duplicate" (already
	// recorded as sent); Check says "missing" instead of recording.
	Result string
}

// Ingest records a body of source that came from the provider's
// authenticated API rather than as a webhook (reconciliation): no
// signature is checked, and the body then takes the very steps of a
// verified delivery, the source's adapter, each record's lock, the insert
// under the lease (with its forward jobs, which the store inserts in the
// same transaction) and the source's record hooks, with the
// finished marker on release, within RequestTimeout. It logs one line, as a delivery does, unless
// the body was already recorded or carries nothing to record.
//
// It returns ErrUnknownSource for a source New was not given, an error
// wrapping store.ErrMismatch when paylock holds a record under the same
// transaction id with other content, the adapter's error for a body it
// refuses, or the lock's and the store's errors.
func (h *Handler) Ingest(ctx context.Context, source string, body []byte) (IngestResult, error) {
	return h.ingest(ctx, source, body, "", " (reconciled)", true)
}

// Replay runs a body of source kept in the delivery log (verified when it
// arrived) through the steps Ingest takes, with the delivery id its
// signature headers carried (signatureID, "" when none), and returns what
// Ingest returns: a body that records now says "processed", one recorded
// already "duplicate", one that still carries nothing to record
// "ignored"; the adapter's refusal is its error.
func (h *Handler) Replay(ctx context.Context, source string, body []byte, signatureID string) (IngestResult, error) {
	return h.ingest(ctx, source, body, signatureID, " (replayed)", false)
}

// Sync records a body of source built from the provider's answer about one
// payment (its status API's, or its synchronous answer the shop's backend
// confirmed) through the steps Ingest takes: the source's adapter, the
// payment's lock, the insert under the lease (with its forward jobs), the
// record hooks. how
// ("synced", "confirmed") marks its log line. Whichever of a sync and the
// payment's webhook comes first records; the other finds it recorded
// ("duplicate"). It returns Ingest's errors.
func (h *Handler) Sync(ctx context.Context, source string, body []byte, how string) (IngestResult, error) {
	return h.ingest(ctx, source, body, "", " ("+how+")", true)
}

// ingest is Ingest, Replay and Sync: how is added to the log line's
// message. fromAPI says body came from the provider's API (Ingest, Sync)
// rather than as a webhook (Replay): a notifier source reads the one with
// its adapter, the other as notices whose payments it fetches.
func (h *Handler) ingest(ctx context.Context, source string, body []byte, headerID, how string, fromAPI bool) (IngestResult, error) {
	src, ok := h.sources[source]
	if !ok {
		return IngestResult{}, fmt.Errorf("%w: %q", ErrUnknownSource, source)
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	o := outcome{source: src.name, msg: src.logMsg + how, requestID: uuid.NewString(), secretIndex: -1}
	units, results, err := h.process(ctx, src, body, headerID, &o, fromAPI)
	o.status = 200
	if err != nil {
		o.err, o.result = err, "error"
		o.status = problem.From(err).Status
		if errors.Is(err, store.ErrMismatch) {
			o.result = "mismatch"
		}
	}
	if o.result != "duplicate" && o.result != "ignored" {
		// Already recorded is what reconciliation mostly finds: only
		// what it changes, or could not, gets a line.
		h.logDelivery(ctx, o, time.Since(start))
	}
	if err != nil {
		return IngestResult{}, err
	}
	res := IngestResult{Result: o.result, Records: make([]IngestRecord, len(units))}
	for i, u := range units {
		res.Records[i] = IngestRecord{Ref: u.ref(), Result: results[i]}
	}
	return res, nil
}

// Check reads a body of source from the provider's API as Ingest would,
// and changes nothing: each record is looked up in the store (no lock, no
// write). A record is "duplicate" when stored as sent, "missing" when not
// stored; the overall Result is "missing" when any record is. It returns
// Ingest's errors, an error wrapping store.ErrMismatch included.
func (h *Handler) Check(ctx context.Context, source string, body []byte) (IngestResult, error) {
	return h.check(ctx, source, body, true)
}

// CheckWebhook is Check for a webhook body (one the delivery log kept), as
// Replay would read it: a notice of a source whose webhooks only name
// payments (provider.Notifier) is "missing", since only a fetch can say
// what it would record.
func (h *Handler) CheckWebhook(ctx context.Context, source string, body []byte) (IngestResult, error) {
	return h.check(ctx, source, body, false)
}

func (h *Handler) check(ctx context.Context, source string, body []byte, fromAPI bool) (IngestResult, error) {
	src, ok := h.sources[source]
	if !ok {
		return IngestResult{}, fmt.Errorf("%w: %q", ErrUnknownSource, source)
	}
	parse := src.parse
	if fromAPI {
		parse = src.parseAPI
	}
	units, err := parse(body, "")
	if err != nil {
		return IngestResult{}, err
	}
	if len(units) == 0 {
		return IngestResult{Result: "ignored"}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout)
	defer cancel()
	res := IngestResult{Result: "duplicate", Records: make([]IngestRecord, len(units))}
	for i, u := range units {
		if _, notice := u.(*noticeUnit); notice {
			res.Result, res.Records[i] = "missing", IngestRecord{Ref: u.ref(), Result: "missing"}
			continue
		}
		r, err := u.confirm(ctx)
		switch {
		case errors.Is(err, store.ErrNotFound):
			r, res.Result = "missing", "missing"
		case err != nil:
			return IngestResult{}, err
		}
		res.Records[i] = IngestRecord{Ref: u.ref(), Result: r}
	}
	return res, nil
}
