package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/paylock/paylock/store"
)

func TestOrderRegistrationRefusesBadBodiesNamingTheFieldAndWritesNothing(t *testing.T) {
	f := startAPI(t)
	h := map[string]string{"Authorization": "Bearer " + adminTestToken, "Content-Type": "application/json"}
	for _, tc := range []struct {
		body, field string
	}{
		{`{"amount":100,"currency":"EUR"}`, "order_id"},
		{`{"order_id":"ord-bad","currency":"EUR"}`, "amount"},
		{`{"order_id":"ord-bad","amount":100}`, "currency"},
		{`{"order_id":"ord-bad","amount":"100","currency":"EUR"}`, "amount"},
		{`{"order_id":"ord-bad","amount":1.5,"currency":"EUR"}`, "amount"},
		{`{"order_id":"ord-bad","amount":0,"currency":"EUR"}`, "amount"},
		{`{"order_id":"ord-bad","amount":100,"currency":"EURO"}`, "currency"},
		{`{"order_id":"ord-bad","amount":100,"currency":"EUR","expires_at":"tomorrow"}`, "expires_at"},
		{`{"order_id":"ord-bad","amount":100,"currency":"EUR","note":"x"}`, "note"},
		{`{"order_id":"","amount":100,"currency":"EUR"}`, "order_id"},
		{`{"order_id":"` + strings.Repeat("x", store.MaxOrderIDLength+1) + `","amount":100,"currency":"EUR"}`, "order_id"},
		{`[1]`, ""},
	} {
		a := adminDo(t, f.srv, http.MethodPost, "/admin/api/v1/orders", strings.NewReader(tc.body), h, nil)
		var p struct {
			Field string `json:"field"`
		}
		_ = json.Unmarshal([]byte(a.body), &p)
		if a.status != http.StatusBadRequest || p.Field != tc.field ||
			a.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s; want 400 naming %q", tc.body, a.status, a.body, tc.field)
		}
	}
	if _, err := f.st.Orders().GetOrder(context.Background(), "ord-bad"); err == nil {
		t.Fatal("a refused registration wrote the order")
	}
	ok := `{"order_id":"ord-ok","amount":100,"currency":"EUR","expires_at":null}`
	if a := adminDo(t, f.srv, http.MethodPost, "/admin/api/v1/orders", strings.NewReader(ok), h, nil); a.status != http.StatusCreated {
		t.Fatalf("a good body: %d %s; want 201", a.status, a.body)
	}
	if a := f.get(t, "/admin/api/v1/orders/ord-ok"); a.status != http.StatusOK || !strings.Contains(a.body, `"payments":[]`) {
		t.Fatalf("GET ord-ok: %d %s; want the order with no payments", a.status, a.body)
	}
}

func TestConsoleShowsOrdersAndTheirPayments(t *testing.T) {
	f := startAPI(t)
	html := []string{"Accept", "text/html"}
	list := f.get(t, "/admin/orders", html...)
	if list.status != http.StatusOK || !strings.Contains(list.body, `href="/admin/orders/ord-1001"`) ||
		!strings.Contains(list.body, `state-paid`) || !strings.Contains(list.body, `aria-current="page">Orders`) {
		t.Fatalf("GET /admin/orders: %d %.2000s", list.status, list.body)
	}
	one := f.get(t, "/admin/orders/ord-1001", html...)
	if one.status != http.StatusOK || !strings.Contains(one.body, `href="/admin/payments/payments/pay_ord_1"`) ||
		!strings.Contains(one.body, "<code>ord-1001</code>") {
		t.Fatalf("GET /admin/orders/ord-1001: %d %.3000s", one.status, one.body)
	}
	if bad := f.get(t, "/admin/orders?status=settled", html...); bad.status != http.StatusBadRequest ||
		!strings.Contains(bad.body, "status must be one of") {
		t.Fatalf("a bad status: %d %.2000s", bad.status, bad.body)
	}
	if none := f.get(t, "/admin/orders/ord-nope", html...); none.status != http.StatusNotFound {
		t.Fatalf("an unknown order: %d", none.status)
	}
}
