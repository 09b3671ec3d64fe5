package adyen

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// maxItems bounds the notification items of one Adyen delivery. Adyen
// sends standard notifications one item at a time; a batch is at most a
// handful.
const maxItems = 100

// adapter reads an Adyen standard webhook (notification) delivery:
//
//	{"live":"false","notificationItems":[{"NotificationRequestItem":{
//	  "additionalData":{"hmacSignature":"..."},
//	  "amount":{"currency":"EUR","value":1000},
//	  "eventCode":"AUTHORISATION","eventDate":"2026-11-30T12:00:00+01:00",
//	  "merchantAccountCode":"...","merchantReference":"...",
//	  "originalReference":"","pspReference":"...","success":"true",
//	  "operations":["CANCEL","CAPTURE","REFUND"],"paymentMethod":"visa"}}]}
//
// The shape is Adyen's documented NotificationRequestItem: the
// AuthorisationNotificationRequestItem schema of Adyen's Webhooks API
// (docs.adyen.com/api-explorer/Webhooks), as typed by Adyen's own libraries
// (adyen-go-api-library src/webhook: Webhook, NotificationItem,
// NotificationRequestItem, Amount). success and live are the strings
// "true"/"false", amount.value is an integer in minor units and
// amount.currency an upper-case ISO 4217 code.
type adapter struct {
	rules    *payload.Rules
	accounts []string // merchant_accounts; nil: any
	live     *bool    // live; nil: either
	// basicAuth: the source checks Adyen's basic authentication
	// (basic_auth_env), which covers the whole delivery.
	basicAuth bool
	// manualCapture: a successful AUTHORISATION is money held, not taken
	// (capture: manual).
	manualCapture bool
}

// hmacCovered are the members of a NotificationRequestItem that Adyen's
// HMAC signs (signature/adyen.go), amount's value and currency included.
var hmacCovered = map[string]bool{
	"pspReference": true, "originalReference": true, "merchantAccountCode": true,
	"merchantReference": true, "eventCode": true, "success": true,
}

// WithoutSignature returns an item (a payment's payload) without its
// additionalData.hmacSignature, additionalData itself dropped when nothing
// else is left in it (provider.SignatureBearer). Members are re-serialised
// in sorted order; an item without a signature is returned as it is.
func (adapter) WithoutSignature(item []byte) []byte {
	var members map[string]json.RawMessage
	if json.Unmarshal(item, &members) != nil {
		return item
	}
	var extra map[string]json.RawMessage
	if json.Unmarshal(members["additionalData"], &extra) != nil {
		return item
	}
	if _, ok := extra["hmacSignature"]; !ok {
		return item
	}
	delete(extra, "hmacSignature")
	if len(extra) == 0 {
		delete(members, "additionalData")
	} else {
		b, err := json.Marshal(extra)
		if err != nil {
			return item
		}
		members["additionalData"] = b
	}
	out, err := json.Marshal(members)
	if err != nil {
		return item
	}
	return out
}

