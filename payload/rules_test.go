package payload

import (
	"reflect"
	"strings"
	"testing"
)

// taggedPayment carries the validate tags the payment rules were first
// written as; check must agree with them.
type taggedPayment struct {
	TransactionID string `json:"transaction_id" validate:"required,max=255,txid"`
	Amount        int64  `json:"amount" validate:"gt=0"`
	Currency      string `json:"currency" validate:"required,len=3,uppercase,iso4217,tender"`
}

// byValidator is what Validate says of in under the tags.
func byValidator(r *Rules, in Payment) error {
	return r.Validate(taggedPayment{TransactionID: in.TransactionID, Amount: in.Amount, Currency: in.Currency})
}

// TestCheckAgreesWithValidator checks that the direct checks of a payment
// refuse exactly what the validate tags refuse, with the same problem:
// every three-letter upper-case code, with and without admitted
// non-tender codes, and the edges of the other fields.
func TestCheckAgreesWithValidator(t *testing.T) {
	for _, extra := range [][]string{nil, {"XTS", "XAU"}} {
		r := NewRules("", extra)
		agree := func(in Payment) {
			t.Helper()
			if got, want := r.check(in), byValidator(r, in); !reflect.DeepEqual(got, want) {
				t.Fatalf("extra %v, %+v: check says %v, validator %v", extra, in, got, want)
			}
		}
		b := []byte("AAA")
		for b[0] = 'A'; b[0] <= 'Z'; b[0]++ {
			for b[1] = 'A'; b[1] <= 'Z'; b[1]++ {
				for b[2] = 'A'; b[2] <= 'Z'; b[2]++ {
					agree(Payment{TransactionID: "tx", Amount: 1, Currency: string(b)})
				}
			}
		}
		for _, tx := range []string{"", "tx-1", " tx", "tx\x7f", "tx é", "é", strings.Repeat("a", 255), strings.Repeat("a", 256),
			strings.Repeat("é", 255), strings.Repeat("é", 256), "~!#"} {
			for _, amount := range []int64{-1, 0, 1, 1 << 62} {
				for _, cur := range []string{"", "EUR", "eur", "Eur", "EU", "EURO", "ÉUR", "ÀB", "E1R", "XTS", "XAU", "XAG", "XXX", "ZZZ"} {
					agree(Payment{TransactionID: tx, Amount: amount, Currency: cur})
				}
			}
		}
	}
}

// FuzzCheckAgreesWithValidator extends TestCheckAgreesWithValidator to
// any input.
func FuzzCheckAgreesWithValidator(f *testing.F) {
	f.Add("tx-1", int64(1), "EUR")
	f.Add("", int64(0), "")
	f.Add("tx 1", int64(-5), "xts")
	f.Add("tx", int64(5), "ǅAB")
	r := NewRules("", []string{"XTS"})
	f.Fuzz(func(t *testing.T, tx string, amount int64, cur string) {
		in := Payment{TransactionID: tx, Amount: amount, Currency: cur}
		if got, want := r.check(in), byValidator(r, in); !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v: check says %v, validator %v", in, got, want)
		}
	})
}

func TestCheckPaymentNamesTheSendersFields(t *testing.T) {
	t.Parallel()
	r := NewRules("", nil)
	names := Names{"transaction_id": "data.object.id", "amount": "data.object.amount_received",
		"currency": "data.object.currency", "event_id": "id"}
	ok := Payment{TransactionID: "pi_1", Amount: 1, Currency: "JPY", EventID: "evt_1"}
	if err := r.CheckPayment(ok, names); err != nil {
		t.Fatalf("CheckPayment(%+v) = %v", ok, err)
	}
	for _, tc := range []struct {
		p     Payment
		field string
	}{
		{Payment{TransactionID: "pi 1", Amount: 1, Currency: "JPY"}, "data.object.id"},
		{Payment{TransactionID: "pi_1", Amount: 0, Currency: "JPY"}, "data.object.amount_received"},
		{Payment{TransactionID: "pi_1", Amount: 1, Currency: "jpy"}, "data.object.currency"},
		{Payment{TransactionID: "pi_1", Amount: 1, Currency: "JPY", EventID: strings.Repeat("e", 256)}, "id"},
	} {
		err := r.CheckPayment(tc.p, names)
		wantError(t, err, 422, tc.field)
		if d := err.(*Error).Detail; !strings.HasPrefix(d, tc.field+" ") {
			t.Errorf("detail %q does not start with the sender's name %q", d, tc.field)
		}
	}
	if err := r.CheckPayment(Payment{TransactionID: "tx", Amount: 1, Currency: "EUR", EventID: strings.Repeat("e", 256)}, nil); err == nil {
		t.Error("an event id of 256 characters is accepted")
	}
}

func TestCheckCurrencies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		def   string
		extra []string
		ok    bool
	}{
		{"", nil, true}, {"EUR", nil, true}, {"XTS", []string{"XTS"}, true},
		{"XTS", nil, false}, {"eur", nil, false}, {"", []string{"xts"}, false}, {"", []string{"ABC"}, false},
	} {
		if err := CheckCurrencies(tc.def, tc.extra); (err == nil) != tc.ok {
			t.Errorf("CheckCurrencies(%q, %q) = %v", tc.def, tc.extra, err)
		}
	}
}

func TestIsIntegerLiteralMatchesTheRegexp(t *testing.T) {
	for _, s := range []string{"", "-", "0", "-0", "00", "01", "10", "-10", "1.0", "1e3", "+1", "12a", "9223372036854775808", " 1"} {
		if got, want := IsIntegerLiteral([]byte(s)), integerLiteral.MatchString(s); got != want {
			t.Errorf("IsIntegerLiteral(%q) = %v, the regexp says %v", s, got, want)
		}
	}
}

// BenchmarkDecodePayment compares the flat payment body's decoding
// (DecodeObject, then check) with the path it replaced, measured in the
// same run: encoding/json's token walk with decode closures, then
// validator's reflection over the tags.
func BenchmarkDecodePayment(b *testing.B) {
	body := []byte(`{"transaction_id":"bench-00000000-0000-0000-0000-000000000000","amount":12345,"currency":"EUR","customer":"cus_00012345","description":"order 12345","metadata":{"source":"bench"}}`)
	r := NewRules("", nil)
	b.Run("in-place", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var in Payment
			var currencySet bool
			if err := DecodeObject(body, paymentFieldsInto(&in, &currencySet)); err != nil {
				b.Fatal(err)
			}
			if err := r.check(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("token-walk+validator", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var in Payment
			var currencySet bool
			if err := tokenWalk(body, closureFieldsInto(&in, &currencySet)); err != nil {
				b.Fatal(err)
			}
			if err := byValidator(r, in); err != nil {
				b.Fatal(err)
			}
		}
	})
}
