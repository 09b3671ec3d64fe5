package handler

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// paymentFields are decodePayment's fields, decoding into in.
func paymentFieldsInto(in *paymentInput, currencySet *bool) []field {
	return []field{
		{name: "transaction_id", required: true, str: &in.TransactionID},
		{name: "amount", required: true, num: &in.Amount},
		{name: "currency", str: &in.Currency, seen: currencySet},
		{name: "id", lenient: true, str: &in.EventID},
	}
}

// closureFieldsInto are the same fields built from the decode closures
// (the form the loans and payouts bodies use).
func closureFieldsInto(in *paymentInput, currencySet *bool) []field {
	var amountSet bool
	return []field{
		{name: "transaction_id", required: true, decode: decodeString("transaction_id", &in.TransactionID)},
		{name: "amount", required: true, decode: decodeAmount("amount", &in.Amount, &amountSet)},
		{name: "currency", decode: present(currencySet, decodeString("currency", &in.Currency))},
		{name: "id", lenient: true, decode: decodeString("id", &in.EventID)},
	}
}

var walkSeeds = []string{
	`{"transaction_id":"tx-1","amount":1000,"currency":"JPY"}`,
	` { "transaction_id" : "tx-1" , "amount" : 1000 , "currency" : "JPY" } `,
	"{\n\t\"transaction_id\":\"tx-1\",\r\n\"amount\":1,\"currency\":\"EUR\"}\n",
	`{"transaction_id":"tx-1","amount":1000,"currency":"JPY","extra":{"a":[1,2,{"b":"}]\"{"}],"c":"x"}}`,
	`{"transaction_id":"tx-1","amount":1000,"currency":"JPY","list":[[],{},"]",-1.5e3,true,false,null]}`,
	`{"transaction_id":" tx ","amount":1,"currency":"EUR"}`,
	`{"transaction_id":"tx-1","amount":1e3,"currency":"JPY"}`,
	`{"transaction_id":"tx-1","amount":1.0,"currency":"JPY"}`,
	`{"transaction_id":"tx-1","amount":-0,"currency":"JPY"}`,
	`{"transaction_id":"tx-1","amount":"1","currency":"JPY"}`,
	`{"transaction_id":"tx-1","amount":1,"amount":2,"currency":"JPY"}`,
	`{"Transaction_ID":"tx-1","amount":1,"currency":"JPY"}`,
	`{"tranſaction_id":"tx-1","amount":1,"currency":"JPY"}`,
	`{"transaction\u005fid":"tx-1","amount":1,"currency":"JPY"}`,
	`{"transaction_id":"tx\"1\\","amount":1,"currency":"JPY"}`,
	`{"transaction_id":"tx\u00e91","amount":1,"currency":"JPY"}`,
	`{"transaction_id":"tx-1","amount":1,"currency":"JPY","id":"evt_1"}`,
	`{"transaction_id":"tx-1","amount":1,"currency":"JPY","id":7,"id":"evt_2","ID":null}`,
	`{"transaction_id":"tx-1","amount":1,"currency":"JPY","id":"evt_1","id":[1]}`,
	`{"transaction_id":null,"amount":1,"currency":"JPY"}`,
	`{"transaction_id":"tx-1","amount":1,"currency":null}`,
	`{"transaction_id":"tx-1","amount":1}`,
	`{"amount":1,"currency":"JPY"}`,
	`{"transaction_id":"tx-1","currency":"JPY"}`,
	`{"transaction_id":1,"amount":1,"currency":"JPY"}`,
	`{"transaction_id":"tx-1","amount":18446744073709551616,"currency":"JPY"}`,
	`{"transaction_id":"tx-1","amount":true,"currency":"JPY"}`,
	`{}`, `[]`, `[1]`, `"x"`, `1`, `null`, `true`, ` {"a":{}} `,
	`{"transaction_id":"tx-1","amount":1,"currency":"JPY"}{}`,
	`{"transaction_id":"tx-1"`, `{`, ``,
}

// FuzzObjectWalksAgree checks that decodeObject's in-place walk of a valid
// JSON body refuses and decodes exactly as encoding/json's token walk does,
// with either form of fields. The seeds run in every go test.
func FuzzObjectWalksAgree(f *testing.F) {
	for _, s := range walkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) || !json.Valid(body) {
			return // walkObject is only asked about valid JSON
		}
		var got, want, closures paymentInput
		var gotSet, wantSet, closuresSet bool
		gotErr := walkObject(body, paymentFieldsInto(&got, &gotSet))
		wantErr := tokenWalk(body, paymentFieldsInto(&want, &wantSet))
		closuresErr := walkObject(body, closureFieldsInto(&closures, &closuresSet))
		if !reflect.DeepEqual(gotErr, wantErr) || !reflect.DeepEqual(closuresErr, wantErr) {
			t.Fatalf("body %s:\n in place: %v\n closures: %v\n tokens:   %v", body, gotErr, closuresErr, wantErr)
		}
		if wantErr == nil && (got != want || gotSet != wantSet || closures != want || closuresSet != wantSet) {
			t.Fatalf("body %s: decoded %+v (%v) and %+v (%v), tokens %+v (%v)", body, got, gotSet, closures, closuresSet, want, wantSet)
		}
	})
}

