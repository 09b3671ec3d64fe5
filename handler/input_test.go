package handler_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
)

func TestBadInputGetsAClear4xxAndWritesNothing(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{Config: handler.Config{MaxBody: 1024}})
	const ok = `"transaction_id":"tx-ok","amount":100,"currency":"JPY"`
	cases := []struct {
		name, body, contentType string
		status                  int
		field                   string
	}{
		{"not JSON", `{`, "", 400, ""},
		{"empty body", ``, "", 400, ""},
		{"array", `[]`, "", 400, ""},
		{"string body", `"x"`, "", 400, ""},
		{"transaction_id a number", `{"transaction_id":123,"amount":1,"currency":"JPY"}`, "", 400, "transaction_id"},
		{"transaction_id null", `{"transaction_id":null,"amount":1,"currency":"JPY"}`, "", 400, "transaction_id"},
		{"transaction_id missing", `{"amount":1,"currency":"JPY"}`, "", 422, "transaction_id"},
		{"transaction_id empty", `{"transaction_id":"","amount":1,"currency":"JPY"}`, "", 422, "transaction_id"},
		{"transaction_id blank", `{"transaction_id":"   ","amount":1,"currency":"JPY"}`, "", 422, "transaction_id"},
		{"transaction_id with a space", `{"transaction_id":"tx 1","amount":1,"currency":"JPY"}`, "", 422, "transaction_id"},
		{"transaction_id with a control character", `{"transaction_id":"tx\u0001","amount":1,"currency":"JPY"}`, "", 422, "transaction_id"},
		{"transaction_id not ASCII", `{"transaction_id":"tx-ü","amount":1,"currency":"JPY"}`, "", 422, "transaction_id"},
		{"transaction_id too long", `{"transaction_id":"` + strings.Repeat("a", 256) + `","amount":1,"currency":"JPY"}`, "", 422, "transaction_id"},
		{"amount a string", `{"transaction_id":"tx-1","amount":"100","currency":"JPY"}`, "", 400, "amount"},
		{"amount a fraction", `{"transaction_id":"tx-1","amount":100.5,"currency":"JPY"}`, "", 422, "amount"},
		{"amount an exponent", `{"transaction_id":"tx-1","amount":1e3,"currency":"JPY"}`, "", 422, "amount"},
		{"amount zero", `{"transaction_id":"tx-1","amount":0,"currency":"JPY"}`, "", 422, "amount"},
		{"amount negative", `{"transaction_id":"tx-1","amount":-5,"currency":"JPY"}`, "", 422, "amount"},
		{"amount 2^64", `{"transaction_id":"tx-1","amount":18446744073709551616,"currency":"JPY"}`, "", 422, "amount"},
		{"amount 2^63", `{"transaction_id":"tx-1","amount":9223372036854775808,"currency":"JPY"}`, "", 422, "amount"},
		{"amount null", `{"transaction_id":"tx-1","amount":null,"currency":"JPY"}`, "", 400, "amount"},
		{"amount missing", `{"transaction_id":"tx-1","currency":"JPY"}`, "", 422, "amount"},
		{"amount a boolean", `{"transaction_id":"tx-1","amount":true,"currency":"JPY"}`, "", 400, "amount"},
		{"currency lower case", `{"transaction_id":"tx-1","amount":1,"currency":"jpy"}`, "", 422, "currency"},
		{"currency unknown", `{"transaction_id":"tx-1","amount":1,"currency":"ABC"}`, "", 422, "currency"},
		{"currency testing code", `{"transaction_id":"tx-1","amount":1,"currency":"XTS"}`, "", 422, "currency"},
		{"currency no currency", `{"transaction_id":"tx-1","amount":1,"currency":"XXX"}`, "", 422, "currency"},
		{"currency gold", `{"transaction_id":"tx-1","amount":1,"currency":"XAU"}`, "", 422, "currency"},
		{"currency too long", `{"transaction_id":"tx-1","amount":1,"currency":"JPYY"}`, "", 422, "currency"},
		{"currency a number", `{"transaction_id":"tx-1","amount":1,"currency":392}`, "", 400, "currency"},
		{"currency missing, no default", `{"transaction_id":"tx-1","amount":1}`, "", 422, "currency"},
		{"repeated key", `{"transaction_id":"tx-1","amount":1,"amount":2,"currency":"JPY"}`, "", 400, "amount"},
		{"case-variant key", `{"transaction_id":"tx-1","Amount":1,"currency":"JPY"}`, "", 400, "amount"},
		{"case-variant duplicate", `{"transaction_id":"tx-1","amount":1,"AMOUNT":2,"currency":"JPY"}`, "", 400, "amount"},
		{"trailing object", `{` + ok + `} {}`, "", 400, ""},
		{"trailing garbage", `{` + ok + `}x`, "", 400, ""},
		{"NUL escape in an unknown field", `{` + ok + `,"note":"a\u0000b"}`, "", 422, ""},
		{"unpaired surrogate", `{` + ok + `,"note":"\ud800"}`, "", 422, ""},
		{"invalid UTF-8", "{" + ok + ",\"note\":\"\xff\"}", "", 400, ""},
		{"huge exponent", `{` + ok + `,"n":1e131071}`, "", 422, ""},
		{"huge negative exponent", `{` + ok + `,"n":[1.5E-20000]}`, "", 422, ""},
		{"exponent with leading zeros", `{` + ok + `,"n":1e0000000000020000}`, "", 422, ""},
		{"text/plain", `{` + ok + `}`, "text/plain", 415, ""},
		{"no content type", `{` + ok + `}`, "-", 415, ""},
		{"form content type", `{` + ok + `}`, "application/x-www-form-urlencoded", 415, ""},
		{"too large", `{` + ok + `,"pad":"` + strings.Repeat("x", 2000) + `"}`, "", 413, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct := c.contentType
			switch ct {
			case "":
				ct = "application/json"
			case "-":
				ct = ""
			}
			a := post(t, r.URL, "/webhooks/payments", ct, []byte(c.body))
			wantProblem(t, a, c.status)
			if c.field != "" && a.str("field") != c.field {
				t.Errorf("field = %q, want %q (%s)", a.str("field"), c.field, a.raw)
			}
		})
	}
	if n := testkit.PaymentRows(t, r.Store.Pool(), ""); n != 0 {
		t.Fatalf("bad input wrote %d rows", n)
	}
	keys, err := r.Redis.Keys(context.Background(), r.Config.LockPrefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Fatalf("bad input left lock keys %v", keys)
	}
}

