package signature

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxAdyenItems bounds the notification items of one Adyen delivery. Adyen
// sends one item per notification today and documents batches of at most a
// few; every item costs one HMAC per configured key.
const maxAdyenItems = 100

// maxAdyenMembers bounds the members of the objects parseAdyen walks (the
// notification, its items, their amount and additionalData), all together.
// Reading a member costs a few microseconds, and a 1 MiB body could hold
// 170,000 of them; the bound keeps an unauthenticated body to a few tens of
// milliseconds of work. Adyen items hold some 15 members and an
// additionalData of a few dozen, so 100 items stay well within it.
const maxAdyenMembers = 10_000

// maxSafeInteger is the largest integer a JavaScript number holds exactly
// (2^53-1). Adyen's libraries turn amount.value into text through such
// numbers, so a larger one would be signed as something else.
const maxSafeInteger = 1<<53 - 1

// The member names of an Adyen notification that this package reads.
const (
	adyenItems         = "notificationItems"
	adyenItem          = "NotificationRequestItem"
	adyenAdditional    = "additionalData"
	adyenSignatureName = "hmacSignature"
	adyenAmount        = "amount"
	adyenValue         = "value"
	adyenCurrency      = "currency"
)

// adyenSigned lists the item's signed string members in signing order; the
// amount's value and currency come between merchantReference and
// eventCode.
var adyenSigned = [...]string{"pspReference", "originalReference", "merchantAccountCode", "merchantReference", "eventCode", "success"}

// adyenItemNames are the members of a NotificationRequestItem that are read:
// a case variant or a repeat of any of them is malformed.
var adyenItemNames = []string{
	adyenSigned[0], adyenSigned[1], adyenSigned[2], adyenSigned[3], adyenSigned[4], adyenSigned[5],
	adyenAmount, adyenAdditional,
}

// adyenFields is the signed content of one notification item: the eight
// fields Adyen's HMAC covers, as text ("" when absent), and the signature it
// carries.
type adyenFields struct {
	pspReference, originalReference, merchantAccountCode, merchantReference string
	value, currency, eventCode, success                                     string
	// signature is additionalData.hmacSignature as sent, "" when absent.
	signature string
}

// signedData is what Adyen signs: the eight fields joined with ':'.
func (f *adyenFields) signedData() string {
	return strings.Join([]string{
		f.pspReference, f.originalReference, f.merchantAccountCode, f.merchantReference,
		f.value, f.currency, f.eventCode, f.success,
	}, ":")
}

// adyenMAC is HMAC-SHA256(key, signedData).
func adyenMAC(key []byte, f *adyenFields) []byte {
	m := hmac.New(sha256.New, key)
	_, _ = io.WriteString(m, f.signedData())
	return m.Sum(nil)
}

func (v *Verifier) verifyAdyen(body []byte) (Result, error) {
	items, err := parseAdyen(body)
	if err != nil {
		return Result{}, err
	}
	sigs := make([][]byte, len(items))
	for i := range items {
		if items[i].signature == "" {
			return Result{}, fmt.Errorf("%w: adyen: item %d has no %s.%s", ErrMissingHeader, i+1, adyenAdditional, adyenSignatureName)
		}
		// The length check also keeps out the \r and \n that base64
		// decoding would skip.
		s := items[i].signature
		if len(s) != standardEncoding.EncodedLen(macSize) {
			return Result{}, malformed("adyen: item %d %s is not %d base64 characters", i+1, adyenSignatureName, standardEncoding.EncodedLen(macSize))
		}
		raw, err := standardEncoding.DecodeString(s)
		if err != nil || len(raw) != macSize {
			return Result{}, malformed("adyen: item %d %s is not base64 of %d bytes", i+1, adyenSignatureName, macSize)
		}
		sigs[i] = raw
	}
	index := -1
	for i := range items {
		j := v.match(sigs[i:i+1], func(key []byte) []byte { return adyenMAC(key, &items[i]) })
		if j < 0 {
			return Result{}, fmt.Errorf("%w: adyen: item %d of %d", ErrNoMatch, i+1, len(items))
		}
		index = max(index, j)
	}
	return Result{SecretIndex: index}, nil
}

