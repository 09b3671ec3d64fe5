package handler

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/problem"
)

// FuzzDecodePayment checks that no body makes the decoder panic, that every
// refusal is a 400 or 422 problem, and that every accepted body satisfies the
// rules the database relies on. The seeds run in every go test.
func FuzzDecodePayment(f *testing.F) {
	for _, s := range []string{
		`{"transaction_id":"tx-1","amount":1000,"currency":"JPY"}`,
		`{"transaction_id":"tx-1","amount":1000,"currency":"JPY","extra":{"a":[1,2,3]}}`,
		`{"transaction_id":" tx ","amount":1,"currency":"EUR"}`,
		`{"transaction_id":"tx-1","amount":1e3,"currency":"JPY"}`,
		`{"transaction_id":"tx-1","amount":"1","currency":"JPY"}`,
		`{"transaction_id":"tx-1","amount":1,"amount":2,"currency":"JPY"}`,
		`{"Transaction_ID":"tx-1","amount":1,"currency":"JPY"}`,
		`{"transaction_id":null,"amount":1,"currency":"JPY"}`,
		`{"transaction_id":"tx-1","amount":1,"currency":"JPY"}{}`,
		`{"transaction_id":"tx-1","amount":1,"currency":"JPY","n":"\u0000"}`,
		`{"transaction_id":"tx-1","amount":1,"currency":"JPY","n":"\ud800\u0041"}`,
		`{"transaction_id":"tx-1","amount":18446744073709551616,"currency":"JPY"}`,
		`{"transaction_id":"tx-1","amount":1,"currency":"JPY","n":1e131071}`,
		`{"transaction_id":"tx-1","amount":1,"currency":"JPY","s":"1e99999","n":2E+5}`,
		`[`, `{`, ``, `null`, `{"a":`, "{\"transaction_id\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	rules := newInputRules("", nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := rules.decodePayment(body)
		if err != nil {
			var pe *payload.Error
			if p := problem.From(err); !errors.As(err, &pe) || (p.Status != http.StatusBadRequest && p.Status != http.StatusUnprocessableEntity) {
				t.Fatalf("refusal is not a 400/422 problem: %#v", err)
			}
			return
		}
		if in.Amount <= 0 {
			t.Fatalf("accepted amount %d", in.Amount)
		}
		if n := len(in.TransactionID); n == 0 || n > 255 {
			t.Fatalf("accepted transaction_id of %d bytes", n)
		}
		if strings.ContainsFunc(in.TransactionID, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Fatalf("accepted transaction_id %q", in.TransactionID)
		}
		if len(in.Currency) != 3 || nonTender[in.Currency] {
			t.Fatalf("accepted currency %q", in.Currency)
		}
		if msg := jsonbUnsafe(body); msg != "" {
			t.Fatalf("accepted a body jsonb refuses: %s", msg)
		}
		if hugeExponent(body) {
			t.Fatalf("accepted a number with a huge exponent")
		}
	})
}