func TestObjectWalkSlicesNestedValuesWhole(t *testing.T) {
	var raws []string
	body := []byte(` {"a" : {"x":"}]","y":[1,{"z":null}]} , "b":[ "[" ] ,"c": -12.5e-3 ,"d":"q\"}"} `)
	fields := []field{
		{name: "a", decode: func(raw json.RawMessage) error { raws = append(raws, string(raw)); return nil }},
		{name: "b", decode: func(raw json.RawMessage) error { raws = append(raws, string(raw)); return nil }},
		{name: "c", decode: func(raw json.RawMessage) error { raws = append(raws, string(raw)); return nil }},
		{name: "d", decode: func(raw json.RawMessage) error { raws = append(raws, string(raw)); return nil }},
	}
	if err := decodeObject(body, fields); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"x":"}]","y":[1,{"z":null}]}`, `[ "[" ]`, `-12.5e-3`, `"q\"}"`}
	if strings.Join(raws, "|") != strings.Join(want, "|") {
		t.Fatalf("values %q, want %q", raws, want)
	}
}

// TestCheckAgreesWithValidator checks that the direct checks of a payment
// refuse exactly what the validate tags refuse, with the same problem:
// every three-letter upper-case code, with and without admitted
// non-tender codes, and the edges of the other fields.
func TestCheckAgreesWithValidator(t *testing.T) {
	for _, extra := range [][]string{nil, {"XTS", "XAU"}} {
		r := newInputRules("", extra)
		agree := func(in paymentInput) {
			t.Helper()
			want := error(nil)
			if err := r.v.Struct(in); err != nil {
				want = validationProblem(err)
			}
			if got := r.check(in); !reflect.DeepEqual(got, want) {
				t.Fatalf("extra %v, %+v: check says %v, validator %v", extra, in, got, want)
			}
		}
		b := []byte("AAA")
		for b[0] = 'A'; b[0] <= 'Z'; b[0]++ {
			for b[1] = 'A'; b[1] <= 'Z'; b[1]++ {
				for b[2] = 'A'; b[2] <= 'Z'; b[2]++ {
					agree(paymentInput{TransactionID: "tx", Amount: 1, Currency: string(b)})
				}
			}
		}
		for _, tx := range []string{"", "tx-1", " tx", "tx\x7f", "tx é", "é", strings.Repeat("a", 255), strings.Repeat("a", 256),
			strings.Repeat("é", 255), strings.Repeat("é", 256), "~!#"} {
			for _, amount := range []int64{-1, 0, 1, 1 << 62} {
				for _, cur := range []string{"", "EUR", "eur", "Eur", "EU", "EURO", "ÉUR", "ÀB", "E1R", "XTS", "XAU", "XAG", "XXX", "ZZZ"} {
					agree(paymentInput{TransactionID: tx, Amount: amount, Currency: cur})
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
	r := newInputRules("", []string{"XTS"})
	f.Fuzz(func(t *testing.T, tx string, amount int64, cur string) {
		in := paymentInput{TransactionID: tx, Amount: amount, Currency: cur}
		want := error(nil)
		if err := r.v.Struct(in); err != nil {
			want = validationProblem(err)
		}
		if got := r.check(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v: check says %v, validator %v", in, got, want)
		}
	})
}

func TestIsIntegerLiteralMatchesTheRegexp(t *testing.T) {
	for _, s := range []string{"", "-", "0", "-0", "00", "01", "10", "-10", "1.0", "1e3", "+1", "12a", "9223372036854775808", " 1"} {
		if got, want := isIntegerLiteral([]byte(s)), integerLiteral.MatchString(s); got != want {
			t.Errorf("isIntegerLiteral(%q) = %v, the regexp says %v", s, got, want)
		}
	}
}

// BenchmarkDecodePayment compares decodePayment with the path it replaced,
// measured in the same run: encoding/json's token walk with decode
// closures, then validator's reflection over the tags.
func BenchmarkDecodePayment(b *testing.B) {
	body := []byte(`{"transaction_id":"bench-00000000-0000-0000-0000-000000000000","amount":12345,"currency":"EUR","customer":"cus_00012345","description":"order 12345","metadata":{"source":"bench"}}`)
	r := newInputRules("", nil)
	b.Run("in-place", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.decodePayment(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("token-walk+validator", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var in paymentInput
			var currencySet bool
			if err := tokenWalk(body, closureFieldsInto(&in, &currencySet)); err != nil {
				b.Fatal(err)
			}
			if err := r.v.Struct(in); err != nil {
				b.Fatal(err)
			}
		}
	})
}
