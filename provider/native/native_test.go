package native

import (
	"errors"
	"strings"
	"testing"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// FuzzDecodePayment checks that no body makes the decoder panic, that every
// refusal is a 400 or 422 error, and that every accepted body satisfies the
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
	rules := payload.NewRules("", nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := decodePayment(rules, body)
		if err != nil {
			var pe *payload.Error
			if !errors.As(err, &pe) || !errors.Is(err, payload.ErrMalformed) && !errors.Is(err, payload.ErrInvalid) {
				t.Fatalf("refusal is not a 400/422 error: %#v", err)
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
		if len(in.Currency) != 3 || payload.NonTender(in.Currency) {
			t.Fatalf("accepted currency %q", in.Currency)
		}
		if err := payload.Storable(body); err != nil {
			t.Fatalf("accepted a body jsonb refuses: %v", err)
		}
	})
}

func TestNewRefusesSettings(t *testing.T) {
	t.Parallel()
	if _, err := (Provider{}).New(provider.Config{Rules: payload.NewRules("", nil), Settings: provider.Settings{"events": []byte(`[]`)}}); err == nil {
		t.Fatal("a setting is accepted")
	}
}
