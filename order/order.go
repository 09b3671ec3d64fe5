// Package order says whether an order was paid, once and in full: an
// order's state is a pure function (Derive) of what the shop expects (the
// order's amount, currency and expiry) and of the states of the payments
// that name the order, as package lifecycle folds them. It does no I/O and
// never looks at the order in which payments arrived: the same payments, in
// any order, give the same state. Package store keeps the orders, links the
// payments to them and derives their states again as payments change.
//
// With net the sum, over the linked payments in the order's currency, of
// the amount captured less the amount refunded:
//
//   - unregistered: payments name the order, nobody registered it;
//   - currency_mismatch: a linked payment took money in another currency;
//   - awaiting: net is 0, nothing was ever taken, the order has not expired;
//   - expired: net is 0, nothing was ever taken, expires_at has passed;
//   - refunded: net is 0 after money was taken (every payment refunded);
//   - underpaid: 0 < net < amount;
//   - paid: net = amount;
//   - overpaid: net > amount, from one payment;
//   - double_paid: net > amount, two or more payments took money.
package order

import (
	"time"

	"github.com/paylock/paylock/lifecycle"
)

// Status is an order's status.
type Status string

// The statuses.
const (
	Awaiting         Status = "awaiting"
	Paid             Status = "paid"
	Underpaid        Status = "underpaid"
	Overpaid         Status = "overpaid"
	DoublePaid       Status = "double_paid"
	Expired          Status = "expired"
	CurrencyMismatch Status = "currency_mismatch"
	Unregistered     Status = "unregistered"
	Refunded         Status = "refunded"
)

// Statuses are every status, in the order the documentation lists them.
var Statuses = []Status{Awaiting, Paid, Underpaid, Overpaid, DoublePaid, Expired, CurrencyMismatch, Unregistered, Refunded}

// Expectation is what the shop registered: the amount (minor units) and
// currency it expects, and when an order nobody paid expires (zero: never).
type Expectation struct {
	Amount    int64
	Currency  string
	ExpiresAt time.Time
}

// PaymentState is a linked payment's state, as package lifecycle folds it.
type PaymentState struct {
	Source         string
	TransactionID  string
	Status         lifecycle.Status
	Currency       string
	AmountCaptured int64
	AmountRefunded int64
}

// took is the money p took and kept: captured less refunded, never
// negative (lifecycle caps refunds at the amount captured).
func (p PaymentState) took() int64 { return max(p.AmountCaptured-p.AmountRefunded, 0) }

// State is an order's derived state.
type State struct {
	Status Status
	// AmountPaid is net: the money the linked payments in the order's
	// currency took and kept.
	AmountPaid int64
}

// Message is the type of the message that reaching s forwards ("" for
// none: awaiting, unregistered and currency_mismatch forward nothing; a
// currency mismatch is a review item).
func (s Status) Message() string {
	switch s {
	case Paid, DoublePaid, Overpaid, Underpaid, Expired, Refunded:
		return "order." + string(s)
	}
	return ""
}

// Messages are the types of the messages orders forward.
var Messages = []string{"order.paid", "order.underpaid", "order.overpaid", "order.double_paid", "order.expired", "order.refunded"}

// NeedsReview reports whether reaching s opens a review item naming the
// order's payments.
func (s Status) NeedsReview() bool { return s == DoublePaid || s == Overpaid || s == CurrencyMismatch }

// Derive returns the state of an order: exp is its expectation (nil: not
// registered), payments the states of the payments that name it, in any
// order, now the time expiry is judged at.
func Derive(exp *Expectation, payments []PaymentState, now time.Time) State {
	if exp == nil {
		return State{Status: Unregistered}
	}
	var net int64
	payers, tookAny := 0, false
	for _, p := range payments {
		if p.AmountCaptured <= 0 {
			continue
		}
		if p.Currency != exp.Currency {
			return State{Status: CurrencyMismatch, AmountPaid: paidIn(exp.Currency, payments)}
		}
		tookAny = true
		if p.took() > 0 {
			payers++
		}
		net = min(net+p.took(), lifecycle.MaxAmount)
	}
	st := State{AmountPaid: net}
	switch {
	case net == 0 && tookAny:
		st.Status = Refunded
	case net == 0 && !exp.ExpiresAt.IsZero() && !now.Before(exp.ExpiresAt):
		st.Status = Expired
	case net == 0:
		st.Status = Awaiting
	case net < exp.Amount:
		st.Status = Underpaid
	case net == exp.Amount:
		st.Status = Paid
	case payers >= 2:
		st.Status = DoublePaid
	default:
		st.Status = Overpaid
	}
	return st
}

// paidIn is the money the payments in currency took and kept.
func paidIn(currency string, payments []PaymentState) int64 {
	var net int64
	for _, p := range payments {
		if p.Currency == currency {
			net = min(net+p.took(), lifecycle.MaxAmount)
		}
	}
	return net
}
