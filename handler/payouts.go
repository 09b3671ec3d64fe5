package handler

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/paylock/paylock/store"
)

// payoutInput is a decoded and validated payout status notification.
type payoutInput struct {
	EventID       string `json:"event_id" validate:"required,max=255,txid"`
	PayoutID      string `json:"payout_id" validate:"required,max=255,txid"`
	Status        string `json:"status"`         // checked by decodePayoutStatus: paid or failed
	FailureReason string `json:"failure_reason"` // at most 1000 bytes
}

// payoutResult is the JSON body of a 2xx answer to a payout notification.
type payoutResult struct {
	Result   string `json:"result"` // applied, ignored or duplicate
	PayoutID string `json:"payout_id"`
	Status   string `json:"status,omitempty"` // the disbursement's status afterwards
}

// decodePayoutStatus decodes and validates a payout notification body. The
// event id comes from the body or, failing that, from the signature headers.
func (r *inputRules) decodePayoutStatus(body []byte, headerID string) (payoutInput, error) {
	var in payoutInput
	err := decodeObject(body, []field{
		{name: "event_id", decode: decodeString("event_id", &in.EventID)},
		{name: "payout_id", required: true, decode: decodeString("payout_id", &in.PayoutID)},
		{name: "status", required: true, decode: decodeString("status", &in.Status)},
		{name: "failure_reason", decode: decodeString("failure_reason", &in.FailureReason)},
	})
	if err != nil {
		return in, err
	}
	if in.EventID, err = deliveryEventID(in.EventID, headerID); err != nil {
		return in, err
	}
	in.PayoutID = strings.TrimSpace(in.PayoutID)
	if in.Status != "paid" && in.Status != "failed" {
		return in, unprocessable("status", `status must be "paid" or "failed"`)
	}
	if len(in.FailureReason) > 1000 {
		return in, unprocessable("failure_reason", "failure_reason must be at most 1000 bytes")
	}
	if err := r.v.Struct(in); err != nil {
		return in, validationProblem(err)
	}
	return in, nil
}

func (h *Handler) payouts(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	o := outcome{requestID: requestID(r)}
	w.Header().Set("X-Request-Id", o.requestID)
	res, in, err := h.payoutStatus(w, r, &o)
	h.answer(w, &o, res, err)
	took := time.Since(start)
	h.cfg.Metrics.observe("payouts", o, took)
	h.logDelivery(r.Context(), "payout webhook", o, took,
		slog.String("event_id", in.EventID), slog.String("payout_id", in.PayoutID), slog.String("payout_status", in.Status))
}

// payoutStatus runs one provider notification: read, verify, decode,
// validate, then one transaction that records the event id and moves the
// disbursement forward if the status ranks higher. No Redis lock: the
// update is a compare-and-set on the row's current status.
func (h *Handler) payoutStatus(w http.ResponseWriter, r *http.Request, o *outcome) (payoutResult, payoutInput, error) {
	ctx := r.Context()
	body, headerID, err := h.readVerified(w, r, o)
	if err != nil {
		return payoutResult{}, payoutInput{}, err
	}
	in, err := h.rules.decodePayoutStatus(body, headerID)
	if err != nil {
		return payoutResult{}, in, err
	}
	o.txID = in.PayoutID
	o.dbWrites++
	d, applied, err := h.cfg.Disbursements.ApplyPayoutStatus(ctx, in.EventID, in.PayoutID, store.DisbursementStatus(in.Status), in.FailureReason)
	res := payoutResult{PayoutID: in.PayoutID, Status: string(d.Status)}
	switch {
	case err == nil && applied:
		res.Result = "applied"
	case err == nil:
		res.Result = "ignored"
	case errors.Is(err, store.ErrEventSeen):
		res.Result = "duplicate"
	case errors.Is(err, store.ErrNotFound):
		// The worker may not have saved the provider's id yet: 404 makes the
		// provider retry, and nothing was recorded, so the retry applies.
		return payoutResult{}, in, fmt.Errorf("%w: %w", errUnknownPayout, err)
	case errors.Is(err, store.ErrMismatch):
		return payoutResult{}, in, fmt.Errorf("%w: %w", errDisbursementMismatch, err)
	default:
		return payoutResult{}, in, err
	}
	o.result = res.Result
	return res, in, nil
}
