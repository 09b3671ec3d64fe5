package mollie

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bojanz/currency"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// adapter reads a Mollie payment as Mollie's API answers
// GET /v2/payments/{id}?embed=refunds,chargebacks
// (https://docs.mollie.com/reference/get-payment):
//
//	{"resource": "payment", "id": "tr_...", "mode": "live", "status": "paid",
//	 "amount": {"value": "10.00", "currency": "EUR"}, "paidAt": "2024-...",
//	 "amountCaptured": {"value": "10.00", "currency": "EUR"},
//	 "metadata": {"order_id": "..."}, "profileId": "pfl_...",
//	 "_embedded": {
//	   "refunds": [{"resource": "refund", "id": "re_...", "status": "refunded",
//	                "amount": {...}, "paymentId": "tr_...", "createdAt": "..."}],
//	   "chargebacks": [{"resource": "chargeback", "id": "chb_...", "amount": {...},
//	                    "paymentId": "tr_...", "createdAt": "...", "reversedAt": null}]}}
//
// and returns every event the payment's current state implies (records),
// all of the payment id, each with an event id made of the state alone:
// the same state read twice is the same events, which the store records
// once; a new refund or chargeback, a new status or a larger captured
// amount is a new event. An amount is a decimal string converted exactly
// to minor units by its currency's ISO 4217 exponent (more decimals than
// the currency has are refused, 422). Each event's payload is the whole
// body: the payment's state when the event was seen. Webhook bodies never
// come here (Notices reads those).
type adapter struct {
	rules *payload.Rules
}

// records are the states paylock records, named "<resource>.<status>" as
// Mollie's next-gen webhook events are (payment.paid, refund.refunded;
// payment.captured and the chargeback names are paylock's, for what
// Mollie reports in amountCaptured and _embedded.chargebacks), with the
// lifecycle kind each records and the event id it records under:
//
//   - payment.paid: the payment succeeded (tr_...:paid). Mollie calls a
//     payment paid once its money is taken, captured in full or in part.
//   - payment.authorized: money held for a later capture (tr_...:authorized).
//   - payment.captured: amountCaptured, the total captured so far, a
//     cumulative capture (tr_...:captured:<minor units>); read whatever
//     the status, so that an authorisation captured in part and then
//     released is worth what was captured, not its whole amount.
//   - payment.failed: the payment failed (tr_...:failed).
//   - payment.canceled, payment.expired: a payment never paid, or an
//     authorisation released or left to expire without a capture
//     (tr_...:canceled, tr_...:expired).
//   - refund.queued, refund.pending, refund.processing: a refund on its
//     way (re_...:<status>); refund.refunded: the refund's money went back
//     to the customer; refund.failed, refund.canceled: it never did. Each
//     refund's own amount, named by its id.
//   - chargeback.received: a chargeback, the money taken back: Mollie's
//     chargebacks have no open phase, so a lost dispute (chb_...:received);
//     chargeback.reversed: its reversedAt, a dispute won (chb_...:reversed).
//     The chargebacks of a payment, in order of creation, take stages 1
//     and 2, 3 and 4, ...: a reversal decides over its own chargeback, and
//     a later chargeback over an earlier reversal.
//
// A payment open or pending has no final state yet: it records nothing
// but its refunds and chargebacks (none, in practice).
var records = []struct {
	typ  string
	kind lifecycle.Kind
}{
	{"payment.paid", lifecycle.Succeeded},
	{"payment.authorized", lifecycle.Authorized},
	{"payment.captured", lifecycle.Captured},
	{"payment.failed", lifecycle.Failed},
	{"payment.canceled", lifecycle.Canceled},
	{"payment.expired", lifecycle.Canceled},
	{"refund.queued", lifecycle.RefundPending},
	{"refund.pending", lifecycle.RefundPending},
	{"refund.processing", lifecycle.RefundPending},
	{"refund.refunded", lifecycle.Refund},
	{"refund.failed", lifecycle.RefundFailed},
	{"refund.canceled", lifecycle.RefundFailed},
	{"chargeback.received", lifecycle.DisputeLost},
	{"chargeback.reversed", lifecycle.DisputeWon},
}

// kindOf is what the state typ records; ok false for a state not in
// records.
func kindOf(typ string) (lifecycle.Kind, bool) {
	for _, r := range records {
		if r.typ == typ {
			return r.kind, true
		}
	}
	return "", false
}

