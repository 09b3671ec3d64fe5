package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	_ "github.com/paylock/paylock/provider/adyen" // registers "adyen"
	"github.com/paylock/paylock/store"
)

// TestConsolePaymentPageShowsNoSignature: a stored Adyen item is shown
// through the adapter's SignatureBearer, as serve wires it: its other
// members are there, its additionalData.hmacSignature is not.
func TestConsolePaymentPageShowsNoSignature(t *testing.T) {
	t.Parallel()
	_, st := paylocktest.MigratedSchema(t)
	const sig = "c2lnbmF0dXJlLW9mLWFkeWVuLWhtYWM="
	item := `{"pspReference":"PSP-9","eventCode":"AUTHORISATION","success":"true","amount":{"value":1999,"currency":"EUR"},` +
		`"additionalData":{"hmacSignature":"` + sig + `","cardSummary":"4242"}}`
	if _, err := st.Payments().RecordPayment(context.Background(), store.Payment{Source: "adyen", TransactionID: "PSP-9", Amount: 1999,
		Currency: "EUR", EventID: "PSP-9:AUTHORISATION", Payload: []byte(item)}); err != nil {
		t.Fatal(err)
	}
	p, _ := provider.Lookup("adyen")
	a, err := p.New(provider.Config{Source: "adyen", Rules: payload.NewRules("EUR", nil)})
	if err != nil {
		t.Fatal(err)
	}
	sb := a.(provider.SignatureBearer)
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(), Console: consoleStore(st),
		Verified: func(_ string, p []byte) []byte { return sb.WithoutSignature(p) }}))
	t.Cleanup(srv.Close)
	page := adminDo(t, srv, http.MethodGet, "/admin/payments/adyen/PSP-9", nil, page, nil)
	if page.status != http.StatusOK || strings.Contains(page.body, sig) || strings.Contains(page.body, "hmacSignature") ||
		!strings.Contains(page.body, "4242") {
		t.Fatalf("%d: the page shows the signature or lost the item: %s", page.status, page.body)
	}
}
