package paypal

import (
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/bojanz/currency"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// adapter reads a PayPal webhook event:
//
//	{"id": "WH-...", "event_type": "PAYMENT.CAPTURE.COMPLETED",
//	 "resource_type": "capture", "create_time": "2025-...Z",
//	 "resource": {"id": "...", "amount": {"currency_code": "USD", "value": "10.00"},
//	              "custom_id": "ORD-...", "links": [...], ...}}
//
// and records one lifecycle event of its payment (package doc): the event
// id is the event's "id" (PayPal resends an event with the same id), the
// amount resource.amount.value, a decimal string converted exactly to
// minor units by the currency's ISO 4217 exponent, the currency its
// currency_code, a capture's or refund's own id resource.id, the date
// create_time. A dispute's resource is the dispute
//
//	{"dispute_id": "PP-...", "disputed_transactions": [{"seller_transaction_id": "<capture id>", ...}],
//	 "dispute_amount": {...}, "dispute_life_cycle_stage": "CHARGEBACK", "status": "RESOLVED",
//	 "dispute_outcome": {"outcome_code": "RESOLVED_SELLER_FAVOUR", ...}}
//
// and records on the capture it names, for dispute_amount; resolved, its
// outcome_code says won or lost (outcomes) at its stage (stages). The stored payload is the whole body. Every other event
// type is acknowledged and written nowhere.
type adapter struct {
	rules *payload.Rules
}

func (a adapter) Adapt(body []byte, _ string) ([]provider.Event, error) {
	root, err := payload.Decode(body)
	if err != nil {
		return nil, err
	}
	eventID, _, err := root.RequiredString("", "id")
	if err != nil {
		return nil, err
	}
	typ, _, err := root.RequiredString("", "event_type")
	if err != nil {
		return nil, err
	}
	rec, ok := recordOf(typ)
	if !ok {
		return nil, nil
	}
	res, resName, err := root.RequiredObject("", "resource")
	if err != nil {
		return nil, err
	}
	e, err := a.event(res, resName, rec, eventID)
	if err != nil {
		return nil, err
	}
	if e.At, err = createTime(root); err != nil {
		return nil, err
	}
	e.Payload = body
	return []provider.Event{e}, nil
}

// recordOf is what type typ records; ok false for a type not recorded.
func recordOf(typ string) (record, bool) {
	for _, r := range records {
		if r.typ == typ {
			return r.record, true
		}
	}
	return record{}, false
}

// event reads the payment, amount and own id of res (a dispute's outcome
// and stage) and checks them with the source's rules, naming each field
// where the event holds it.
func (a adapter) event(res *payload.Node, resName string, rec record, eventID string) (provider.Event, error) {
	e := provider.Event{Kind: rec.kind, EventID: eventID}
	names := payload.Names{"event_id": "id"}
	amount := "amount"
	var err error
	if rec.payment == disputed {
		amount = "dispute_amount"
		if e.TransactionID, names["transaction_id"], err = disputedOf(res, resName); err != nil {
			return e, err
		}
		if rec.outcome {
			if e.Kind, e.Stage, err = outcomeOf(res, resName); err != nil {
				return e, err
			}
		}
	} else {
		id, idName, err := res.RequiredString(resName, "id")
		if err != nil {
			return e, err
		}
		e.TransactionID, names["transaction_id"] = id, idName
		if rec.payment == upLink {
			if e.TransactionID, names["transaction_id"], err = upOf(res, resName); err != nil {
				return e, err
			}
		}
		switch rec.kind {
		case lifecycle.Succeeded, lifecycle.Failed:
			e.CaptureID = id
		case lifecycle.Refund:
			e.RefundID = id
		}
	}
	if e.Currency, names["currency"], err = res.RequiredString(resName, amount, "currency_code"); err != nil {
		return e, err
	}
	value, valueName, err := res.RequiredString(resName, amount, "value")
	if err != nil {
		return e, err
	}
	names["amount"] = valueName
	if e.Amount, err = minorUnits(value, e.Currency, valueName); err != nil {
		return e, err
	}
	return e, a.rules.CheckPayment(e.Payment(), names)
}

// disputedOf is the capture a dispute disputes: the seller_transaction_id
// its disputed_transactions name. A dispute naming none, or several
// distinct ones (one event would have to record on several payments), is
// refused.
func disputedOf(res *payload.Node, resName string) (string, string, error) {
	txs, name, err := res.Child(resName, "disputed_transactions")
	if err != nil {
		return "", "", err
	}
	if txs == nil || txs.Kind() != payload.Array {
		return "", "", payload.Invalid(name, name+" must be an array naming the disputed capture")
	}
	var id, idName string
	for _, tx := range txs.Items() {
		if tx.Kind() != payload.Object {
			return "", "", payload.Malformed(name, name+" must hold JSON objects")
		}
		n, nName, err := tx.Child(name+"[]", "seller_transaction_id")
		if err != nil {
			return "", "", err
		}
		if n == nil || n.Kind() == payload.Null {
			continue
		}
		if n.Kind() != payload.String || n.Text() == "" {
			return "", "", payload.Malformed(nName, nName+" must be a non-empty JSON string")
		}
		if id != "" && n.Text() != id {
			return "", "", payload.Invalid(nName, name+" names several captures; a dispute must name one")
		}
		id, idName = n.Text(), nName
	}
	if id == "" {
		return "", "", payload.Invalid(name, name+" names no seller_transaction_id (the disputed capture)")
	}
	return id, idName, nil
}

// outcomeOf is the kind a resolved dispute records (outcomes) and its
// stage (stages).
func outcomeOf(res *payload.Node, resName string) (lifecycle.Kind, int, error) {
	code, codeName, err := res.RequiredString(resName, "dispute_outcome", "outcome_code")
	if err != nil {
		return "", 0, err
	}
	kind, ok := outcomes[code]
	if !ok {
		return "", 0, payload.Invalid(codeName, codeName+" "+code+" says neither party won the dispute")
	}
	stage, stageName, err := res.RequiredString(resName, "dispute_life_cycle_stage")
	if err != nil {
		return "", 0, err
	}
	n, ok := stages[stage]
	if !ok {
		return "", 0, payload.Invalid(stageName, stageName+" must be INQUIRY, CHARGEBACK, PRE_ARBITRATION or ARBITRATION")
	}
	return kind, n, nil
}

// upOf is the id of the capture a refund or reversal links to as "up":
// the last path segment of its href (.../v2/payments/captures/<id>).
func upOf(res *payload.Node, resName string) (string, string, error) {
	links, name, err := res.Child(resName, "links")
	if err != nil {
		return "", "", err
	}
	if links == nil || links.Kind() != payload.Array {
		return "", "", payload.Invalid(resName+".links", resName+".links must be an array with the link rel \"up\"")
	}
	for _, l := range links.Items() {
		if l.Kind() != payload.Object {
			continue
		}
		rel, _, err := l.Child(name, "rel")
		if err != nil || rel == nil || rel.Kind() != payload.String || rel.Text() != "up" {
			continue
		}
		href, hrefName, err := l.RequiredString(name, "href")
		if err != nil {
			return "", "", err
		}
		i := strings.LastIndex(href, "/captures/")
		if i < 0 || strings.ContainsAny(href[i+len("/captures/"):], "/?#") || i+len("/captures/") == len(href) {
			return "", "", payload.Invalid(hrefName, hrefName+" must be a capture's URL")
		}
		return href[i+len("/captures/"):], hrefName, nil
	}
	return "", "", payload.Invalid(name, name+" has no link rel \"up\" (the capture)")
}

// decimal is PayPal's amount value: digits, optionally a point and digits.
var decimal = regexp.MustCompile(`^(0|[1-9][0-9]{0,17})(\.[0-9]{1,4})?$`)

// minorUnits converts value, a decimal string of currency code, to minor
// units exactly: its fraction has at most the currency's ISO 4217
// exponent of digits. Never a float.
func minorUnits(value, code, name string) (int64, error) {
	digits, ok := currency.GetDigits(code)
	if !ok {
		return 0, payload.Invalid(name, "the currency "+code+" is not an ISO 4217 currency")
	}
	m := decimal.FindStringSubmatch(value)
	if m == nil {
		return 0, payload.Invalid(name, name+" must be a decimal amount such as \"10.00\"")
	}
	frac := strings.TrimPrefix(m[2], ".")
	if len(frac) > int(digits) {
		return 0, payload.Invalid(name, name+" has more decimals than its currency has minor units")
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

// createTime is the event's create_time, an RFC 3339 time; zero when
// absent.
func createTime(root *payload.Node) (time.Time, error) {
	n, name, err := root.Child("", "create_time")
	if err != nil || n == nil || n.Kind() == payload.Null {
		return time.Time{}, err
	}
	if n.Kind() != payload.String {
		return time.Time{}, payload.Malformed(name, name+" must be a string (an RFC 3339 time)")
	}
	t, err := time.Parse(time.RFC3339Nano, n.Text())
	if err != nil {
		return time.Time{}, payload.Invalid(name, name+" must be an RFC 3339 time")
	}
	return t.UTC(), nil
}

// Types are every event type a PayPal source records, in records' order
// (provider.Typed); a source records them all.
func (a adapter) Types() []provider.EventType {
	out := make([]provider.EventType, len(records))
	for i, r := range records {
		out[i] = provider.EventType{Name: r.typ, Kind: r.kind, Recorded: true}
	}
	return out
}
