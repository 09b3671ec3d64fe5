package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/store"
)

// Disbursements is what the loan, payout and disbursement endpoints need
// from the store. When Config.Disbursements is nil those endpoints are not
// served.
type Disbursements interface {
	AcceptDisbursement(ctx context.Context, d store.Disbursement) (store.Disbursement, error)
	Disbursement(ctx context.Context, loanID string, tranche int) (store.Disbursement, error)
	ApplyPayoutStatus(ctx context.Context, eventID, payoutID string, status store.DisbursementStatus, reason string) (store.Disbursement, bool, error)
}

// Errors of the disbursement endpoints, answered by toProblem.
var (
	// errDisbursementMismatch: the event contradicts what is recorded.
	errDisbursementMismatch = errors.New("handler: event contradicts the recorded disbursement")
	// errUnknownPayout: no disbursement has the payout id (yet).
	errUnknownPayout = errors.New("handler: no disbursement has this payout id")
)

// maxLoanID leaves room in the idempotency key ("disburse-<loan_id>-<tranche>").
const maxLoanID = 200

func (h *Handler) routeDisbursements() {
	h.mux.HandleFunc("POST /webhooks/loans", h.loans)
	h.mux.HandleFunc("POST /webhooks/payouts", h.payouts)
	h.mux.HandleFunc("GET /disbursements/{loan_id}/{tranche}", h.disbursement)
	h.mux.HandleFunc("/webhooks/loans", methodNotAllowed(http.MethodPost))
	h.mux.HandleFunc("/webhooks/payouts", methodNotAllowed(http.MethodPost))
	h.mux.HandleFunc("/disbursements/{loan_id}/{tranche}", methodNotAllowed(http.MethodGet))
}

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

// decodeLoan decodes and validates a loan webhook body, with the same rules
// as payments. The event id comes from the body or, failing that, from the
// signature headers (headerID, e.g. webhook-id).
func (r *inputRules) decodeLoan(body []byte, headerID string) (loanInput, error) {
	var in loanInput
	var amountSet, currencySet bool
	tranche := int64(1)
	err := decodeObject(body, []field{
		{name: "event_id", decode: decodeString("event_id", &in.EventID)},
		{name: "loan_id", required: true, decode: decodeString("loan_id", &in.LoanID)},
		{name: "tranche", decode: decodeCount("tranche", &tranche)},
		{name: "amount", required: true, decode: decodeAmount("amount", &in.Amount, &amountSet)},
		{name: "currency", decode: present(&currencySet, decodeString("currency", &in.Currency))},
	})
	if err != nil {
		return in, err
	}
	if in.EventID, err = deliveryEventID(in.EventID, headerID); err != nil {
		return in, err
	}
	in.LoanID = strings.TrimSpace(in.LoanID)
	if len(in.LoanID) > maxLoanID {
		return in, unprocessable("loan_id", fmt.Sprintf("loan_id must be at most %d characters", maxLoanID))
	}
	if tranche < 1 || tranche > 1<<31-1 {
		return in, unprocessable("tranche", "tranche must be an integer from 1 to 2147483647")
	}
	in.Tranche = int(tranche)
	if !currencySet { // only an absent currency takes the default, never ""
		if r.defaultCurrency == "" {
			return in, unprocessable("currency", "currency is required (no PAYLOCK_DEFAULT_CURRENCY is configured)")
		}
		in.Currency = r.defaultCurrency
	}
	if err := r.v.Struct(in); err != nil {
		return in, validationProblem(err)
	}
	return in, nil
}

// decodeCount decodes a JSON integer (no fraction, no exponent) into *dst.
func decodeCount(name string, dst *int64) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		s := string(raw)
		if len(s) == 0 || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
			return badRequest(name, name+" must be a JSON number (an integer)")
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if !integerLiteral.MatchString(s) || err != nil {
			return unprocessable(name, name+" must be an integer from 1 to 2147483647")
		}
		*dst = v
		return nil
	}
}

func (h *Handler) loans(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	o := outcome{requestID: requestID(r)}
	w.Header().Set("X-Request-Id", o.requestID)
	res, in, err := h.loan(w, r, &o)
	h.answer(w, &o, res, err)
	took := time.Since(start)
	h.cfg.Metrics.observe("loans", o, took)
	h.logDelivery(r.Context(), "loan webhook", o, took,
		slog.String("event_id", in.EventID), slog.String("loan_id", in.LoanID), slog.Int("tranche", in.Tranche))
}

// answer writes res, or err as problem+json, and notes the outcome.
func (h *Handler) answer(w http.ResponseWriter, o *outcome, res any, err error) {
	if err != nil {
		o.err = err
		p := writeError(w, err)
		o.status, o.result = p.Status, "error"
		if errors.Is(err, errDisbursementMismatch) {
			o.result = "mismatch"
		}
		return
	}
	o.status = http.StatusOK
	writeJSON(w, http.StatusOK, res)
}

