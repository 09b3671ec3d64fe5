package signature_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

// testAdyenKeys are the current, the old and an unknown Adyen HMAC key.
var testAdyenKeys = [3]string{
	"7A3F19C2D4E5B6A798812233445566778899AABBCCDDEEFF0011223344556677",
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	"FFEEDDCCBBAA99887766554433221100FFEEDDCCBBAA99887766554433221100",
}

func adyenSecret(t testing.TB, hexKey string) signature.Secret {
	t.Helper()
	s, err := signature.ParseSecrets(signature.SchemeAdyen, hexKey)
	if err != nil {
		t.Fatal(err)
	}
	return s[0]
}

// adyenKeys holds the secrets of testAdyenKeys and a verifier configured
// with the current key first and the old one at index 1, as during a
// rotation to a new key.
type adyenKeys struct {
	cur, old, other signature.Secret
	verifier        *signature.Verifier
}

func adyenSetup(t *testing.T) adyenKeys {
	t.Helper()
	k := adyenKeys{
		cur:   adyenSecret(t, testAdyenKeys[0]),
		old:   adyenSecret(t, testAdyenKeys[1]),
		other: adyenSecret(t, testAdyenKeys[2]),
	}
	v, err := signature.NewVerifier(signature.SchemeAdyen, []signature.Secret{k.cur, k.old}, 0)
	if err != nil {
		t.Fatal(err)
	}
	k.verifier = v.WithClock(func() time.Time { return now })
	return k
}

// adyenItem returns a NotificationRequestItem as Adyen sends one, changed by
// edit.
func adyenItem(edit func(m map[string]any)) map[string]any {
	m := map[string]any{
		"additionalData":      map[string]any{"authCode": "58747"},
		"amount":              map[string]any{"currency": "EUR", "value": 1000},
		"eventCode":           "AUTHORISATION",
		"eventDate":           "2026-11-30T12:00:00+01:00",
		"merchantAccountCode": "PaylockECOM",
		"merchantReference":   "order-1001",
		"originalReference":   "",
		"paymentMethod":       "visa",
		"pspReference":        "7914073381342284",
		"success":             "true",
	}
	if edit != nil {
		edit(m)
	}
	return m
}

