package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/problem"
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
func decodePayoutStatus(r *payload.Rules, body []byte, headerID string) (payoutInput, error) {
	var in payoutInput
	err := payload.DecodeObject(body, []payload.Field{
		{Name: "event_id", Decode: payload.DecodeString("event_id", &in.EventID)},
		{Name: "payout_id", Required: true, Decode: payload.DecodeString("payout_id", &in.PayoutID)},
		{Name: "status", Required: true, Decode: payload.DecodeString("status", &in.Status)},
		{Name: "failure_reason", Decode: payload.DecodeString("failure_reason", &in.FailureReason)},
	})
	if err != nil {
		return in, err
	}
	if in.EventID, err = payload.EventID(in.EventID, headerID); err != nil {
		return in, err
	}
	in.PayoutID = strings.TrimSpace(in.PayoutID)
	if in.Status != "paid" && in.Status != "failed" {
		return in, payload.Invalid("status", `status must be "paid" or "failed"`)
	}
	if len(in.FailureReason) > 1000 {
		return in, payload.Invalid("failure_reason", "failure_reason must be at most 1000 bytes")
	}
	if err := r.Validate(in); err != nil {
		return in, err
	}
	return in, nil
}

// parsePayoutStatus reads a payout status notification: one unit, without
// a Redis lock (the update is a compare-and-set on the row's status).
func (h *Handler) parsePayoutStatus(body []byte, headerID string) ([]unit, error) {
	in, err := decodePayoutStatus(h.rules, body, headerID)
	if err != nil {
		return nil, err
	}
	return []unit{&payoutUnit{h: h, in: in}}, nil
}

// payoutUnit is a provider's status for a payout: one transaction records
// the event id and moves the disbursement forward if the status ranks
// higher.
type payoutUnit struct {
	h      *Handler
	in     payoutInput
	status store.DisbursementStatus // the disbursement's status after record
}

func (u *payoutUnit) lockKey() string { return "" }
func (u *payoutUnit) ref() string     { return u.in.PayoutID }

func (u *payoutUnit) logAttrs() []slog.Attr {
	return []slog.Attr{slog.String("event_id", u.in.EventID), slog.String("payout_id", u.in.PayoutID), slog.String("payout_status", u.in.Status)}
}

func (u *payoutUnit) record(ctx context.Context) (string, error) {
	d, applied, err := u.h.cfg.Disbursements.ApplyPayoutStatus(ctx, u.in.EventID, u.in.PayoutID, store.DisbursementStatus(u.in.Status), u.in.FailureReason)
	u.status = d.Status
	switch {
	case err == nil && applied:
		return "applied", nil
	case err == nil:
		return "ignored", nil
	case errors.Is(err, store.ErrEventSeen):
		return "duplicate", nil
	case errors.Is(err, store.ErrNotFound):
		// The worker may not have saved the provider's id yet: 404 makes the
		// provider retry, and nothing was recorded, so the retry applies.
		return "", fmt.Errorf("%w: %w", problem.ErrUnknownPayout, err)
	case errors.Is(err, store.ErrMismatch):
		return "", fmt.Errorf("%w: %w", problem.ErrDisbursementMismatch, err)
	}
	return "", err
}

// confirm is never needed: the unit takes no lock, so no other delivery
// settles it for this one.
func (u *payoutUnit) confirm(context.Context) (string, error) {
	return "", fmt.Errorf("payout %q: %w", u.in.PayoutID, store.ErrNotFound)
}

func (u *payoutUnit) answer(res string) any {
	return payoutResult{Result: res, PayoutID: u.in.PayoutID, Status: string(u.status)}
}
