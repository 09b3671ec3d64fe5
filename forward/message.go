package forward

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/store"
)

// paymentData is the data of a payment.recorded forward: the payment as
// recorded, and its state then (succeeded at version 1, unless events that
// arrived before it were folded with it).
type paymentData struct {
	Source           string          `json:"source"`
	TransactionID    string          `json:"transaction_id"`
	Amount           int64           `json:"amount"`
	Currency         string          `json:"currency"`
	EventID          string          `json:"event_id"`
	ReceivedAt       string          `json:"received_at"`
	Payload          json.RawMessage `json:"payload"`
	Status           string          `json:"status"`
	AmountAuthorized int64           `json:"amount_authorized"`
	AmountCaptured   int64           `json:"amount_captured"`
	AmountRefunded   int64           `json:"amount_refunded"`
	Dispute          *string         `json:"dispute"`
	Version          int             `json:"version"`
	// Unauthenticated lists the payload's members that the source's
	// signature did not cover (Config.Unsigned): as received, unproven.
	// The signature itself is never forwarded (Config.Verified).
	Unauthenticated []string `json:"unauthenticated,omitempty"`
}

// changeData is the data of a lifecycle forward (payment.failed,
// .canceled, .refunded, .dispute.opened, .dispute.closed): the payment's
// state after the change, and the provider event that made it.
type changeData struct {
	Source           string  `json:"source"`
	TransactionID    string  `json:"transaction_id"`
	Status           string  `json:"status"`
	Amount           int64   `json:"amount"`
	Currency         string  `json:"currency"`
	AmountAuthorized int64   `json:"amount_authorized"`
	AmountCaptured   int64   `json:"amount_captured"`
	AmountRefunded   int64   `json:"amount_refunded"`
	Dispute          *string `json:"dispute"`
	Version          int     `json:"version"`
	EventID          string  `json:"event_id"`
}

// dispute is a state's dispute as the messages say it: null for none.
func dispute(d string) *string {
	if d == "" {
		return nil
	}
	return &d
}

type envelope struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// message builds what one attempt of a's forward sends, at now: the body
// (reading the payment for payment.recorded), its ordering key, and the
// Standard Webhooks headers, signed with each of the worker's secrets when
// it has one (one webhook-signature entry per secret). Errors wrap
// store.ErrNotFound when the subject is gone.
func (w *Worker) message(ctx context.Context, a store.ForwardArgs, now time.Time) (Message, error) {
	body, err := w.body(ctx, a)
	if err != nil {
		return Message{}, err
	}
	return w.sealed(a, body, now), nil
}

// sealed is a's message with body, signed at now with the destination's
// secrets (unless it signs none) and with its headers.
func (w *Worker) sealed(a store.ForwardArgs, body []byte, now time.Time) Message {
	unix := strconv.FormatInt(now.Unix(), 10)
	m := Message{ID: a.ID, Type: a.Type, Timestamp: now, Key: messageKey(a), Body: body,
		Header: make(map[string]string, 4)}
	m.Header[HeaderID], m.Header[HeaderTimestamp] = a.ID, unix
	signer := w.signer
	if rt := w.router.route(a.Destination); rt != nil {
		for name, h := range rt.policy.Headers {
			m.Header[strings.ToLower(name)] = h.Value
		}
		if rt.signer != nil {
			signer = rt.signer // the destination's own (secrets_env)
		}
	}
	if signer == nil {
		return m // unsigned: a broker destination, which authenticates paylock itself
	}
	m.Header[HeaderSignature] = signer.Signature(a.ID, unix, body)
	return m
}

// messageKey is the ordering key of a's subject (Message.Key).
func messageKey(a store.ForwardArgs) string {
	if d := a.Disbursement; d != nil {
		return "disbursement:" + d.LoanID + ":" + strconv.Itoa(d.Tranche)
	}
	if o := a.Order; o != nil {
		return "order:" + o.OrderID
	}
	if op := a.Operator; op != nil {
		return "destination:" + op.Destination
	}
	return a.Source + ":" + a.TransactionID
}

