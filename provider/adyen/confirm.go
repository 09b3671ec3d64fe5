package adyen

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// ConfirmOrigin is the value of the additionalData member "paylockOrigin"
// in a notification item built from a confirmed /payments answer: the
// payment's stored event says it came from the shop's backend, not from
// Adyen's webhook.
const ConfirmOrigin = "confirm"

// resultCodes are the /payments resultCodes
// (https://docs.adyen.com/online-payments/build-your-integration/payment-result-codes):
// each final one with the success its AUTHORISATION notification says,
// the others not final (nothing to record yet).
var resultCodes = map[string]struct{ final, success bool }{
	"Authorised":                {true, true},
	"Refused":                   {true, false},
	"Error":                     {true, false},
	"Cancelled":                 {true, false},
	"Pending":                   {},
	"Received":                  {},
	"RedirectShopper":           {},
	"IdentifyShopper":           {},
	"ChallengeShopper":          {},
	"PresentToShopper":          {},
	"AuthenticationFinished":    {},
	"AuthenticationNotRequired": {},
	"PartiallyAuthorised":       {},
}

// ConfirmBody reads Adyen's /payments answer as the shop's backend got it,
// strictly: pspReference, resultCode (one of Adyen's), amount.value (an
// integer in minor units, > 0), amount.currency (three upper-case
// letters), merchantReference, all required; merchantAccount optional
// (required by a source with merchant_accounts). A final resultCode
// becomes the AUTHORISATION notification it stands for (success "true"
// for Authorised, "false" for Refused, Error and Cancelled), with Adyen's
// own event id (pspReference:AUTHORISATION), so that the webhook of the
// same authorisation is its duplicate, and additionalData.paylockOrigin
// "confirm". Any other resultCode returns a nil body. Every refusal is a
// *payload.Error of kind payload.ErrMalformed (400) naming the member.
func (p Provider) ConfirmBody(settings provider.Settings, answer []byte) ([]byte, string, string, error) {
	body, ref, result, err := p.confirmBody(settings, answer)
	var pe *payload.Error
	if errors.As(err, &pe) {
		// The shop's backend sent it: any refusal is a bad request.
		err = payload.Malformed(pe.Field, pe.Detail)
	}
	return body, ref, result, err
}

func (Provider) confirmBody(settings provider.Settings, answer []byte) ([]byte, string, string, error) {
	root, err := payload.Decode(answer)
	if err != nil {
		return nil, "", "", err
	}
	if root.Kind() != payload.Object {
		return nil, "", "", payload.Malformed("", "the body must be a JSON object: Adyen's /payments answer")
	}
	psp, _, err := root.RequiredString("", "pspReference")
	if err != nil {
		return nil, "", "", err
	}
	code, codeName, err := root.RequiredString("", "resultCode")
	if err != nil {
		return nil, "", "", err
	}
	rc, known := resultCodes[code]
	if !known {
		return nil, "", "", payload.Invalid(codeName, fmt.Sprintf("resultCode %q is not one of Adyen's /payments result codes", code))
	}
	ref, _, err := root.RequiredString("", "merchantReference")
	if err != nil {
		return nil, "", "", err
	}
	if _, _, err := root.RequiredObject("", "amount"); err != nil {
		return nil, "", "", err
	}
	value, valueName, err := root.RequiredAmount("", "amount", "value")
	if err != nil {
		return nil, "", "", err
	}
	if value <= 0 {
		return nil, "", "", payload.Invalid(valueName, "amount.value must be greater than 0 (minor units)")
	}
	currency, curName, err := root.RequiredString("", "amount", "currency")
	if err != nil {
		return nil, "", "", err
	}
	if len(currency) != 3 || strings.ToUpper(currency) != currency || strings.ToLower(currency) == currency {
		return nil, "", "", payload.Invalid(curName, "amount.currency must be an ISO 4217 code in upper case, such as EUR")
	}
	item := map[string]any{
		"eventCode": "AUTHORISATION", "success": fmt.Sprint(rc.success), "pspReference": psp,
		"originalReference": "", "merchantReference": ref,
		"amount":         map[string]any{"value": value, "currency": currency},
		"eventDate":      time.Now().UTC().Format(time.RFC3339),
		"additionalData": map[string]string{"paylockOrigin": ConfirmOrigin},
	}
	if acc, name, err := root.Child("", "merchantAccount"); err != nil {
		return nil, "", "", err
	} else if acc != nil {
		if acc.Kind() != payload.String || acc.Text() == "" {
			return nil, "", "", payload.Malformed(name, "merchantAccount must be a non-empty string")
		}
		item["merchantAccountCode"] = acc.Text()
	}
	if !rc.final {
		return nil, psp, code, nil
	}
	notification := map[string]any{"notificationItems": []any{map[string]any{"NotificationRequestItem": item}}}
	if raw, ok := settings[keyLive]; ok {
		var live bool
		if json.Unmarshal(raw, &live) == nil {
			notification["live"] = fmt.Sprint(live)
		}
	}
	body, err := json.Marshal(notification)
	return body, psp, code, err
}
