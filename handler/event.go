package handler

import (
	"context"
	"errors"
	"fmt"

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
	hook ChangeHook
}

// eventUnit is the unit of lifecycle event e of source s, locked under key
// (its payment's lock: events of one payment are recorded one at a time).
func (h *Handler) eventUnit(s Source, e provider.Event, key string) *lifecycleUnit {
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
		Currency: e.Currency, RefundID: e.RefundID, Cumulative: e.Cumulative, At: e.At, Payload: e.Payload,
	}}
}

func (u *lifecycleUnit) lockKey() string { return u.key }
func (u *lifecycleUnit) ref() string     { return u.e.TransactionID }

// record records the event: "processed" whether or not it changed the
// payment's state (an event that changes nothing is recorded too, and
// forwards nothing).
func (u *lifecycleUnit) record(ctx context.Context) (string, error) {
	if _, err := u.h.store.RecordEvent(ctx, u.e, u.hook); err != nil {
		return "", err
	}
	return "processed", nil
}

func (u *lifecycleUnit) confirm(ctx context.Context) (string, error) {
	err := u.h.store.EventRecorded(ctx, u.e)
	if errors.Is(err, store.ErrDuplicate) {
		return "duplicate", nil
	}
	return "", err
}

func (u *lifecycleUnit) answer(res string) any {
	return result{Result: res, TransactionID: u.e.TransactionID}
}
