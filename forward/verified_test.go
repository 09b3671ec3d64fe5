package forward_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	_ "github.com/paylock/paylock/provider/adyen" // registers "adyen"
	"github.com/paylock/paylock/store"
)

// TestAForwardedAdyenItemCarriesNoSignature forwards a recorded Adyen item
// to the team's receiver through the real adapter's SignatureBearer, as
// serve wires it: the message's payload is the item without its
// additionalData.hmacSignature (the other additionalData members kept,
// named unauthenticated), and neither the body nor any header carries the
// signature.
func TestAForwardedAdyenItemCarriesNoSignature(t *testing.T) {
	t.Parallel()
	p, ok := provider.Lookup("adyen")
	if !ok {
		t.Fatal("no adyen provider")
	}
	a, err := p.New(provider.Config{Source: "adyen", Rules: payload.NewRules("EUR", nil)})
	if err != nil {
		t.Fatal(err)
	}
	sb, ok := a.(provider.SignatureBearer)
	ps, ok2 := a.(provider.PartlySigned)
	if !ok || !ok2 {
		t.Fatal("the adyen adapter is not a SignatureBearer and PartlySigned")
	}
	const sig = "c2lnbmF0dXJlLW9mLWFkeWVuLWhtYWM="
	item := `{"pspReference":"PSP-1","merchantReference":"order-1","eventCode":"AUTHORISATION","success":"true",` +
		`"merchantAccountCode":"Acme","amount":{"value":1999,"currency":"EUR"},` +
		`"additionalData":{"hmacSignature":"` + sig + `","cardSummary":"1111"}}`
	rc := receiver(t)
	b := setupWith(t, 5, rc.URL+"/paylock", nil, func(c *forward.Config) {
		c.Verified = func(source string, p []byte) []byte { return sb.WithoutSignature(p) }
		c.Unsigned = func(source string, p []byte) []string { return ps.Unsigned(p) }
	})
	if _, err := b.store.Payments().RecordPaymentForwarded(context.Background(), store.Payment{Source: "adyen", TransactionID: "PSP-1",
		Amount: 1999, Currency: "EUR", EventID: "PSP-1:AUTHORISATION", Payload: []byte(item)}, forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	got := rc.WaitAttempts(t, 1)
	testkit.WaitFor(t, 15*time.Second, "the delivered outcome", func() bool {
		o := b.outcomes.list()
		return len(o) > 0 && o[len(o)-1] == forward.OutcomeDelivered
	})
	for _, at := range got {
		if strings.Contains(string(at.Body), sig) || strings.Contains(string(at.Body), "hmacSignature") {
			t.Errorf("the forward carries the signature: %s", at.Body)
		}
		for k, vs := range at.Header {
			if strings.Contains(strings.Join(vs, ","), sig) {
				t.Errorf("header %s carries the signature", k)
			}
		}
	}
	var msg struct {
		Data struct {
			Payload         map[string]json.RawMessage `json:"payload"`
			Unauthenticated []string                   `json:"unauthenticated"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got[0].Body, &msg); err != nil {
		t.Fatal(err)
	}
	pl := msg.Data.Payload
	if string(pl["pspReference"]) != `"PSP-1"` || string(pl["additionalData"]) != `{"cardSummary":"1111"}` ||
		!strings.Contains(strings.Join(msg.Data.Unauthenticated, ","), "additionalData") {
		t.Errorf("forwarded payload %s, unauthenticated %v; want the item less its signature, additionalData named", got[0].Body, msg.Data.Unauthenticated)
	}
}