// pendingStatuses are the payment statuses that record nothing: the
// payment is not final yet.
var pendingStatuses = []string{"open", "pending"}

// statusTimes name, by payment status, the member holding when the
// payment reached it.
var statusTimes = map[string]string{
	"paid":       "paidAt",
	"authorized": "authorizedAt",
	"failed":     "failedAt",
	"canceled":   "canceledAt",
	"expired":    "expiredAt",
}

// The shapes of the ids of a payment's refunds and chargebacks
// (re_4qqhO89gsT, chb_n9z0tp).
var (
	refundID     = regexp.MustCompile(`^re_[A-Za-z0-9]{1,64}$`)
	chargebackID = regexp.MustCompile(`^chb_[A-Za-z0-9]{1,64}$`)
)

// Adapt returns the events of a Mollie payment's state (adapter), each
// checked with the source's rules, or a *payload.Error: 400 for a body
// that is not strict JSON or holds a member of the wrong type, 422 for one
// that is not a Mollie payment (resource, a tr_ id, a known status) or
// holds a bad amount, id or time.
func (a adapter) Adapt(body []byte, _ string) ([]provider.Event, error) {
	p, err := read(body)
	if err != nil {
		return nil, err
	}
	out := make([]provider.Event, 0, len(p.events))
	for _, f := range p.events {
		if err := a.rules.CheckPayment(f.Payment(), f.names); err != nil {
			return nil, err
		}
		f.Payload = body
		out = append(out, f.Event)
	}
	return out, nil
}

// payment is what read finds in a Mollie payment.
type payment struct {
	id, status string
	events     []found
}

// found is an event read from a payment, with where the payment holds
// its fields, for the rules' errors.
type found struct {
	provider.Event
	names payload.Names
}

// read reads body, a Mollie payment, and the events its state implies
// (records), unchecked by any source's rules.
func read(body []byte) (payment, error) {
	var p payment
	root, err := payload.Decode(body)
	if err != nil {
		return p, err
	}
	if err := resourceIs(root, "", "payment"); err != nil {
		return p, err
	}
	id, idName, err := root.RequiredString("", "id")
	if err != nil {
		return p, err
	}
	if !paymentID.MatchString(id) {
		return p, payload.Invalid(idName, idName+" must be a Mollie payment id: tr_ and 1 to 64 letters and digits")
	}
	p.id = id
	status, statusName, err := root.RequiredString("", "status")
	if err != nil {
		return p, err
	}
	p.status = status
	kind, final := kindOf("payment." + status)
	if !final && !slices.Contains(pendingStatuses, status) {
		return p, payload.Invalid(statusName,
			statusName+" must be a Mollie payment status: open, pending, authorized, paid, canceled, expired or failed")
	}
	amount, cur, names, err := money(root, "", "amount")
	if err != nil {
		return p, err
	}
	// A payment of 0.00 (a mandate's first payment) moves no money: its
	// status records nothing.
	if final && amount > 0 {
		at, err := optionalTime(root, "", statusTimes[status])
		if err != nil {
			return p, err
		}
		names["transaction_id"], names["event_id"] = idName, idName
		p.add(provider.Event{Kind: kind, TransactionID: id, Amount: amount, Currency: cur, EventID: id + ":" + status, At: at}, names)
	}
	if err := p.readCaptured(root); err != nil {
		return p, err
	}
	emb, embName, err := optionalNode(root, "", payload.Object, "_embedded")
	if err != nil || emb == nil {
		return p, err
	}
	if err := p.readRefunds(emb, embName); err != nil {
		return p, err
	}
	return p, p.readChargebacks(emb, embName)
}

// add appends the event e, whose fields the payment holds at names.
func (p *payment) add(e provider.Event, names payload.Names) {
	p.events = append(p.events, found{Event: e, names: names})
}

// readCaptured reads amountCaptured, the total captured so far, when the
// payment has it and it is not zero.
func (p *payment) readCaptured(root *payload.Node) error {
	n, _, err := optionalNode(root, "", payload.Object, "amountCaptured")
	if err != nil || n == nil {
		return err
	}
	amount, cur, names, err := money(root, "", "amountCaptured")
	if err != nil || amount == 0 {
		return err
	}
	names["transaction_id"], names["event_id"] = "id", "amountCaptured"
	p.add(provider.Event{Kind: lifecycle.Captured, TransactionID: p.id, Amount: amount, Currency: cur,
		EventID: p.id + ":captured:" + strconv.FormatInt(amount, 10), Cumulative: true}, names)
	return nil
}

