package admin

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/paylock/paylock/store"
)

// PaymentStates is what the API's payments read: the listing, and one
// payment's lifecycle state and events. *store.Payments is one.
type PaymentStates interface {
	ListPayments(ctx context.Context, l store.PaymentList) ([]store.PaymentSummary, error)
	PaymentState(ctx context.Context, source, transactionID string) (store.PaymentState, error)
}

// paymentView is the JSON of GET /admin/api/v1/payments/{source}/{transaction_id}.
type paymentView struct {
	Source           string      `json:"source"`
	TransactionID    string      `json:"transaction_id"`
	Status           string      `json:"status"`
	Amount           int64       `json:"amount"`
	Currency         string      `json:"currency"`
	AmountAuthorized int64       `json:"amount_authorized"`
	AmountCaptured   int64       `json:"amount_captured"`
	AmountRefunded   int64       `json:"amount_refunded"`
	OverRefunded     bool        `json:"over_refunded"`
	Dispute          *string     `json:"dispute"`
	Version          int         `json:"version"`
	Events           []eventView `json:"events"`
}

// eventView is one event of a payment's timeline: its success (kind
// succeeded) or a lifecycle event, oldest first by arrival.
type eventView struct {
	EventID    string    `json:"event_id"`
	Kind       string    `json:"kind"`
	Amount     int64     `json:"amount"`
	Currency   string    `json:"currency,omitempty"`
	RefundID   string    `json:"refund_id,omitempty"`
	CaptureID  string    `json:"capture_id,omitempty"`
	Cumulative bool      `json:"cumulative,omitempty"`
	Stage      int       `json:"stage,omitempty"`
	Account    string    `json:"account,omitempty"`
	At         time.Time `json:"at,omitzero"` // the provider's date
	ReceivedAt time.Time `json:"received_at"`
}

// paymentViewOf is p as the JSON API and the console's timeline show it.
func paymentViewOf(p store.PaymentState) paymentView {
	v := paymentView{Source: p.Source, TransactionID: p.TransactionID, Status: string(p.Status), Amount: p.Amount,
		Currency: p.Currency, AmountAuthorized: p.AmountAuthorized, AmountCaptured: p.AmountCaptured,
		AmountRefunded: p.AmountRefunded, OverRefunded: p.OverRefunded, Version: p.Version, Events: []eventView{}}
	if p.Dispute != "" {
		d := string(p.Dispute)
		v.Dispute = &d
	}
	if p.Recorded {
		v.Events = append(v.Events, eventView{EventID: p.SuccessEventID, Kind: "succeeded", Amount: p.Amount,
			Currency: p.Currency, ReceivedAt: p.ReceivedAt})
	}
	for _, e := range p.Events {
		v.Events = append(v.Events, eventView{EventID: e.EventID, Kind: string(e.Kind), Amount: e.Amount, Currency: e.Currency,
			RefundID: e.RefundID, CaptureID: e.CaptureID, Cumulative: e.Cumulative, Stage: e.Stage, Account: e.Account,
			At: e.At, ReceivedAt: e.ReceivedAt})
	}
	slices.SortStableFunc(v.Events, func(a, b eventView) int { return a.ReceivedAt.Compare(b.ReceivedAt) })
	return v
}

// paymentJSON answers GET /admin/api/v1/payments/{source}/{transaction_id} with
// the payment's state and events, or a 404 problem when paylock knows
// nothing of it.
func (a *Admin) paymentJSON(w http.ResponseWriter, r *http.Request) {
	source, txID := r.PathValue("source"), r.PathValue("transaction_id")
	p, err := a.cfg.Payments.PaymentState(r.Context(), source, txID)
	if err != nil {
		a.storeError(w, r, "reading a payment failed", "payment", err)
		return
	}
	writeJSON(w, http.StatusOK, paymentViewOf(p))
}