func TestWrongMethodIs405AndUnknownPathIs404AsProblems(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{})
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, r.URL+"/webhooks/payments", nil)
		a := do(t, req)
		wantProblem(t, a, http.StatusMethodNotAllowed)
		if allow := a.header.Get("Allow"); allow != http.MethodPost {
			t.Errorf("%s: Allow %q, want POST", m, allow)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, r.URL+"/webhooks/nothing", nil)
	wantProblem(t, do(t, req), http.StatusNotFound)
}

func TestAcceptedInputVariants(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{Config: handler.Config{DefaultCurrency: "EUR", Currencies: []string{"XTS"}}})
	cases := []struct {
		name, body, contentType, tx, currency string
	}{
		{"charset in content type", `{"transaction_id":"tx-a","amount":1,"currency":"JPY"}`, "application/json; charset=utf-8", "tx-a", "JPY"},
		{"whitespace around the id is trimmed", `{"transaction_id":"  tx-b\t","amount":1,"currency":"JPY"}`, "", "tx-b", "JPY"},
		{"unknown fields kept", `{"transaction_id":"tx-c","amount":1,"currency":"JPY","metadata":{"order":"o-1"}}`, "", "tx-c", "JPY"},
		{"default currency", `{"transaction_id":"tx-d","amount":1}`, "", "tx-d", "EUR"},
		{"configured non-tender code", `{"transaction_id":"tx-e","amount":1,"currency":"XTS"}`, "", "tx-e", "XTS"},
		{"largest amount", `{"transaction_id":"tx-f","amount":9223372036854775807,"currency":"JPY"}`, "", "tx-f", "JPY"},
		{"escaped backslash before u0000 is text", `{"transaction_id":"tx-g","amount":1,"currency":"JPY","note":"\\u0000"}`, "", "tx-g", "JPY"},
		{"surrogate pair", `{"transaction_id":"tx-h","amount":1,"currency":"JPY","note":"\ud83d\ude00"}`, "", "tx-h", "JPY"},
		{"modest exponents and e in strings", `{"transaction_id":"tx-i","amount":1,"currency":"JPY","n":[1e300,-2.5E-10,1e0001],"s":"1e99999","b":true}`, "", "tx-i", "JPY"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct := c.contentType
			if ct == "" {
				ct = "application/json"
			}
			a := post(t, r.URL, "/webhooks/payments", ct, []byte(c.body))
			if a.status != 200 || a.str("result") != "processed" || a.str("transaction_id") != c.tx {
				t.Fatalf("got %d %s", a.status, a.raw)
			}
			if ct := a.header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			p, err := r.Store.Payments().Payment(context.Background(), "payments", c.tx)
			if err != nil {
				t.Fatal(err)
			}
			if p.Currency != c.currency {
				t.Fatalf("currency %q, want %q", p.Currency, c.currency)
			}
		})
	}
}