// readRefunds reads _embedded.refunds: each refund's status is an event
// of its own amount, named by its id.
func (p *payment) readRefunds(emb *payload.Node, embName string) error {
	items, name, err := optionalNode(emb, embName, payload.Array, "refunds")
	if err != nil || items == nil {
		return err
	}
	for i, r := range items.Items() {
		rName := fmt.Sprintf("%s[%d]", name, i)
		id, idName, err := p.item(r, rName, "refund", refundID, "re_")
		if err != nil {
			return err
		}
		status, statusName, err := r.RequiredString(rName, "status")
		if err != nil {
			return err
		}
		kind, ok := kindOf("refund." + status)
		if !ok {
			return payload.Invalid(statusName,
				statusName+" must be a Mollie refund status: queued, pending, processing, refunded, failed or canceled")
		}
		amount, cur, names, err := money(r, rName, "amount")
		if err != nil {
			return err
		}
		at, err := optionalTime(r, rName, "createdAt")
		if err != nil {
			return err
		}
		names["transaction_id"], names["event_id"] = "id", idName
		p.add(provider.Event{Kind: kind, TransactionID: p.id, Amount: amount, Currency: cur, EventID: id + ":" + status,
			RefundID: id, At: at}, names)
	}
	return nil
}

// chargeback is one of a payment's chargebacks.
type chargeback struct {
	id                string
	amount            int64
	currency          string
	created, reversed time.Time
	names             payload.Names
}

// readChargebacks reads _embedded.chargebacks: each is a lost dispute,
// and a won one once reversed, their stages by the chargebacks' order of
// creation (records).
func (p *payment) readChargebacks(emb *payload.Node, embName string) error {
	items, name, err := optionalNode(emb, embName, payload.Array, "chargebacks")
	if err != nil || items == nil {
		return err
	}
	cbs := make([]chargeback, 0, len(items.Items()))
	for i, n := range items.Items() {
		cName := fmt.Sprintf("%s[%d]", name, i)
		var c chargeback
		var idName string
		if c.id, idName, err = p.item(n, cName, "chargeback", chargebackID, "chb_"); err != nil {
			return err
		}
		if c.amount, c.currency, c.names, err = money(n, cName, "amount"); err != nil {
			return err
		}
		c.names["transaction_id"], c.names["event_id"] = "id", idName
		created, createdName, err := n.RequiredString(cName, "createdAt")
		if err != nil {
			return err
		}
		if c.created, err = parseTime(created, createdName); err != nil {
			return err
		}
		if c.reversed, err = optionalTime(n, cName, "reversedAt"); err != nil {
			return err
		}
		cbs = append(cbs, c)
	}
	slices.SortFunc(cbs, func(a, b chargeback) int { return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.id, b.id)) })
	for i, c := range cbs {
		p.add(provider.Event{Kind: lifecycle.DisputeLost, TransactionID: p.id, Amount: c.amount, Currency: c.currency,
			EventID: c.id + ":received", Stage: 2*i + 1, At: c.created}, c.names)
		if !c.reversed.IsZero() {
			p.add(provider.Event{Kind: lifecycle.DisputeWon, TransactionID: p.id, Amount: c.amount, Currency: c.currency,
				EventID: c.id + ":reversed", Stage: 2*i + 2, At: c.reversed}, c.names)
		}
	}
	return nil
}

// item checks the embedded object n, a refund or a chargeback of the
// payment: an object of that resource, its id of that shape, and its
// paymentId, when it has one, the payment's. It returns the id and its
// name.
func (p *payment) item(n *payload.Node, name, resource string, shape *regexp.Regexp, prefix string) (string, string, error) {
	if n.Kind() != payload.Object {
		return "", "", payload.Malformed(name, name+" must be a JSON object")
	}
	if err := resourceIs(n, name, resource); err != nil {
		return "", "", err
	}
	id, idName, err := n.RequiredString(name, "id")
	if err != nil {
		return "", "", err
	}
	if !shape.MatchString(id) {
		return "", "", payload.Invalid(idName, idName+" must be a Mollie "+resource+" id: "+prefix+" and 1 to 64 letters and digits")
	}
	of, ofName, err := optionalNode(n, name, payload.String, "paymentId")
	if err != nil {
		return "", "", err
	}
	if of != nil && of.Text() != p.id {
		return "", "", payload.Invalid(ofName, ofName+" must be the payment's id: the "+resource+" is another payment's")
	}
	return id, idName, nil
}