// Unsigned lists the members of an item (a payment's payload) that its
// HMAC does not cover: every member but the signed ones (additionalData,
// which holds the signature itself, included), and any member of amount
// besides value and currency. Nil with basic authentication, which covers
// the whole delivery.
func (a adapter) Unsigned(item []byte) []string {
	if a.basicAuth {
		return nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(item, &members); err != nil {
		return []string{"(payload)"}
	}
	var out []string
	for k, v := range members {
		switch {
		case hmacCovered[k]:
		case k == "amount":
			var amount map[string]json.RawMessage
			if json.Unmarshal(v, &amount) != nil {
				out = append(out, k)
				continue
			}
			for m := range amount {
				if m != "value" && m != "currency" {
					out = append(out, "amount."+m)
				}
			}
		default:
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Acknowledge is Adyen's expected answer, "[accepted]".
func (adapter) Acknowledge() (string, []byte) {
	return "text/plain", []byte("[accepted]")
}

// Adapt reads a notification batch. Each item whose eventCode is
// AUTHORISATION and success "true" records a payment: transaction id
// pspReference, amount amount.value, currency amount.currency as sent (it
// must already be upper-case), event id pspReference+":AUTHORISATION"
// (Adyen's own deduplication key, eventCode with pspReference, stable
// across Adyen's retries of the same item), and as payload that item's
// NotificationRequestItem object as received. A refused AUTHORISATION
// (success "false") naming its pspReference and amount is that payment's
// failure, and a successful item of one of the lifecycle codes (codes) is
// an event of the payment its originalReference names (else its own
// pspReference, for a dispute notice), event id pspReference:eventCode,
// dated by eventDate. Every other item is acknowledged and written
// nowhere. A malformed item refuses the whole
// batch (4xx, Adyen retries it), so does a batch of more than maxItems
// items or one that names a pspReference twice with different amounts
// (422); the same pspReference twice with the same amount is recorded once.
// The delivery is acknowledged with Adyen's "[accepted]".
func (a adapter) Adapt(body []byte, _ string) ([]provider.Event, error) {
	root, err := payload.Decode(body)
	if err != nil {
		return nil, err
	}
	list, name, err := root.Child("", "notificationItems")
	switch {
	case err != nil:
		return nil, err
	case list == nil:
		return nil, payload.Invalid(name, name+" is required")
	case list.Kind() != payload.Array:
		return nil, payload.Malformed(name, name+" must be a JSON array")
	case len(list.Items()) > maxItems:
		return nil, payload.Invalid(name, fmt.Sprintf("%s must hold at most %d items", name, maxItems))
	}
	if err := a.checkLive(root); err != nil {
		return nil, err
	}
	var events []provider.Event
	seen := make(map[string]int) // a payment's pspReference -> index in events
	seenEvents := make(map[string]bool)
	for i, wrapper := range list.Items() {
		prefix := name + "[" + strconv.Itoa(i) + "]"
		if wrapper.Kind() != payload.Object {
			return nil, payload.Malformed(prefix, prefix+" must be a JSON object")
		}
		item, itemName, err := wrapper.RequiredObject(prefix, "NotificationRequestItem")
		if err != nil {
			return nil, err
		}
		e, names, err := a.item(item, itemName)
		if err != nil {
			return nil, err
		}
		if e == nil || seenEvents[e.EventID] {
			continue
		}
		if !e.Succeeded() {
			seenEvents[e.EventID] = true
			events = append(events, *e)
			continue
		}
		if j, dup := seen[e.TransactionID]; dup {
			if q := events[j]; q.Amount != e.Amount || q.Currency != e.Currency {
				return nil, payload.Invalid(names["amount"], fmt.Sprintf(
					"pspReference %q appears twice in this batch with different amounts (%d %s and %d %s)",
					e.TransactionID, q.Amount, q.Currency, e.Amount, e.Currency))
			}
			continue
		}
		seen[e.TransactionID] = len(events)
		events = append(events, *e)
	}
	return events, nil
}

// item reads one NotificationRequestItem: an event for a successful
// AUTHORISATION or a lifecycle code (codes), nil for any other item.
func (a adapter) item(item *payload.Node, prefix string) (*provider.Event, payload.Names, error) {
	code, _, err := item.RequiredString(prefix, "eventCode")
	if err != nil {
		return nil, nil, err
	}
	success, successName, err := item.RequiredString(prefix, "success")
	if err != nil {
		return nil, nil, err
	}
	if success != "true" && success != "false" {
		return nil, nil, payload.Invalid(successName, successName+` must be "true" or "false"`)
	}
	if err := a.checkAccount(item, prefix); err != nil {
		return nil, nil, err
	}
	kind, ok := kindOf(code, success == "true", a.manualCapture)
	if !ok {
		return nil, nil, nil
	}
	if kind == lifecycle.Failed && !refusedWithPayment(item) {
		// A refused authorisation that names no payment and amount says
		// nothing paylock can record.
		return nil, nil, nil
	}
	p := provider.Event{Payload: item.Raw(), Kind: kind, Stage: stages[code]}
	// merchantAccountCode is signed: a modification applies only to a
	// payment of the same account.
	if acc, _, err := item.Child(prefix, "merchantAccountCode"); err == nil && acc != nil && acc.Kind() == payload.String {
		p.Account = acc.Text()
	}
	var txName, amountName, currencyName string
	if p.TransactionID, txName, err = item.RequiredString(prefix, "pspReference"); err != nil {
		return nil, nil, err
	}
	if _, _, err := item.RequiredObject(prefix, "amount"); err != nil {
		return nil, nil, err
	}
	if p.Amount, amountName, err = item.RequiredAmount(prefix, "amount", "value"); err != nil {
		return nil, nil, err
	}
	if p.Currency, currencyName, err = item.RequiredString(prefix, "amount", "currency"); err != nil {
		return nil, nil, err
	}
	p.EventID = p.TransactionID + ":" + code
	names := payload.Names{
		"transaction_id": txName, "amount": amountName, "currency": currencyName, "event_id": txName,
	}
	if kind == lifecycle.Succeeded {
		p.Kind = "" // a payment, as before lifecycles
	} else if names["transaction_id"], err = link(item, prefix, &p); err != nil {
		return nil, nil, err
	}
	if err := a.rules.CheckPayment(p.Payment(), names); err != nil {
		return nil, nil, err
	}
	return &p, names, nil
}

// checkLive refuses a notification whose "live" is not the source's live
// setting.
func (a adapter) checkLive(root *payload.Node) error {
	if a.live == nil {
		return nil
	}
	live, name, err := root.RequiredString("", "live")
	if err != nil {
		return err
	}
	if want := strconv.FormatBool(*a.live); live != want {
		return payload.Invalid(name, fmt.Sprintf("%s is %q; this source takes only %q notifications", name, live, want))
	}
	return nil
}

// checkAccount refuses an item of a merchant account the source does not
// take (merchant_accounts).
func (a adapter) checkAccount(item *payload.Node, prefix string) error {
	if a.accounts == nil {
		return nil
	}
	acc, name, err := item.RequiredString(prefix, "merchantAccountCode")
	if err != nil {
		return err
	}
	if !slices.Contains(a.accounts, acc) {
		return payload.Invalid(name, fmt.Sprintf("merchant account %q is not one of this source's merchant_accounts", acc))
	}
	return nil
}
