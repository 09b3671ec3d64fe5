package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/store"
)

// lifecycleUnit is one lifecycle event of a delivery (a refund, a failure,
// a dispute): recorded once per source and event id, under its payment's
// lock, folded into the payment's state (store.Payments.RecordEvent).
type lifecycleUnit struct {
	h    *Handler
	e    store.PaymentEvent
	key  string
	hook ChangeHook // the embedder's (Source.OnChange); the store adds the change's forward jobs itself
	body []byte     // the delivery's raw body, kept with a contradiction
}

// eventUnit is the unit of lifecycle event e of source s, locked under key
// (its payment's lock: events of one payment are recorded one at a time).
func (h *Handler) eventUnit(s Source, e provider.Event, key string, body []byte) *lifecycleUnit {
	var hook ChangeHook
	if fn := s.OnChange; fn != nil {
		hook = func(ctx context.Context, tx pgx.Tx, c store.Change) error {
			if err := fn(ctx, tx, c); err != nil {
				return fmt.Errorf("%w: %w", problem.ErrHook, err)
			}
			return nil
		}
	}
	return &lifecycleUnit{h: h, key: key, hook: hook, e: store.PaymentEvent{
		Source: s.Name, TransactionID: e.TransactionID, EventID: e.EventID, Kind: e.Kind, Amount: e.Amount,
		Currency: e.Currency, RefundID: e.RefundID, CaptureID: e.CaptureID, Cumulative: e.Cumulative, Stage: e.Stage,
		Account: e.Account, At: e.At, Payload: e.Payload,
	}, body: body}
}

func (u *lifecycleUnit) lockKey() string { return u.key }
func (u *lifecycleUnit) ref() string     { return u.e.TransactionID }

// record records the event: "processed" whether or not it changed the
// payment's state (an event that changes nothing is recorded too, and
// forwards nothing). The store inserts a change's forward jobs in the
// same call (store.Outbox.Route).
func (u *lifecycleUnit) record(ctx context.Context) (string, error) {
	if _, err := u.h.store.RecordEvent(ctx, u.e, u.hook); err != nil {
		u.noteContradiction(ctx, err)
		return "", err
	}
	return "processed", nil
}

func (u *lifecycleUnit) confirm(ctx context.Context) (string, error) {
	err := u.h.store.EventRecorded(ctx, u.e)
	if errors.Is(err, store.ErrDuplicate) {
		return "duplicate", nil
	}
	u.noteContradiction(ctx, err)
	return "", err
}

// noteContradiction keeps a delivery whose event id is recorded with
// another payment, type, amount, currency, refund or capture as a review
// item naming what disagreed (store.Mismatch.Detail). The delivery is
// answered 422 whatever happens here: a failure is logged, and the PSP's
// retry writes the item.
func (u *lifecycleUnit) noteContradiction(ctx context.Context, err error) {
	if !errors.Is(err, store.ErrMismatch) {
		return
	}
	m := store.Mismatch{
		Source: u.e.Source, TransactionID: u.e.TransactionID, Amount: u.e.Amount, Currency: u.e.Currency,
		EventID: u.e.EventID, RequestID: requestIDFrom(ctx), Body: u.body, Detail: store.MismatchDetail(err),
	}
	if m.Detail == "" {
		m.Detail = "the event contradicts what is recorded"
	}
	if err := u.h.store.RecordMismatch(ctx, m); err != nil {
		u.h.log.ErrorContext(ctx, "keeping a contradicting delivery for review failed; the PSP's retry keeps it",
			slog.String("source", m.Source), slog.String("transaction_id", m.TransactionID),
			slog.String("request_id", m.RequestID), slog.Any("error", err))
	}
}

func (u *lifecycleUnit) answer(res string) any {
	return result{Result: res, TransactionID: u.e.TransactionID}
}
