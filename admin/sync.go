package admin

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// PaymentSync records what a provider says of one payment through the
// webhook pipeline: from its status API (Sync), or from its synchronous
// answer the shop's backend posts (Confirm). Its errors carry the problem
// they are answered with (problem.From).
type PaymentSync interface {
	Sync(ctx context.Context, source, transactionID string) (SyncOutcome, error)
	Confirm(ctx context.Context, source string, answer []byte) (SyncOutcome, error)
}

// SyncOutcome is what a sync or a confirm came to.
type SyncOutcome struct {
	// Result is "processed" (recorded now), "duplicate" (recorded
	// already: the webhook came first), "ignored" (the source records no
	// event of that kind) or "not_final" (the provider's state is not one
	// to record yet; nothing was written).
	Result string
	// TransactionID is the payment's.
	TransactionID string
	// ProviderStatus is the provider's word: a PaymentIntent's status, an
	// Adyen resultCode.
	ProviderStatus string
}

// PaymentOrders derives the order a payment names and returns it as it
// is then (store.Orders.DerivePaymentOrder with the deriver's settings):
// store.ErrNotFound when the payment names none.
type PaymentOrders interface {
	PaymentOrder(ctx context.Context, source, transactionID string) (store.Order, error)
}

// maxConfirmBody bounds a confirmed answer's body.
const maxConfirmBody = 64 << 10

// syncView is the JSON of a sync or a confirm: the outcome and the
// payment's state as GET /admin/api/v1/payments/{source}/{transaction_id}
// answers it (null while paylock knows nothing of the payment).
type syncView struct {
	Result         string       `json:"result"`
	Source         string       `json:"source"`
	TransactionID  string       `json:"transaction_id"`
	ProviderStatus string       `json:"provider_status"`
	Payment        *paymentView `json:"payment"`
	// Order is the order the payment names, when orders are on and it
	// names one.
	Order *syncOrderView `json:"order,omitempty"`
}

// syncOrderView is the order of a synced payment. Amount and Currency are
// null while the order is unregistered.
type syncOrderView struct {
	OrderID    string  `json:"order_id"`
	Status     string  `json:"status"`
	Amount     *int64  `json:"amount"`
	Currency   *string `json:"currency"`
	AmountPaid int64   `json:"amount_paid"`
	Version    int     `json:"version"`
}

// paymentSync answers POST /admin/api/v1/payments/{source}/{transaction_id}/sync.
func (a *Admin) paymentSync(w http.ResponseWriter, r *http.Request) {
	source, txID := r.PathValue("source"), r.PathValue("transaction_id")
	out, err := a.cfg.Sync.Sync(r.Context(), source, txID)
	a.syncAnswer(w, r, source, out, err)
}

// paymentConfirm answers POST /admin/api/v1/payments/{source}/confirm.
func (a *Admin) paymentConfirm(w http.ResponseWriter, r *http.Request) {
	source := r.PathValue("source")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxConfirmBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			problem.Write(w, problem.New(http.StatusRequestEntityTooLarge, "too-large", "Body too large", "",
				"a confirmed answer is at most 64 KiB"))
			return
		}
		problem.Write(w, payload.Malformed("", "could not read the body"))
		return
	}
	out, err := a.cfg.Sync.Confirm(r.Context(), source, body)
	a.syncAnswer(w, r, source, out, err)
}

// syncAnswer writes a sync's or a confirm's answer: its problem, or its
// outcome with the payment's state read afresh and, when orders are on,
// the order it names derived at once: the deriver may not have run yet,
// and the checkout's backend waits on this answer.
func (a *Admin) syncAnswer(w http.ResponseWriter, r *http.Request, source string, out SyncOutcome, err error) {
	if err != nil {
		if p := problem.Write(w, err); p.Status >= 500 {
			a.log.ErrorContext(r.Context(), "admin: a payment sync failed", "source", source, "error", err)
		}
		return
	}
	v := syncView{Result: out.Result, Source: source, TransactionID: out.TransactionID, ProviderStatus: out.ProviderStatus}
	p, err := a.cfg.Payments.PaymentState(r.Context(), source, out.TransactionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		a.storeError(w, r, "reading a synced payment failed", "payment", err)
		return
	default:
		pv := paymentViewOf(p)
		v.Payment = &pv
	}
	if v.Payment != nil && a.cfg.PaymentOrders != nil {
		o, err := a.cfg.PaymentOrders.PaymentOrder(r.Context(), source, out.TransactionID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			a.storeError(w, r, "deriving a synced payment's order failed", "order", err)
			return
		default:
			ov := syncOrderView{OrderID: o.OrderID, Status: string(o.Status), AmountPaid: o.AmountPaid, Version: o.Version}
			if o.Registered {
				ov.Amount, ov.Currency = &o.Amount, &o.Currency
			}
			v.Order = &ov
		}
	}
	a.log.InfoContext(r.Context(), "admin: payment synced", "source", source, "transaction_id", out.TransactionID,
		"result", out.Result, "provider_status", out.ProviderStatus, "who", Identity(r.Context()))
	writeJSON(w, http.StatusOK, v)
}