// resourceIs checks that the object n is a Mollie resource of that kind.
func resourceIs(n *payload.Node, prefix, resource string) error {
	r, name, err := n.RequiredString(prefix, "resource")
	if err != nil {
		return err
	}
	if r != resource {
		return payload.Invalid(name, fmt.Sprintf("%s must be %q: the body is not a Mollie %s", name, resource, resource))
	}
	return nil
}

// optionalNode is the member at keys of n when it is present and not
// null, and its name: nil when absent or null, ErrMalformed when of
// another kind than want.
func optionalNode(n *payload.Node, prefix string, want payload.Kind, keys ...string) (*payload.Node, string, error) {
	c, name, err := n.Child(prefix, keys...)
	switch {
	case err != nil:
		return nil, name, err
	case c == nil || c.Kind() == payload.Null:
		return nil, name, nil
	case c.Kind() != want:
		return nil, name, payload.Malformed(name, name+" must be "+want.String())
	}
	return c, name, nil
}

// money reads the amount object at key of n ({"value": "10.00",
// "currency": "EUR"}): the amount in minor units, its currency, and the
// names of both for the rules' errors.
func money(n *payload.Node, prefix, key string) (int64, string, payload.Names, error) {
	obj, name, err := n.RequiredObject(prefix, key)
	if err != nil {
		return 0, "", nil, err
	}
	cur, curName, err := obj.RequiredString(name, "currency")
	if err != nil {
		return 0, "", nil, err
	}
	value, valueName, err := obj.RequiredString(name, "value")
	if err != nil {
		return 0, "", nil, err
	}
	amount, err := minorUnits(value, cur, valueName, curName)
	if err != nil {
		return 0, "", nil, err
	}
	return amount, cur, payload.Names{"amount": valueName, "currency": curName}, nil
}

// decimal is Mollie's amount value: digits, optionally a point and
// digits; never a sign or an exponent.
var decimal = regexp.MustCompile(`^(0|[1-9][0-9]{0,17})(\.[0-9]{1,4})?$`)

// minorUnits converts value, a decimal string of the currency code, to
// minor units exactly: its fraction has at most the currency's ISO 4217
// exponent of digits ("10.00" EUR is 1000, "1000" JPY is 1000, "10.001"
// EUR is refused). Never a float. name and curName name the value and
// the currency for errors.
func minorUnits(value, code, name, curName string) (int64, error) {
	digits, ok := currency.GetDigits(code)
	if !ok {
		return 0, payload.Invalid(curName, curName+" must be an upper-case ISO 4217 currency code")
	}
	m := decimal.FindStringSubmatch(value)
	if m == nil {
		return 0, payload.Invalid(name, name+" must be a decimal amount such as \"10.00\"")
	}
	frac := strings.TrimPrefix(m[2], ".")
	if len(frac) > int(digits) {
		return 0, payload.Invalid(name, fmt.Sprintf("%s has more decimals than %s has minor units (%d)", name, code, digits))
	}
	frac += strings.Repeat("0", int(digits)-len(frac))
	var n int64
	for _, c := range m[1] + frac {
		if n > (math.MaxInt64-9)/10 {
			return 0, payload.Invalid(name, name+" is too large")
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

// optionalTime is the ISO 8601 time at key of n; zero when absent or
// null.
func optionalTime(n *payload.Node, prefix, key string) (time.Time, error) {
	c, name, err := optionalNode(n, prefix, payload.String, key)
	if err != nil || c == nil {
		return time.Time{}, err
	}
	return parseTime(c.Text(), name)
}

// parseTime reads s, a time as Mollie writes them
// ("2024-03-20T09:13:37+00:00"), as UTC.
func parseTime(s, name string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, payload.Invalid(name, name+" must be an ISO 8601 time such as \"2024-03-20T09:13:37+00:00\"")
	}
	return t.UTC(), nil
}

// Types are every state a Mollie source records, in records' order
// (provider.Typed); a source records them all.
func (a adapter) Types() []provider.EventType {
	out := make([]provider.EventType, len(records))
	for i, r := range records {
		out[i] = provider.EventType{Name: r.typ, Kind: r.kind, Recorded: true}
	}
	return out
}