// notification returns the JSON notification holding items, unsigned.
func notification(t testing.TB, items ...map[string]any) []byte {
	t.Helper()
	list := make([]any, len(items))
	for i, it := range items {
		list[i] = map[string]any{"NotificationRequestItem": it}
	}
	b, err := json.Marshal(map[string]any{"live": "false", "notificationItems": list})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signed returns the notification holding items, each signed with s.
func signed(t testing.TB, s signature.Secret, items ...map[string]any) []byte {
	t.Helper()
	b, err := signature.SignAdyenNotification(s, notification(t, items...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signedItems returns the NotificationRequestItem objects of signed(s,
// items...), to be put together with others by rawNotification.
func signedItems(t testing.TB, s signature.Secret, items ...map[string]any) []json.RawMessage {
	t.Helper()
	var n struct {
		NotificationItems []struct{ NotificationRequestItem json.RawMessage }
	}
	if err := json.Unmarshal(signed(t, s, items...), &n); err != nil {
		t.Fatal(err)
	}
	out := make([]json.RawMessage, len(n.NotificationItems))
	for i, it := range n.NotificationItems {
		out[i] = it.NotificationRequestItem
	}
	return out
}

func rawNotification(items ...json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteString(`{"live":"false","notificationItems":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"NotificationRequestItem":`)
		b.Write(it)
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// replace replaces the first old in b with new, failing if there is none.
func replace(t testing.TB, b []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s not in %s", old, b)
	}
	return bytes.Replace(b, []byte(old), []byte(new), 1)
}

// signatureOf returns the hmacSignature of the first item of body.
func signatureOf(t testing.TB, body []byte) string {
	t.Helper()
	var n struct {
		NotificationItems []struct {
			NotificationRequestItem struct {
				AdditionalData map[string]any `json:"additionalData"`
			}
		}
	}
	if err := json.Unmarshal(body, &n); err != nil || len(n.NotificationItems) == 0 {
		t.Fatalf("no item in %s (%v)", body, err)
	}
	s, _ := n.NotificationItems[0].NotificationRequestItem.AdditionalData["hmacSignature"].(string)
	return s
}

func TestVerifyAdyen(t *testing.T) {
	t.Parallel()
	three := func(k adyenKeys, s signature.Secret) []byte {
		return signed(t, s, adyenItem(nil),
			adyenItem(func(m map[string]any) { m["pspReference"] = "7914073381342285" }),
			adyenItem(func(m map[string]any) { m["pspReference"] = "7914073381342286" }))
	}
	many := func(n int) func(t *testing.T, k adyenKeys) []byte {
		return func(t *testing.T, k adyenKeys) []byte {
			// SignAdyenNotification signs at most 100 items at a time.
			var raws []json.RawMessage
			for len(raws) < n {
				items := make([]map[string]any, min(n-len(raws), 100))
				for i := range items {
					items[i] = adyenItem(func(m map[string]any) { m["pspReference"] = fmt.Sprintf("79140733813%05d", len(raws)+i) })
				}
				raws = append(raws, signedItems(t, k.cur, items...)...)
			}
			return rawNotification(raws...)
		}
	}
	good := func(edit func(m map[string]any)) func(t *testing.T, k adyenKeys) []byte {
		return func(t *testing.T, k adyenKeys) []byte { return signed(t, k.cur, adyenItem(edit)) }
	}
	// tampered signs the base item with the current key and replaces old
	// with new in the body.
	tampered := func(old, new string) func(t *testing.T, k adyenKeys) []byte {
		return func(t *testing.T, k adyenKeys) []byte { return replace(t, signed(t, k.cur, adyenItem(nil)), old, new) }
	}
	withSignature := func(sig string) func(t *testing.T, k adyenKeys) []byte {
		return func(t *testing.T, k adyenKeys) []byte {
			b := signed(t, k.cur, adyenItem(nil))
			return replace(t, b, `"hmacSignature":"`+signatureOf(t, b)+`"`, `"hmacSignature":`+sig)
		}
	}
	raw := func(s string) func(t *testing.T, k adyenKeys) []byte {
		return func(*testing.T, adyenKeys) []byte { return []byte(s) }
	}
	del := func(key string) func(m map[string]any) { return func(m map[string]any) { delete(m, key) } }

	for _, tc := range []struct {
		name  string
		body  func(t *testing.T, k adyenKeys) []byte
		want  error
		index int
	}{
		{name: "one item, current key", body: good(nil), index: 0},
		{name: "one item, old key at index 1 (rotation)", body: func(t *testing.T, k adyenKeys) []byte { return signed(t, k.old, adyenItem(nil)) }, index: 1},
		{name: "three items", body: func(t *testing.T, k adyenKeys) []byte { return three(k, k.cur) }, index: 0},
		{name: "items signed with different keys: the highest index", body: func(t *testing.T, k adyenKeys) []byte {
			return rawNotification(append(signedItems(t, k.cur, adyenItem(nil)), signedItems(t, k.old, adyenItem(nil))...)...)
		}, index: 1},
		{name: "100 items", body: many(100), index: 0},
		{name: "empty originalReference", body: good(func(m map[string]any) { m["originalReference"] = "" })},
		{name: "null originalReference reads as empty", body: good(func(m map[string]any) { m["originalReference"] = nil })},
		{name: "no originalReference", body: good(del("originalReference"))},
		{name: "no amount", body: good(del("amount"))},
		{name: "value 0", body: good(func(m map[string]any) { m["amount"] = map[string]any{"currency": "EUR", "value": 0} })},
		{name: "negative value", body: good(func(m map[string]any) { m["amount"] = map[string]any{"currency": "EUR", "value": -500} })},
		{name: "colon and unicode in merchantReference", body: good(func(m map[string]any) { m["merchantReference"] = "shop:café ✓ 注文:42" })},
		{name: "whitespace around tokens", body: func(t *testing.T, k adyenKeys) []byte {
			b := signed(t, k.cur, adyenItem(nil))
			return bytes.ReplaceAll(bytes.ReplaceAll(b, []byte(`":`), []byte("\" :\n\t")), []byte(`,"`), []byte(" ,\r\n\""))
		}},
		{name: "unsigned members are not authenticated", body: tampered(`"paymentMethod":"visa"`, `"paymentMethod":"mc"`)},

		{name: "unknown key", body: func(t *testing.T, k adyenKeys) []byte { return signed(t, k.other, adyenItem(nil)) }, want: signature.ErrNoMatch},
		{name: "tampered value", body: tampered(`"value":1000`, `"value":1001`), want: signature.ErrNoMatch},
		{name: "tampered currency", body: tampered(`"currency":"EUR"`, `"currency":"USD"`), want: signature.ErrNoMatch},
		{name: "tampered pspReference", body: tampered(`"pspReference":"7914073381342284"`, `"pspReference":"7914073381342289"`), want: signature.ErrNoMatch},
		{name: "tampered merchantReference", body: tampered(`"merchantReference":"order-1001"`, `"merchantReference":"order-1002"`), want: signature.ErrNoMatch},
		{name: "tampered eventCode", body: tampered(`"eventCode":"AUTHORISATION"`, `"eventCode":"CAPTURE"`), want: signature.ErrNoMatch},
		{name: "tampered success", body: tampered(`"success":"true"`, `"success":"false"`), want: signature.ErrNoMatch},
		{name: "originalReference added", body: tampered(`"originalReference":""`, `"originalReference":"7914073381342280"`), want: signature.ErrNoMatch},
		{name: "one bad item among three fails all", body: func(t *testing.T, k adyenKeys) []byte {
			return replace(t, three(k, k.cur), `"pspReference":"7914073381342285"`, `"pspReference":"7914073381342287"`)
		}, want: signature.ErrNoMatch},
		{name: "one item signed with an unknown key among three", body: func(t *testing.T, k adyenKeys) []byte {
			items := signedItems(t, k.cur, adyenItem(nil), adyenItem(nil))
			return rawNotification(items[0], signedItems(t, k.other, adyenItem(nil))[0], items[1])
		}, want: signature.ErrNoMatch},
		{name: "signature of another item", body: func(t *testing.T, k adyenKeys) []byte {
			a := signed(t, k.cur, adyenItem(nil))
			b := signed(t, k.cur, adyenItem(func(m map[string]any) { m["pspReference"] = "7914073381342285" }))
			return replace(t, a, signatureOf(t, a), signatureOf(t, b))
		}, want: signature.ErrNoMatch},

		{name: "no additionalData", body: func(t *testing.T, k adyenKeys) []byte { return notification(t, adyenItem(nil)) }, want: signature.ErrMissingHeader},
		{name: "missing signature in one of three", body: func(t *testing.T, k adyenKeys) []byte {
			items := signedItems(t, k.cur, adyenItem(nil), adyenItem(nil))
			unsigned, _ := json.Marshal(adyenItem(nil))
			return rawNotification(items[0], items[1], unsigned)
		}, want: signature.ErrMissingHeader},
		{name: "empty signature", body: withSignature(`""`), want: signature.ErrMissingHeader},
		{name: "null signature", body: withSignature(`null`), want: signature.ErrMissingHeader},
		{name: "null additionalData", body: func(t *testing.T, k adyenKeys) []byte {
			return notification(t, adyenItem(func(m map[string]any) { m["additionalData"] = nil }))
		}, want: signature.ErrMissingHeader},

		{name: "signature not base64", body: withSignature(`"` + strings.Repeat("!", 44) + `"`), want: signature.ErrMalformed},
		{name: "signature of 16 bytes", body: withSignature(`"` + base64.StdEncoding.EncodeToString(make([]byte, 16)) + `"`), want: signature.ErrMalformed},
		{name: "signature unpadded", body: withSignature(`"` + base64.RawStdEncoding.EncodeToString(make([]byte, 32)) + `"`), want: signature.ErrMalformed},
		{name: "signature with a newline", body: withSignature(`"` + base64.StdEncoding.EncodeToString(make([]byte, 32))[:43] + `\n="`), want: signature.ErrMalformed},
		{name: "signature not a string", body: withSignature(`42`), want: signature.ErrMalformed},
		{name: "101 items", body: many(101), want: signature.ErrMalformed},
		{name: "100 items with 80 additionalData members each", body: func(t *testing.T, k adyenKeys) []byte {
			items := make([]map[string]any, 100)
			for i := range items {
				items[i] = adyenItem(func(m map[string]any) {
					extra := map[string]any{}
					for j := range 80 {
						extra[fmt.Sprintf("key%d", j)] = "v"
					}
					m["additionalData"] = extra
				})
			}
			return signed(t, k.cur, items...)
		}},
		{name: "more than 10,000 members read", body: tampered(`"additionalData":{`, `"additionalData":{`+strings.Repeat(`"k":1,`, 10_000)), want: signature.ErrMalformed},
		{name: "empty body", body: raw(``), want: signature.ErrMalformed},
		{name: "malformed JSON", body: tampered(`"eventCode":"AUTHORISATION",`, `"eventCode":"AUTHORISATION"`), want: signature.ErrMalformed},
		{name: "truncated", body: func(t *testing.T, k adyenKeys) []byte { b := signed(t, k.cur, adyenItem(nil)); return b[:len(b)-1] }, want: signature.ErrMalformed},
		{name: "data after the notification", body: func(t *testing.T, k adyenKeys) []byte { return append(signed(t, k.cur, adyenItem(nil)), "{}"...) }, want: signature.ErrMalformed},
		{name: "not UTF-8", body: tampered(`"paymentMethod":"visa"`, "\"paymentMethod\":\"vis\xff\""), want: signature.ErrMalformed},
		{name: "an array", body: raw(`[]`), want: signature.ErrMalformed},
		{name: "no notificationItems", body: raw(`{"live":"false"}`), want: signature.ErrMalformed},
		{name: "empty notificationItems", body: raw(`{"live":"false","notificationItems":[]}`), want: signature.ErrMalformed},
		{name: "null notificationItems", body: raw(`{"live":"false","notificationItems":null}`), want: signature.ErrMalformed},
		{name: "notificationItems an object", body: raw(`{"notificationItems":{"NotificationRequestItem":{}}}`), want: signature.ErrMalformed},
		{name: "item without NotificationRequestItem", body: raw(`{"notificationItems":[{}]}`), want: signature.ErrMalformed},
		{name: "item null", body: raw(`{"notificationItems":[null]}`), want: signature.ErrMalformed},
		{name: "NotificationRequestItem null", body: raw(`{"notificationItems":[{"NotificationRequestItem":null}]}`), want: signature.ErrMalformed},
		{name: "repeated notificationItems", body: func(t *testing.T, k adyenKeys) []byte {
			return replace(t, signed(t, k.cur, adyenItem(nil)), `{"live":"false",`, `{"live":"false","notificationItems":[],`)
		}, want: signature.ErrMalformed},
		{name: "notificationItems in another case", body: func(t *testing.T, k adyenKeys) []byte {
			return replace(t, signed(t, k.cur, adyenItem(nil)), `{"live":"false",`, `{"live":"false","NotificationItems":[],`)
		}, want: signature.ErrMalformed},
		{name: "repeated NotificationRequestItem", body: func(t *testing.T, k adyenKeys) []byte {
			b := signed(t, k.cur, adyenItem(nil))
			return replace(t, b, `[{"NotificationRequestItem":`, `[{"NotificationRequestItem":{},"NotificationRequestItem":`)
		}, want: signature.ErrMalformed},
		{name: "repeated pspReference", body: tampered(`"pspReference":"7914073381342284"`, `"pspReference":"7914073381342284","pspReference":"7914073381342289"`), want: signature.ErrMalformed},
		{name: "pspReference in another case", body: tampered(`"pspReference":"7914073381342284"`, `"pspReference":"7914073381342284","PSPReference":"7914073381342289"`), want: signature.ErrMalformed},
		{name: "success spelt with a long s (U+017F)", body: tampered(`"success":"true"`, `"success":"true","ſuccess":"false"`), want: signature.ErrMalformed},
		{name: "repeated amount", body: tampered(`"amount":{`, `"amount":{"currency":"EUR","value":1},"amount":{`), want: signature.ErrMalformed},
		{name: "repeated value", body: tampered(`"value":1000`, `"value":1000,"value":5`), want: signature.ErrMalformed},
		{name: "repeated currency", body: tampered(`"currency":"EUR"`, `"currency":"EUR","Currency":"USD"`), want: signature.ErrMalformed},
		{name: "repeated additionalData", body: tampered(`"additionalData":{`, `"additionalData":{},"additionalData":{`), want: signature.ErrMalformed},
		{name: "repeated hmacSignature", body: func(t *testing.T, k adyenKeys) []byte {
			b := signed(t, k.cur, adyenItem(nil))
			return replace(t, b, `"hmacSignature":`, `"hmacSignature":"`+base64.StdEncoding.EncodeToString(make([]byte, 32))+`","hmacSignature":`)
		}, want: signature.ErrMalformed},
		{name: "value 1000.0", body: tampered(`"value":1000`, `"value":1000.0`), want: signature.ErrMalformed},
		{name: "value 1e3", body: tampered(`"value":1000`, `"value":1e3`), want: signature.ErrMalformed},
		{name: "value -0", body: tampered(`"value":1000`, `"value":-0`), want: signature.ErrMalformed},
		{name: "value 2^53", body: tampered(`"value":1000`, `"value":9007199254740992`), want: signature.ErrMalformed},
		{name: "value a string", body: tampered(`"value":1000`, `"value":"1000"`), want: signature.ErrMalformed},
		{name: "value null", body: tampered(`"value":1000`, `"value":null`), want: signature.ErrMalformed},
		{name: "amount a string", body: tampered(`"amount":{"currency":"EUR","value":1000}`, `"amount":"EUR 10.00"`), want: signature.ErrMalformed},
		{name: "success a boolean", body: tampered(`"success":"true"`, `"success":true`), want: signature.ErrMalformed},
		{name: "pspReference a number", body: tampered(`"pspReference":"7914073381342284"`, `"pspReference":7914073381342284`), want: signature.ErrMalformed},
		{name: "currency an array", body: tampered(`"currency":"EUR"`, `"currency":["EUR"]`), want: signature.ErrMalformed},
		{name: "additionalData a string", body: tampered(`"additionalData":{"authCode":"58747",`, `"additionalData":"x","y":{`), want: signature.ErrMalformed},
		{name: "colon in pspReference", body: tampered(`"pspReference":"7914073381342284"`, `"pspReference":"79140733:81342284"`), want: signature.ErrMalformed},
		{name: "colon in eventCode", body: tampered(`"eventCode":"AUTHORISATION"`, `"eventCode":"AUTHORISATION:"`), want: signature.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := adyenSetup(t)
			b := tc.body(t, k)
			res, err := k.verifier.Verify(http.Header{}, b)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v, want success\nbody: %s", err, b)
				}
				if want := (signature.Result{SecretIndex: tc.index}); res != want {
					t.Errorf("Result = %+v, want %+v", res, want)
				}
				return
			}
			assertSentinel(t, err, tc.want)
			if res != (signature.Result{}) {
				t.Errorf("Result = %+v on failure, want the zero Result", res)
			}
			for _, secret := range []string{"7914073381342284", "order-1001", "PaylockECOM", "58747"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q echoes the body", err)
				}
			}
		})
	}
}

// Adyen joins the signed fields with ':' and escapes nothing, so a colon
// could move from one field to its neighbour without changing the signed
// text. Only merchantReference may hold one, which makes the split unique.
func TestAdyenColonsCannotMoveBetweenFields(t *testing.T) {
	t.Parallel()
	k := adyenSetup(t)
	b := signed(t, k.cur, adyenItem(func(m map[string]any) { m["merchantReference"] = "PaylockECOM:order-1001" }))
	moved := replace(t, b, `"merchantAccountCode":"PaylockECOM","merchantReference":"PaylockECOM:order-1001"`,
		`"merchantAccountCode":"PaylockECOM:PaylockECOM","merchantReference":"order-1001"`)

	// The moved item has the same signed text, so Adyen's own check would
	// accept it...
	mac := hmac.New(sha256.New, mustHex(t, testAdyenKeys[0]))
	mac.Write([]byte("7914073381342284::PaylockECOM:PaylockECOM:order-1001:1000:EUR:AUTHORISATION:true"))
	if got := base64.StdEncoding.EncodeToString(mac.Sum(nil)); got != signatureOf(t, moved) {
		t.Fatalf("the moved item's signed text is not the original's: %s vs %s", got, signatureOf(t, moved))
	}
	if _, err := k.verifier.Verify(nil, b); err != nil {
		t.Fatalf("the original: %v", err)
	}
	// ...but a colon outside merchantReference is refused.
	_, err := k.verifier.Verify(nil, moved)
	assertSentinel(t, err, signature.ErrMalformed)
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVerifyAdyenIgnoresHeaders(t *testing.T) {
	t.Parallel()
	k := adyenSetup(t)
	b := signed(t, k.old, adyenItem(nil))
	h := signature.Sign(signature.SchemeStripe, setup(t, signature.SchemeStripe).cur, "", now, b)
	h.Set(signature.HeaderWebhookTimestamp, "0")
	for _, h := range []http.Header{nil, {}, h} {
		if res, err := k.verifier.Verify(h, b); err != nil || res.SecretIndex != 1 {
			t.Errorf("Verify(%v) = %+v, %v", h, res, err)
		}
		if err := k.verifier.Precheck(h); err != nil {
			t.Errorf("Precheck(%v) = %v, want nil: the signatures are in the body", h, err)
		}
	}
}

func TestSignAdyenNotification(t *testing.T) {
	t.Parallel()
	k := adyenSetup(t)
	in := []byte(`{"live":"false","notificationItems":[{"NotificationRequestItem":{
		"additionalData":{"hmacSignature":"stale","nested":{"a":[1,2.50,"<&>"]}},
		"amount":{"value":1000,"currency":"EUR"},"pspReference":"7914073381342284","eventCode":"AUTHORISATION",
		"merchantAccountCode":"PaylockECOM","merchantReference":"café","success":"true","extra":1.10}},
		{"NotificationRequestItem":{"pspReference":"7914073381342285","success":"false"}}]}`)
	out, err := signature.SignAdyenNotification(k.cur, in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"live":"false","notificationItems":[{"NotificationRequestItem":{` +
		`"additionalData":{"hmacSignature":"%s","nested":{"a":[1,2.50,"<&>"]}},` +
		`"amount":{"currency":"EUR","value":1000},"eventCode":"AUTHORISATION","extra":1.10,` +
		`"merchantAccountCode":"PaylockECOM","merchantReference":"café","pspReference":"7914073381342284","success":"true"}},` +
		`{"NotificationRequestItem":{"additionalData":{"hmacSignature":"%s"},"pspReference":"7914073381342285","success":"false"}}]}`
	sig := func(text string) string {
		m := hmac.New(sha256.New, mustHex(t, testAdyenKeys[0]))
		m.Write([]byte(text))
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	if w := fmt.Sprintf(want, sig("7914073381342284::PaylockECOM:café:1000:EUR:AUTHORISATION:true"), sig("7914073381342285:::::::false")); string(out) != w {
		t.Errorf("SignAdyenNotification =\n%s\nwant\n%s", out, w)
	}
	if res, err := k.verifier.Verify(nil, out); err != nil || res.SecretIndex != 0 {
		t.Errorf("Verify = %+v, %v", res, err)
	}

	for _, bad := range []string{``, `{}`, `{"notificationItems":[{"NotificationRequestItem":{"success":true}}]}`, `{"notificationItems":[{"NotificationRequestItem":{"pspReference":"a:b"}}]}`} {
		if out, err := signature.SignAdyenNotification(k.cur, []byte(bad)); err == nil {
			t.Errorf("SignAdyenNotification(%s) = %s, want an error", bad, out)
		} else {
			assertSentinel(t, err, signature.ErrMalformed)
		}
	}
}

func TestSignAdyenNotificationPanicsOnASecretOfAnotherScheme(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]signature.Secret{"stripe": setup(t, signature.SchemeStripe).cur, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("SignAdyenNotification did not panic")
				}
			}()
			_, _ = signature.SignAdyenNotification(s, notification(t, adyenItem(nil)))
		})
	}
}

func TestNewVerifierRefusesAnAdyenSecretForAnotherScheme(t *testing.T) {
	t.Parallel()
	s := adyenSecret(t, testAdyenKeys[0])
	if _, err := signature.NewVerifier(signature.SchemeStandard, []signature.Secret{s}, 0); err == nil {
		t.Error("NewVerifier(standard) accepted an adyen secret")
	}
	if _, err := signature.NewVerifier(signature.SchemeAdyen, []signature.Secret{setup(t, signature.SchemeStripe).cur}, 0); err == nil {
		t.Error("NewVerifier(adyen) accepted a stripe secret")
	}
}
