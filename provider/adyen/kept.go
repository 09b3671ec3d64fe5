package adyen

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"strconv"

	"github.com/paylock/paylock/provider"
)

// What the delivery log keeps of an Adyen delivery (provider.Keeper):
// each notification item alone, re-serialised from the members its HMAC
// covers (hmacCovered, and amount's value and currency), keyed by the hash
// of those signed fields. additionalData (which holds hmacSignature, card
// and shopper data) and every other unsigned member are dropped, and so are
// the body's unsigned wrappings (a padding member, a repeated key, other
// items): one signed item captured from a forward or a topic is one row of
// the log however often and however it is wrapped again. The top-level
// "live" is kept as "true" or "false" when the body says one of them (the
// source's live setting reads it on replay); it is no part of the key.

// keptItem is the signed content of one item, in the order Adyen signs it.
type keptItem struct {
	PSPReference        *string     `json:"pspReference,omitempty"`
	OriginalReference   *string     `json:"originalReference,omitempty"`
	MerchantAccountCode *string     `json:"merchantAccountCode,omitempty"`
	MerchantReference   *string     `json:"merchantReference,omitempty"`
	Amount              *keptAmount `json:"amount,omitempty"`
	EventCode           *string     `json:"eventCode,omitempty"`
	Success             *string     `json:"success,omitempty"`
}

type keptAmount struct {
	Value    *json.Number `json:"value,omitempty"`
	Currency *string      `json:"currency,omitempty"`
}

// signedText is the item's signed fields as Adyen joins them (absent
// members as ""), the key's input.
func (k keptItem) signedText() string {
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	var value, currency string
	if k.Amount != nil {
		if k.Amount.Value != nil {
			value = k.Amount.Value.String()
		}
		currency = s(k.Amount.Currency)
	}
	return s(k.PSPReference) + ":" + s(k.OriginalReference) + ":" + s(k.MerchantAccountCode) + ":" +
		s(k.MerchantReference) + ":" + value + ":" + currency + ":" + s(k.EventCode) + ":" + s(k.Success)
}

// Kept returns one row per notification item of body (at most maxItems),
// each {"live":...,"notificationItems":[{"NotificationRequestItem":{signed
// members}}]}, keyed by the SHA-256 of the item's signed text, typed by
// its eventCode; none when body is not a notification.
func (adapter) Kept(body []byte) []provider.Kept {
	var n struct {
		Live  json.RawMessage `json:"live"`
		Items []struct {
			Item json.RawMessage `json:"NotificationRequestItem"`
		} `json:"notificationItems"`
	}
	if json.Unmarshal(body, &n) != nil {
		return nil
	}
	var live string
	if s, err := strconv.Unquote(string(n.Live)); err == nil && (s == "true" || s == "false") {
		live = s
	}
	var out []provider.Kept
	seen := make(map[string]bool)
	for i, w := range n.Items {
		if i == maxItems {
			break
		}
		var item keptItem
		dec := json.NewDecoder(bytes.NewReader(w.Item))
		dec.UseNumber()
		if len(w.Item) == 0 || dec.Decode(&item) != nil {
			continue
		}
		text := item.signedText()
		if seen[text] {
			continue
		}
		seen[text] = true
		kept := struct {
			Live  string `json:"live,omitempty"`
			Items []struct {
				Item keptItem `json:"NotificationRequestItem"`
			} `json:"notificationItems"`
		}{Live: live}
		kept.Items = append(kept.Items, struct {
			Item keptItem `json:"NotificationRequestItem"`
		}{item})
		b, err := json.Marshal(kept)
		if err != nil {
			continue
		}
		sum := sha256.Sum256([]byte("adyen-item\x00" + text))
		k := provider.Kept{Body: b, Key: sum[:]}
		if item.EventCode != nil {
			k.EventType = *item.EventCode
			if item.PSPReference != nil {
				k.EventID = *item.PSPReference + ":" + *item.EventCode
			}
		}
		out = append(out, k)
	}
	return out
}

// Redacted: the members of an item that carry card, shopper and
// signature data, all in additionalData. Kept drops additionalData whole;
// these reach it wherever a body is kept as received.
func (Provider) Redacted() []string {
	const ad = "/notificationItems/*/NotificationRequestItem/additionalData/"
	var out []string
	for _, m := range []string{"hmacSignature", "cardSummary", "cardHolderName", "cardBin", "issuerBin", "expiryDate",
		"shopperEmail", "shopperName", "shopperReference", "shopperIP", "shopperTelephone", "billingAddress.street",
		"billingAddress.houseNumberOrName", "billingAddress.postalCode", "deliveryAddress.street", "authCode"} {
		out = append(out, ad+m)
	}
	return out
}
