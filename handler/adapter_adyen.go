package handler

import (
	"fmt"
	"strconv"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/store"
)

// maxAdyenItems bounds the notification items of one Adyen delivery. Adyen
// sends standard notifications one item at a time; a batch is at most a
// handful.
const maxAdyenItems = 100

// adyenAdapter reads an Adyen standard webhook (notification) delivery:
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
type adyenAdapter struct{ rules *inputRules }

// newAdyenAdapter returns an adapter for Adyen notification batches. Each
// item whose eventCode is AUTHORISATION and success "true" records a
// payment: transaction id pspReference, amount amount.value, currency
// amount.currency as sent (it must already be upper-case), event id
// pspReference+":AUTHORISATION" (Adyen's own deduplication key, eventCode
// with pspReference, stable across Adyen's retries of the same item), and as
// payload that item's NotificationRequestItem object as received. Every other
// item is acknowledged and written nowhere. A malformed item refuses the
// whole batch (4xx, Adyen retries it), so does a batch of more than
// maxAdyenItems items or one that names a pspReference twice with different
// amounts (422); the same pspReference twice with the same amount is
// recorded once. The delivery is acknowledged with Adyen's "[accepted]".
func newAdyenAdapter(rules *inputRules) adapter {
	return adyenAdapter{rules: rules}
}

func (adyenAdapter) acknowledge() (string, []byte) {
	return "text/plain", []byte("[accepted]")
}

func (a adyenAdapter) adapt(body []byte, _ string) ([]store.Payment, error) {
	root, err := decodeStrict(body)
	if err != nil {
		return nil, err
	}
	list, name, err := root.child("", "notificationItems")
	switch {
	case err != nil:
		return nil, err
	case list == nil:
		return nil, payload.Invalid(name, name+" is required")
	case list.kind != jsonArray:
		return nil, payload.Malformed(name, name+" must be a JSON array")
	case len(list.items) > maxAdyenItems:
		return nil, payload.Invalid(name, fmt.Sprintf("%s must hold at most %d items", name, maxAdyenItems))
	}
	var payments []store.Payment
	seen := make(map[string]int) // pspReference -> index in payments
	for i, wrapper := range list.items {
		prefix := name + "[" + strconv.Itoa(i) + "]"
		if wrapper.kind != jsonObject {
			return nil, payload.Malformed(prefix, prefix+" must be a JSON object")
		}
		item, itemName, err := wrapper.requiredObject(prefix, "NotificationRequestItem")
		if err != nil {
			return nil, err
		}
		p, fields, err := a.item(item, itemName)
		if err != nil {
			return nil, err
		}
		if p == nil {
			continue
		}
		if j, dup := seen[p.TransactionID]; dup {
			if q := payments[j]; q.Amount != p.Amount || q.Currency != p.Currency {
				return nil, payload.Invalid(fields["amount"], fmt.Sprintf(
					"pspReference %q appears twice in this batch with different amounts (%d %s and %d %s)",
					p.TransactionID, q.Amount, q.Currency, p.Amount, p.Currency))
			}
			continue
		}
		seen[p.TransactionID] = len(payments)
		payments = append(payments, *p)
	}
	return payments, nil
}

// item reads one NotificationRequestItem: a payment for a successful
// AUTHORISATION, nil for any other item.
func (a adyenAdapter) item(item *jsonNode, prefix string) (*store.Payment, paymentFields, error) {
	code, _, err := item.requiredString(prefix, "eventCode")
	if err != nil {
		return nil, nil, err
	}
	success, successName, err := item.requiredString(prefix, "success")
	if err != nil {
		return nil, nil, err
	}
	if success != "true" && success != "false" {
		return nil, nil, payload.Invalid(successName, successName+` must be "true" or "false"`)
	}
	if code != "AUTHORISATION" || success != "true" {
		return nil, nil, nil
	}
	p := store.Payment{Payload: item.raw}
	var txName, amountName, currencyName string
	if p.TransactionID, txName, err = item.requiredString(prefix, "pspReference"); err != nil {
		return nil, nil, err
	}
	if _, _, err := item.requiredObject(prefix, "amount"); err != nil {
		return nil, nil, err
	}
	if p.Amount, amountName, err = item.requiredAmount(prefix, "amount", "value"); err != nil {
		return nil, nil, err
	}
	if p.Currency, currencyName, err = item.requiredString(prefix, "amount", "currency"); err != nil {
		return nil, nil, err
	}
	p.EventID = p.TransactionID + ":" + code
	fields := paymentFields{
		"transaction_id": txName, "amount": amountName, "currency": currencyName, "event_id": txName,
	}
	if err := a.rules.checkPayment(p, fields); err != nil {
		return nil, nil, err
	}
	return &p, fields, nil
}
