package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

func TestConsoleShowsAmountsInMajorUnitsWithTheMinorUnitsOnHover(t *testing.T) {
	t.Parallel()
	_, st := paylocktest.MigratedSchema(t)
	ctx := context.Background()
	want := map[string]string{ // transaction id -> its amount as the console shows it
		"tx_usd": `<span class="money" title="5000 minor units">50.00 USD</span>`,
		"tx_jpy": `<span class="money" title="5000 minor units">5,000 JPY</span>`,
		"tx_bhd": `<span class="money" title="1234 minor units">1.234 BHD</span>`,
	}
	for _, p := range []store.Payment{
		{Source: "shop", TransactionID: "tx_usd", Amount: 5000, Currency: "USD", EventID: "evt_usd", Payload: []byte(`{}`)},
		{Source: "shop", TransactionID: "tx_jpy", Amount: 5000, Currency: "JPY", EventID: "evt_jpy", Payload: []byte(`{}`)},
		{Source: "shop", TransactionID: "tx_bhd", Amount: 1234, Currency: "BHD", EventID: "evt_bhd", Payload: []byte(`{}`)},
	} {
		if _, err := st.Payments().RecordPaymentForwarded(ctx, p, forward.DefaultDestination); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(), Console: consoleStore(st)}))
	t.Cleanup(srv.Close)

	page := map[string]string{"Authorization": "Bearer " + adminTestToken, "Accept": "text/html"}
	list := adminDo(t, srv, http.MethodGet, "/admin/payments?source=shop", nil, page, nil)
	if list.status != http.StatusOK {
		t.Fatalf("GET /admin/payments: %d", list.status)
	}
	for tx, amount := range want {
		if !strings.Contains(list.body, amount) {
			t.Errorf("the payments list lacks %s for %s", amount, tx)
		}
		a := adminDo(t, srv, http.MethodGet, "/admin/payments/shop/"+tx, nil, page, nil)
		if a.status != http.StatusOK || !strings.Contains(a.body, "<dt>Amount</dt><dd>"+amount+"</dd>") {
			t.Errorf("GET the page of %s: %d, want its amount %s", tx, a.status, amount)
		}
		if strings.Contains(a.body, "(minor units)") {
			t.Errorf("the page of %s still shows raw minor units", tx)
		}
	}
}

func TestConsoleShowsDisbursementAmountsInMajorUnits(t *testing.T) {
	t.Parallel()
	f := startAPI(t) // tranche L-1/1: 500 JPY
	want := `<span class="money" title="500 minor units">500 JPY</span>`
	for _, path := range []string{"/admin/disbursements", "/admin/disbursements/L-1/1"} {
		a := f.get(t, path, "Accept", "text/html")
		if a.status != http.StatusOK || !strings.Contains(a.body, want) || strings.Contains(a.body, "(minor units)") {
			t.Errorf("GET %s: %d, want the amount as %s", path, a.status, want)
		}
	}
}