// logDelivery writes one line per delivery: info for 2xx, warn for 4xx
// refusals, error for a mismatch or a 5xx.
func (h *Handler) logDelivery(ctx context.Context, msg string, o outcome, took time.Duration, attrs ...slog.Attr) {
	level := logLevelFor(o.status)
	if o.result == "mismatch" {
		level = slog.LevelError
	}
	attrs = append(attrs,
		slog.String("request_id", o.requestID),
		slog.String("outcome", o.result),
		slog.Int("status", o.status),
		slog.Duration("duration", took),
	)
	if o.lockMode != "" {
		attrs = append(attrs, slog.String("lock_mode", o.lockMode),
			slog.Duration("lock_wait", o.lockWait), slog.Duration("lock_hold", o.lockHeld))
	}
	if o.sigFailure != "" {
		attrs = append(attrs, slog.String("signature_failure", o.sigFailure))
	}
	if o.err != nil && (o.status >= 500 || o.result == "mismatch") {
		attrs = append(attrs, slog.String("error", o.err.Error()))
	}
	h.log.LogAttrs(ctx, level, msg, attrs...)
}

// loan runs one loan webhook: read, verify, decode, validate, lock the
// tranche, record the event and the disbursement in one transaction under
// the lock's lease, release, answer.
func (h *Handler) loan(w http.ResponseWriter, r *http.Request, o *outcome) (loanResult, loanInput, error) {
	ctx := r.Context()
	body, headerID, err := h.readVerified(w, r, o)
	if err != nil {
		return loanResult{}, loanInput{}, err
	}
	in, err := h.rules.decodeLoan(body, headerID)
	if err != nil {
		return loanResult{}, in, err
	}
	o.txID = store.IdempotencyKey(in.LoanID, in.Tranche)
	d := store.Disbursement{LoanID: in.LoanID, Tranche: in.Tranche, Amount: in.Amount, Currency: in.Currency, EventID: in.EventID}
	key := fmt.Sprintf("%sloan:%s:%d", h.cfg.LockPrefix, in.LoanID, in.Tranche)
	res := loanResult{LoanID: in.LoanID, Tranche: in.Tranche}

	var lk *lock.Lock
	if h.cfg.NoLock {
		o.lockMode = "off"
	} else {
		lk, err = h.obtain(ctx, key, o)
	}
	var busy busyError
	if errors.As(err, &busy) {
		// The holder did not finish within LockWait. If the tranche has its
		// disbursement already, this delivery is answered from it.
		stored, ferr := h.cfg.Disbursements.Disbursement(ctx, in.LoanID, in.Tranche)
		switch {
		case ferr == nil:
			if stored.Amount != d.Amount || stored.Currency != d.Currency {
				return loanResult{}, in, fmt.Errorf("%w: loan %q tranche %d: %w", errDisbursementMismatch, in.LoanID, in.Tranche, store.ErrMismatch)
			}
			res.Result, o.result = "duplicate", "duplicate"
			return res, in, nil
		case !errors.Is(ferr, store.ErrNotFound):
			return loanResult{}, in, ferr
		}
		lk, err = h.obtainOnce(ctx, key, o)
	}
	if err != nil {
		return loanResult{}, in, err
	}
	err = h.leased(ctx, lk, o, func(ctx context.Context) error {
		_, err := h.cfg.Disbursements.AcceptDisbursement(ctx, d)
		return err
	})
	switch {
	case err == nil:
		res.Result = "accepted"
	case errors.Is(err, store.ErrDuplicate):
		res.Result = "duplicate"
	case errors.Is(err, store.ErrMismatch):
		return loanResult{}, in, fmt.Errorf("%w: %w", errDisbursementMismatch, err)
	default:
		return loanResult{}, in, err
	}
	o.result = res.Result
	return res, in, nil
}

// leased runs the database work fn under lk's lease (or, with lk nil, on the
// database constraints alone) and releases lk once the outcome is decided,
// as payments do.
func (h *Handler) leased(ctx context.Context, lk *lock.Lock, o *outcome, fn func(context.Context) error) error {
	o.dbWrites++
	if lk == nil { // Redis down (backstop), or PAYLOCK_LOCK=off
		err := fn(ctx)
		if errors.Is(err, store.ErrDuplicate) && !h.cfg.NoLock {
			o.backstopDup = true
		}
		return err
	}
	leaseCtx, stopLease := lk.KeepAlive(ctx)
	err := fn(leaseCtx)
	leaseErr := context.Cause(leaseCtx)
	stopLease()
	lost := errors.Is(leaseErr, lock.ErrLeaseLost)
	if err != nil && lost && !errors.Is(err, store.ErrDuplicate) && !errors.Is(err, store.ErrMismatch) {
		err = fmt.Errorf("%w: %w", leaseErr, err)
	}
	if h.release(ctx, lk, o, false) {
		lost = true
	}
	if lost && errors.Is(err, store.ErrDuplicate) {
		o.backstopDup = true
	}
	return err
}
