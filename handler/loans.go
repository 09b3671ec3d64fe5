package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// Disbursements is what the loan, payout and disbursement endpoints need
// from the store; *store.Disbursements satisfies it. When
// Config.Disbursements is nil those endpoints are not served.
type Disbursements interface {
	AcceptDisbursement(ctx context.Context, d store.Disbursement) (store.Disbursement, error)
	Disbursement(ctx context.Context, loanID string, tranche int) (store.Disbursement, error)
	ApplyPayoutStatus(ctx context.Context, eventID, payoutID string, status store.DisbursementStatus, reason string) (store.Disbursement, bool, error)
}

// maxLoanID leaves room in the idempotency key ("disburse-<loan_id>-<tranche>").
const maxLoanID = 200

// loanInput is a decoded and validated loan approval.
type loanInput struct {
	EventID  string `json:"event_id" validate:"required,max=255,txid"`
	LoanID   string `json:"loan_id" validate:"required,txid"`
	Tranche  int    `json:"tranche"`
	Amount   int64  `json:"amount" validate:"gt=0"`
	Currency string `json:"currency" validate:"required,len=3,uppercase,iso4217,tender"`
}

// loanResult is the JSON body of a 2xx answer to a loan webhook.
type loanResult struct {
	Result  string `json:"result"` // accepted or duplicate
	LoanID  string `json:"loan_id"`
	Tranche int    `json:"tranche"`
}

// decodeLoan decodes and validates a loan webhook body, with the same
// amount and currency rules as payments (r). The event id comes from the
// body or, failing that, from the signature headers (headerID, e.g.
// webhook-id).
func decodeLoan(r *payload.Rules, body []byte, headerID string) (loanInput, error) {
	var in loanInput
	var amountSet, currencySet bool
	tranche := int64(1)
	err := payload.DecodeObject(body, []payload.Field{
		{Name: "event_id", Decode: payload.DecodeString("event_id", &in.EventID)},
		{Name: "loan_id", Required: true, Decode: payload.DecodeString("loan_id", &in.LoanID)},
		{Name: "tranche", Decode: decodeCount("tranche", &tranche)},
		{Name: "amount", Required: true, Decode: payload.DecodeAmount("amount", &in.Amount, &amountSet)},
		{Name: "currency", Decode: payload.Present(&currencySet, payload.DecodeString("currency", &in.Currency))},
	})
	if err != nil {
		return in, err
	}
	if in.EventID, err = payload.EventID(in.EventID, headerID); err != nil {
		return in, err
	}
	in.LoanID = strings.TrimSpace(in.LoanID)
	if len(in.LoanID) > maxLoanID {
		return in, payload.Invalid("loan_id", fmt.Sprintf("loan_id must be at most %d characters", maxLoanID))
	}
	if tranche < 1 || tranche > 1<<31-1 {
		return in, payload.Invalid("tranche", "tranche must be an integer from 1 to 2147483647")
	}
	in.Tranche = int(tranche)
	if !currencySet { // only an absent currency takes the default, never ""
		if r.DefaultCurrency() == "" {
			return in, payload.Invalid("currency", "currency is required (no PAYLOCK_DEFAULT_CURRENCY is configured)")
		}
		in.Currency = r.DefaultCurrency()
	}
	if err := r.Validate(in); err != nil {
		return in, err
	}
	return in, nil
}

// decodeCount decodes a JSON integer (no fraction, no exponent) into *dst.
func decodeCount(name string, dst *int64) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		s := string(raw)
		if len(s) == 0 || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
			return payload.Malformed(name, name+" must be a JSON number (an integer)")
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if !payload.IsIntegerLiteral(raw) || err != nil {
			return payload.Invalid(name, name+" must be an integer from 1 to 2147483647")
		}
		*dst = v
		return nil
	}
}

// parseLoan reads a loan approval: one unit, the tranche's disbursement.
func (h *Handler) parseLoan(body []byte, headerID string) ([]unit, error) {
	in, err := decodeLoan(h.rules, body, headerID)
	if err != nil {
		return nil, err
	}
	return []unit{&loanUnit{h: h, d: store.Disbursement{
		LoanID: in.LoanID, Tranche: in.Tranche, Amount: in.Amount, Currency: in.Currency, EventID: in.EventID,
	}}}, nil
}

// loanUnit is a loan tranche to disburse: the event and the disbursement
// are recorded in one transaction under the tranche's lock.
type loanUnit struct {
	h *Handler
	d store.Disbursement
}

func (u *loanUnit) lockKey() string {
	return fmt.Sprintf("%sloan:%s:%d", u.h.cfg.LockPrefix, u.d.LoanID, u.d.Tranche)
}

func (u *loanUnit) ref() string { return store.IdempotencyKey(u.d.LoanID, u.d.Tranche) }

func (u *loanUnit) logAttrs() []slog.Attr {
	return []slog.Attr{slog.String("event_id", u.d.EventID), slog.String("loan_id", u.d.LoanID), slog.Int("tranche", u.d.Tranche)}
}

func (u *loanUnit) record(ctx context.Context) (string, error) {
	_, err := u.h.cfg.Disbursements.AcceptDisbursement(ctx, u.d)
	switch {
	case err == nil:
		return "accepted", nil
	case errors.Is(err, store.ErrMismatch):
		return "", fmt.Errorf("%w: %w", problem.ErrDisbursementMismatch, err)
	}
	return "", err
}

// confirm answers from the tranche's disbursement, if it has one.
func (u *loanUnit) confirm(ctx context.Context) (string, error) {
	stored, err := u.h.cfg.Disbursements.Disbursement(ctx, u.d.LoanID, u.d.Tranche)
	switch {
	case err != nil:
		return "", err
	case stored.Amount != u.d.Amount || stored.Currency != u.d.Currency:
		return "", fmt.Errorf("%w: loan %q tranche %d: %w", problem.ErrDisbursementMismatch, u.d.LoanID, u.d.Tranche, store.ErrMismatch)
	}
	return "duplicate", nil
}

func (u *loanUnit) answer(res string) any {
	return loanResult{Result: res, LoanID: u.d.LoanID, Tranche: u.d.Tranche}
}