func TestReplayAnswersDuplicateAndAMismatchIs422(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{})
	if a := pay(t, r.URL, "tx-r", 500, "JPY"); a.status != 200 || a.str("result") != "processed" {
		t.Fatalf("first: %d %s", a.status, a.raw)
	}
	if a := pay(t, r.URL, "tx-r", 500, "JPY"); a.status != 200 || a.str("result") != "duplicate" {
		t.Fatalf("replay: %d %s", a.status, a.raw)
	}
	for _, c := range []struct {
		amount   int64
		currency string
	}{{501, "JPY"}, {500, "USD"}} {
		a := pay(t, r.URL, "tx-r", c.amount, c.currency)
		wantProblem(t, a, http.StatusUnprocessableEntity)
		if !strings.HasSuffix(a.str("type"), "#mismatch") {
			t.Fatalf("type = %q, want a mismatch problem", a.str("type"))
		}
	}
	p, err := r.Store.Payments().Payment(context.Background(), "payments", "tx-r")
	if err != nil || p.Amount != 500 || p.Currency != "JPY" {
		t.Fatalf("stored row changed: %+v, %v", p, err)
	}
}

func TestIndexNamesTheService(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{Config: handler.Config{Version: "v1.2.3"}})
	req, _ := http.NewRequest(http.MethodGet, r.URL+"/", nil)
	a := do(t, req)
	if a.status != 200 || a.str("name") != "paylock" || a.str("version") != "v1.2.3" {
		t.Fatalf("GET / = %d %s", a.status, a.raw)
	}
}

func TestEmptyCurrencyIsNeverDefaulted(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{Config: handler.Config{DefaultCurrency: "EUR"}})
	a := post(t, r.URL, "/webhooks/payments", "application/json", []byte(`{"transaction_id":"tx-empty-cur","amount":1,"currency":""}`))
	wantProblem(t, a, http.StatusUnprocessableEntity)
	if a.str("field") != "currency" {
		t.Fatalf("field %q", a.str("field"))
	}
}

func TestBodyIDIsKeptForAuditButNeverRefused(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{})
	for tx, extra := range map[string]string{
		"tx-id-string": `"id":"evt_1"`,
		"tx-id-number": `"id":42`,
		"tx-id-null":   `"id":null`,
		"tx-id-case":   `"ID":"evt_2"`,
		"tx-id-twice":  `"id":"evt_a","id":"evt_b"`,
	} {
		a := post(t, r.URL, "/webhooks/payments", "application/json",
			[]byte(`{"transaction_id":"`+tx+`","amount":1,"currency":"JPY",`+extra+`}`))
		if a.status != 200 {
			t.Errorf("%s: %d %s", extra, a.status, a.raw)
		}
	}
	for tx, want := range map[string]string{"tx-id-string": "evt_1", "tx-id-number": "", "tx-id-case": "", "tx-id-twice": "evt_b"} {
		p, err := r.Store.Payments().Payment(context.Background(), "payments", tx)
		if err != nil || p.EventID != want {
			t.Errorf("%s: event_id %q (%v), want %q", tx, p.EventID, err, want)
		}
	}
}
