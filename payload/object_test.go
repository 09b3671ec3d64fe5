package payload

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// paymentFieldsInto are the fields of paylock's flat payment body (the
// native provider's), decoding into in.
func paymentFieldsInto(in *Payment, currencySet *bool) []Field {
	return []Field{
		{Name: "transaction_id", Required: true, Str: &in.TransactionID},
		{Name: "amount", Required: true, Num: &in.Amount},
		{Name: "currency", Str: &in.Currency, Seen: currencySet},
		{Name: "id", Lenient: true, Str: &in.EventID},
	}
}

// closureFieldsInto are the same fields built from the decode closures
// (the form the loans and payouts bodies use).
func closureFieldsInto(in *Payment, currencySet *bool) []Field {
	var amountSet bool
	return []Field{
		{Name: "transaction_id", Required: true, Decode: DecodeString("transaction_id", &in.TransactionID)},
		{Name: "amount", Required: true, Decode: DecodeAmount("amount", &in.Amount, &amountSet)},
		{Name: "currency", Decode: Present(currencySet, DecodeString("currency", &in.Currency))},
		{Name: "id", Lenient: true, Decode: DecodeString("id", &in.EventID)},
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
	`1e11111`, // a number too large for a float64 is not an object either (found by CI's fuzzing)
	`{"transaction_id":"tx-1","amount":1,"currency":"JPY"}{}`,
	`{"transaction_id":"tx-1"`, `{`, ``,
}

// FuzzObjectWalksAgree checks that DecodeObject's in-place walk of a valid
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
		var got, want, closures Payment
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
	fields := []Field{
		{Name: "a", Decode: func(raw json.RawMessage) error { raws = append(raws, string(raw)); return nil }},
		{Name: "b", Decode: func(raw json.RawMessage) error { raws = append(raws, string(raw)); return nil }},
		{Name: "c", Decode: func(raw json.RawMessage) error { raws = append(raws, string(raw)); return nil }},
		{Name: "d", Decode: func(raw json.RawMessage) error { raws = append(raws, string(raw)); return nil }},
	}
	if err := DecodeObject(body, fields); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"x":"}]","y":[1,{"z":null}]}`, `[ "[" ]`, `-12.5e-3`, `"q\"}"`}
	if strings.Join(raws, "|") != strings.Join(want, "|") {
		t.Fatalf("values %q, want %q", raws, want)
	}
}