// parseAdyen reads the notification items of an Adyen notification body and
// returns their signed fields, or an error wrapping ErrMalformed. It is
// strict wherever a lenient reading could let two JSON parsers see
// different values in a signed field:
//
//   - the body must be valid UTF-8 holding one JSON object and nothing after
//     it;
//   - notificationItems must be an array of 1 to maxAdyenItems objects, each
//     with a NotificationRequestItem object;
//   - in the top-level object, the items and the amount, a member that is
//     read must appear once, spelt exactly: encoding/json matches member
//     names without regard to case and keeps the last of repeated members,
//     other parsers keep the first; the same goes for hmacSignature in
//     additionalData;
//   - the signed strings must be JSON strings (null reads as ""), amount an
//     object, amount.value a JSON integer written canonically with at most
//     2^53-1 in magnitude (so that "1000.0", "1e3" or "-0" cannot be read
//     as one number and signed as another);
//   - no signed field but merchantReference may contain ':', the separator
//     of the signed text; otherwise colons could move from one field to its
//     neighbour without changing the signature. Adyen's references, account
//     codes, currencies, event codes and success flags never contain one.
//
// Members that are not read are skipped, whatever they hold; the objects
// that are walked may hold maxAdyenMembers members in all.
func parseAdyen(body []byte) ([]adyenFields, error) {
	if !utf8.Valid(body) {
		return nil, malformed("adyen: body is not UTF-8")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	p := &adyenParser{d: d}
	var items []adyenFields
	found := false
	err := p.object("notification", []string{adyenItems}, false, func(string) error {
		found = true
		return p.items(&items)
	})
	if err != nil {
		return nil, err
	}
	if !found || len(items) == 0 {
		return nil, malformed("adyen: no %s", adyenItems)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, malformed("adyen: data after the notification")
	}
	return items, nil
}

type adyenParser struct {
	d *json.Decoder
	// members counts the object members read, against maxAdyenMembers.
	members int
}

// token reads the next token; a syntax error is malformed. The decoder's
// error is left out of the message: it may quote the body.
func (p *adyenParser) token(what string) (json.Token, error) {
	t, err := p.d.Token()
	if err != nil {
		return nil, malformed("adyen: %s is not valid JSON", what)
	}
	return t, nil
}

// object reads an object, calling member for each member named in names
// (once each, spelt exactly) and skipping the others. With nullable, null
// reads as an absent object.
func (p *adyenParser) object(what string, names []string, nullable bool, member func(name string) error) error {
	t, err := p.token(what)
	if err != nil {
		return err
	}
	if t == nil && nullable {
		return nil
	}
	if t != json.Delim('{') {
		return malformed("adyen: %s is not an object", what)
	}
	seen := make([]bool, len(names))
	for p.d.More() {
		t, err := p.token(what)
		if err != nil {
			return err
		}
		if p.members++; p.members > maxAdyenMembers {
			return malformed("adyen: more than %d members in the objects read", maxAdyenMembers)
		}
		key, _ := t.(string) // object keys are always strings
		i := -1
		for j, n := range names {
			if strings.EqualFold(key, n) {
				i = j
				break
			}
		}
		if i < 0 {
			if err := p.skip(what); err != nil {
				return err
			}
			continue
		}
		if key != names[i] || seen[i] {
			return malformed("adyen: %s: member %s repeated or spelt in another case", what, names[i])
		}
		seen[i] = true
		if err := member(names[i]); err != nil {
			return err
		}
	}
	_, err = p.token(what) // '}'
	return err
}

// skip reads one value of any kind. Decoding into a RawMessage only scans
// the value, far faster than walking it token by token.
func (p *adyenParser) skip(what string) error {
	var v json.RawMessage
	if err := p.d.Decode(&v); err != nil {
		return malformed("adyen: %s is not valid JSON", what)
	}
	return nil
}

func (p *adyenParser) items(items *[]adyenFields) error {
	t, err := p.token(adyenItems)
	if err != nil {
		return err
	}
	if t != json.Delim('[') {
		return malformed("adyen: %s is not an array", adyenItems)
	}
	for p.d.More() {
		if len(*items) == maxAdyenItems {
			return fmt.Errorf("%w: adyen: more than %d %s", ErrTooLarge, maxAdyenItems, adyenItems)
		}
		n := len(*items) + 1
		var f adyenFields
		found := false
		err := p.object(fmt.Sprintf("item %d", n), []string{adyenItem}, false, func(string) error {
			found = true
			return p.item(n, &f)
		})
		if err != nil {
			return err
		}
		if !found {
			return malformed("adyen: item %d has no %s", n, adyenItem)
		}
		*items = append(*items, f)
	}
	_, err = p.token(adyenItems) // ']'
	return err
}

func (p *adyenParser) item(n int, f *adyenFields) error {
	what := fmt.Sprintf("item %d", n)
	signed := [...]*string{&f.pspReference, &f.originalReference, &f.merchantAccountCode, &f.merchantReference, &f.eventCode, &f.success}
	return p.object(what, adyenItemNames, false, func(name string) error {
		switch name {
		case adyenAmount:
			return p.object(what+" "+adyenAmount, []string{adyenValue, adyenCurrency}, true, func(name string) error {
				if name == adyenCurrency {
					return p.str(what+" "+adyenCurrency, &f.currency, false)
				}
				return p.value(what, &f.value)
			})
		case adyenAdditional:
			return p.object(what+" "+adyenAdditional, []string{adyenSignatureName}, true, func(string) error {
				return p.str(what+" "+adyenSignatureName, &f.signature, true)
			})
		}
		for i, s := range adyenSigned {
			if s == name {
				return p.str(what+" "+name, signed[i], name == "merchantReference")
			}
		}
		return nil // unreachable: names are adyenItemNames
	})
}

// str reads a string (null reads as ""), which may contain ':' only if
// colon.
func (p *adyenParser) str(what string, dst *string, colon bool) error {
	t, err := p.token(what)
	if err != nil {
		return err
	}
	switch s := t.(type) {
	case nil:
		*dst = ""
	case string:
		if !colon && strings.Contains(s, ":") {
			return malformed("adyen: %s contains ':'", what)
		}
		*dst = s
	default:
		return malformed("adyen: %s is not a string", what)
	}
	return nil
}

// value reads amount.value: a canonical JSON integer of magnitude at most
// 2^53-1, which is how it is signed.
func (p *adyenParser) value(what string, dst *string) error {
	t, err := p.token(what + " amount value")
	if err != nil {
		return err
	}
	num, ok := t.(json.Number)
	if !ok {
		return malformed("adyen: %s amount value is not a number", what)
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil || n > maxSafeInteger || n < -maxSafeInteger || strconv.FormatInt(n, 10) != string(num) {
		return malformed("adyen: %s amount value is not an integer written canonically within ±(2^53-1)", what)
	}
	*dst = string(num)
	return nil
}

// SignAdyenNotification signs every item of an Adyen notification body as
// Adyen would, with secret (parsed for [SchemeAdyen]), and returns the body
// with each item's additionalData.hmacSignature set, replacing any signature
// already there. It is used by `paylock sign`, tests and simulators.
//
// The body must be a notification that [Verifier.Verify] can read (see the
// package documentation); otherwise the error wraps [ErrMalformed]. The
// result is the same JSON re-encoded: members sorted by name, no
// insignificant space, numbers and strings as they were.
//
// SignAdyenNotification panics if secret was not parsed for SchemeAdyen, as
// [Sign] does.
func SignAdyenNotification(secret Secret, body []byte) ([]byte, error) {
	if secret.k == nil || secret.k.scheme != SchemeAdyen {
		panic("signature: SignAdyenNotification with a secret not parsed for the adyen scheme")
	}
	return signAdyen(secret.k.key(), body)
}

// signAdyen is SignAdyenNotification with the key's bytes.
func signAdyen(key, body []byte) ([]byte, error) {
	items, err := parseAdyen(body)
	if err != nil {
		return nil, err
	}
	// parseAdyen vouched for the shape: an object whose notificationItems
	// are objects holding a NotificationRequestItem object, with no
	// repeated member among those read.
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		return nil, malformed("adyen: body is not valid JSON")
	}
	list, _ := doc[adyenItems].([]any)
	if len(list) != len(items) {
		return nil, malformed("adyen: %s changed between readings", adyenItems) // unreachable
	}
	for i := range list {
		wrapper, _ := list[i].(map[string]any)
		item, _ := wrapper[adyenItem].(map[string]any)
		if item == nil {
			return nil, malformed("adyen: item %d has no %s", i+1, adyenItem) // unreachable
		}
		extra, _ := item[adyenAdditional].(map[string]any)
		if extra == nil {
			extra = map[string]any{}
			item[adyenAdditional] = extra
		}
		extra[adyenSignatureName] = encodeStandard(adyenMAC(key, &items[i]))
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("signature: encoding the signed notification: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte{'\n'}), nil
}
