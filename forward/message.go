package forward

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// paymentData is the data of a payment.recorded forward.
type paymentData struct {
	Source        string          `json:"source"`
	TransactionID string          `json:"transaction_id"`
	Amount        int64           `json:"amount"`
	Currency      string          `json:"currency"`
	EventID       string          `json:"event_id"`
	ReceivedAt    string          `json:"received_at"`
	Payload       json.RawMessage `json:"payload"`
}

type envelope struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// message builds what one attempt of a's forward sends, at now: the body
// (reading the payment for payment.recorded), its ordering key, and the
// Standard Webhooks headers, signed with secret. Errors wrap
// store.ErrNotFound when the subject is gone.
func (w *Worker) message(ctx context.Context, a store.ForwardArgs, now time.Time) (Message, error) {
	body, err := w.body(ctx, a)
	if err != nil {
		return Message{}, err
	}
	m := Message{ID: a.ID, Type: a.Type, Timestamp: now, Key: messageKey(a), Body: body,
		Header: map[string]string{HeaderID: a.ID, HeaderTimestamp: strconv.FormatInt(now.Unix(), 10)}}
	for k, v := range signature.Sign(signature.SchemeStandard, w.cfg.Secret, a.ID, now, body) {
		m.Header[strings.ToLower(k)] = v[0]
	}
	return m, nil
}

// messageKey is the ordering key of a's subject (Message.Key).
func messageKey(a store.ForwardArgs) string {
	if d := a.Disbursement; d != nil {
		return "disbursement:" + d.LoanID + ":" + strconv.Itoa(d.Tranche)
	}
	return a.Source + ":" + a.TransactionID
}

// body builds what a forward job sends. Errors wrap store.ErrNotFound when
// the payment is gone.
func (w *Worker) body(ctx context.Context, a store.ForwardArgs) ([]byte, error) {
	switch {
	case a.Type == store.ForwardPaymentRecorded:
		p, err := w.st.Payment(ctx, a.Source, a.TransactionID)
		if err != nil {
			return nil, err
		}
		payload := json.RawMessage(p.Payload)
		if !json.Valid(payload) {
			payload = json.RawMessage("null")
		}
		return json.Marshal(envelope{Type: a.Type, Data: paymentData{
			Source: p.Source, TransactionID: p.TransactionID, Amount: p.Amount, Currency: p.Currency,
			EventID: p.EventID, ReceivedAt: p.ReceivedAt.UTC().Format(time.RFC3339Nano), Payload: payload,
		}})
	case strings.HasPrefix(a.Type, store.ForwardDisbursementPrefix) && a.Disbursement != nil:
		return json.Marshal(envelope{Type: a.Type, Data: a.Disbursement})
	}
	return nil, fmt.Errorf("%w: forward job of type %q without its subject", store.ErrNotFound, a.Type)
}