// body builds what a forward job sends. Errors wrap store.ErrNotFound when
// the payment is gone.
func (w *Worker) body(ctx context.Context, a store.ForwardArgs) ([]byte, error) {
	var p *store.Payment
	if carried, ok := a.CarriedPayment(); ok {
		p = &carried // as its recording transaction wrote it: no read
	} else if a.Type == store.ForwardPaymentRecorded {
		got, err := w.st.Payment(ctx, a.Source, a.TransactionID)
		if err != nil {
			return nil, err
		}
		p = &got
	}
	d, err := messageData(a, p, w.cfg.Verified, w.cfg.Unsigned)
	if err != nil {
		return nil, err
	}
	return json.Marshal(envelope{Type: a.Type, Data: d})
}

// RecordedBody is the renderer of payment.recorded messages' bodies for
// store.Outbox.Render, with a worker's Config.Verified and Config.Unsigned
// (nil: none): the body a Worker with them builds of the same payment,
// byte for byte, which the express lane's drainer then sends as it is.
func RecordedBody(verified func(source string, payload []byte) []byte, unsigned func(source string, payload []byte) []string) store.MessageRenderer {
	return func(a store.ForwardArgs, p store.Payment) ([]byte, error) {
		if a.Type != store.ForwardPaymentRecorded {
			return nil, fmt.Errorf("forward: render a %q message: only %s are rendered when recorded", a.Type, store.ForwardPaymentRecorded)
		}
		d, err := messageData(a, &p, verified, unsigned)
		if err != nil {
			return nil, err
		}
		return json.Marshal(envelope{Type: a.Type, Data: d})
	}
}

// messageData is the data of a's message: for payment.recorded, of the
// payment p as recorded (its payload passed through verified, and the
// members unsigned names, when set). Errors wrap store.ErrNotFound when
// the job lacks its subject.
func messageData(a store.ForwardArgs, p *store.Payment, verified func(string, []byte) []byte, unsigned func(string, []byte) []string) (any, error) {
	switch {
	case a.Type == store.ForwardPaymentRecorded && p != nil:
		payload := json.RawMessage(p.Payload)
		if verified != nil {
			payload = verified(p.Source, p.Payload)
		}
		if !json.Valid(payload) {
			payload = json.RawMessage("null")
		}
		d := paymentData{
			Source: p.Source, TransactionID: p.TransactionID, Amount: p.Amount, Currency: p.Currency,
			EventID: p.EventID, ReceivedAt: p.ReceivedAt.UTC().Format(time.RFC3339Nano), Payload: payload,
			Status: "succeeded", Version: 1, AmountAuthorized: p.Amount, AmountCaptured: p.Amount,
		}
		if st := a.State; st != nil {
			d.Status, d.AmountRefunded, d.Dispute, d.Version = st.Status, st.AmountRefunded, dispute(st.Dispute), st.Version
			d.AmountAuthorized, d.AmountCaptured = st.Authorized(), st.Captured()
		}
		if unsigned != nil {
			d.Unauthenticated = unsigned(p.Source, p.Payload)
		}
		return d, nil
	case strings.HasPrefix(a.Type, "payment.") && a.State != nil:
		st := a.State
		return changeData{
			Source: a.Source, TransactionID: a.TransactionID, Status: st.Status, Amount: st.Amount, Currency: st.Currency,
			AmountAuthorized: st.Authorized(), AmountCaptured: st.Captured(), AmountRefunded: st.AmountRefunded,
			Dispute: dispute(st.Dispute), Version: st.Version, EventID: st.EventID,
		}, nil
	case strings.HasPrefix(a.Type, store.ForwardDisbursementPrefix) && a.Disbursement != nil:
		return a.Disbursement, nil
	case strings.HasPrefix(a.Type, store.ForwardOrderPrefix) && a.Order != nil:
		return a.Order, nil
	case isOperatorEvent(a.Type) && a.Operator != nil:
		return a.Operator, nil
	}
	return nil, fmt.Errorf("%w: forward job of type %q without its subject", store.ErrNotFound, a.Type)
}
