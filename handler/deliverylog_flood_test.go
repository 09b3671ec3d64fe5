package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

const floodAdyenKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"

// adyenLogged is a replica with one Adyen source "adyen" (live false)
// keeping its deliveries in the delivery log with store tweaks, and the
// source's secret.
func adyenLogged(t *testing.T, tweak func(*store.Config), cfg handler.Config) (*paylocktest.Replica, signature.Secret) {
	t.Helper()
	v, secrets := verifier(t, signature.SchemeAdyen, floodAdyenKey)
	cfg.Sources = []handler.Source{{Name: "adyen", Provider: "adyen", Verifier: v,
		Settings: provider.Settings{"live": []byte("false")}}}
	r := startReplica(t, paylocktest.Options{Config: cfg, Store: tweak, Configure: func(c *handler.Config, st *store.Store) {
		c.Deliveries = st.Deliveries()
	}})
	return r, secrets[0]
}

// signedAdyenItem is one NotificationRequestItem of code for psp, signed
// with secret, as a forward or a topic carries it: with its
// additionalData (hmacSignature, card and shopper data).
func signedAdyenItem(t *testing.T, secret signature.Secret, psp, code string) json.RawMessage {
	t.Helper()
	body := []byte(`{"live":"false","notificationItems":[{"NotificationRequestItem":{` +
		`"additionalData":{"cardSummary":"1111","shopperEmail":"ann@example.com","cardHolderName":"Ann Smith"},` +
		`"amount":{"currency":"EUR","value":1000},"eventCode":"` + code + `","eventDate":"2026-11-30T12:00:00+01:00",` +
		`"merchantAccountCode":"PaylockECOM","merchantReference":"order-1","originalReference":"","paymentMethod":"visa",` +
		`"pspReference":"` + psp + `","reason":"","success":"true"}}]}`)
	signed, err := signature.SignAdyenNotification(secret, body)
	if err != nil {
		t.Fatal(err)
	}
	var n struct {
		Items []struct {
			Item json.RawMessage `json:"NotificationRequestItem"`
		} `json:"notificationItems"`
	}
	if err := json.Unmarshal(signed, &n); err != nil || len(n.Items) != 1 {
		t.Fatalf("the signed notification %s: %v", signed, err)
	}
	return n.Items[0].Item
}

// wrapped is variant i of a body carrying item, about size bytes: an
// unsigned padding member, "live":"true", a repeated key, the item twice
// or beside another signed item, in turn.
func wrapped(item, other json.RawMessage, i, size int) []byte {
	pad := strings.Repeat(strconv.Itoa(i%10), max(size-2*len(item)-200, 1))
	w := func(it json.RawMessage) string { return `{"NotificationRequestItem":` + string(it) + `}` }
	switch i % 4 {
	case 0:
		return []byte(`{"live":"false","padding` + strconv.Itoa(i) + `":"` + pad + `","notificationItems":[` + w(item) + `]}`)
	case 1:
		return []byte(`{"live":"true","notificationItems":[` + w(item) + `],"x":"` + pad + `"}`)
	case 2:
		return []byte(`{"live":"false","live":"false","pad":"` + pad + `","notificationItems":[` + w(item) + `,` + w(item) + `]}`)
	}
	return []byte(`{"live":"false","notificationItems":[` + w(other) + `,` + w(item) + `],"pad":"` + pad + strconv.Itoa(i) + `"}`)
}

// TestAnAdyenItemWrappedAgainAndAgainIsOneRowAndAGenuineDeliveryIsStillKept
// is issue #30's wrap attack through the HTTP handler: variants of one
// signed item (and of one other captured item beside it), each a new body,
// verify and are refused or ignored; the log keeps one row per item and
// grows by less than 10 MB, and a genuine signed delivery sent afterwards
// is kept. PAYLOCK_WRAP_FULL=1 runs the 500 variants of 1 MiB;
// the default runs 40 of 64 KiB.
func TestAnAdyenItemWrappedAgainAndAgainIsOneRowAndAGenuineDeliveryIsStillKept(t *testing.T) {
	t.Parallel()
	variants, size := 40, 64<<10
	if os.Getenv("PAYLOCK_WRAP_FULL") != "" {
		variants, size = 500, 1<<20-4<<10
	}
	r, secret := adyenLogged(t, func(c *store.Config) { c.DeliveryLogCap = 5 }, handler.Config{MaxBody: 1 << 20})
	ctx := context.Background()
	sizeOf := func() int64 {
		var n int64
		if err := r.Store.Pool().QueryRow(ctx, `SELECT pg_total_relation_size('delivery_log')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := sizeOf()
	item := signedAdyenItem(t, secret, "PSP0001", "AUTHORISATION")
	other := signedAdyenItem(t, secret, "PSP0002", "REPORT_AVAILABLE")
	for i := range variants {
		a := postRaw(t, r.URL+"/webhooks/adyen", nil, wrapped(item, other, i, size))
		if a.status == http.StatusUnauthorized || a.status >= 500 {
			t.Fatalf("variant %d: %d %s; want it verified and answered", i, a.status, a.raw)
		}
	}
	rows := testkit.Count(t, r.Store.Pool(), `SELECT count(*) FROM delivery_log WHERE source = 'adyen'`)
	// The padding variant records the AUTHORISATION, the others are
	// refused (live "true", a repeated key) or a duplicate beside an
	// ignored item: one row, the item refused.
	if rows != 1 {
		t.Fatalf("%d rows after %d wrapped variants of one signed item; want one", rows, variants)
	}
	if grown := sizeOf() - before; grown >= 10<<20 {
		t.Fatalf("the delivery log grew by %d bytes; want less than 10 MB", grown)
	}
	l, err := r.Store.Deliveries().Deliveries(ctx, store.DeliveryFilter{Source: "adyen"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range l {
		kinds = append(kinds, d.EventID+" "+string(d.Outcome))
		kept, err := r.Store.Deliveries().Delivery(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, secretish := range []string{"hmacSignature", "additionalData", "ann@example.com", "Ann Smith", "padding", `"pad"`} {
			if bytes.Contains(kept.Body, []byte(secretish)) {
				t.Errorf("row %d keeps %q: %s", d.ID, secretish, kept.Body)
			}
		}
	}

	genuine, err := signature.SignAdyenNotification(secret, []byte(`{"live":"false","notificationItems":[{"NotificationRequestItem":{`+
		`"additionalData":{},"amount":{"currency":"EUR","value":0},"eventCode":"REPORT_AVAILABLE","merchantAccountCode":"PaylockECOM",`+
		`"merchantReference":"","originalReference":"","pspReference":"PSP_GENUINE","success":"true"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if a := postRaw(t, r.URL+"/webhooks/adyen", nil, genuine); a.status != http.StatusOK || a.raw != "[accepted]" {
		t.Fatalf("the genuine delivery: %d %s", a.status, a.raw)
	}
	if n := testkit.Count(t, r.Store.Pool(), `SELECT count(*) FROM delivery_log WHERE source = 'adyen' AND position('PSP_GENUINE' in convert_from(body, 'UTF8')) > 0`); n != 1 {
		t.Fatalf("the genuine delivery after the flood is kept %d times; want once", n)
	}
	fmt.Fprintf(os.Stderr, "wrap attack: %d variants of %d bytes: %d rows (%v), %d bytes of growth\n", variants, size, rows, kinds, sizeOf()-before)
}

func TestTheDeliveryLogRedactsCardAndPersonalDataBeforeKeeping(t *testing.T) {
	t.Parallel()
	r, secret := stripeLogged(t, "", `["payment_intent.succeeded"]`, handler.Config{
		DeliveryRedact: map[string][]string{"": {"/data/object/metadata/ssn"}, "stripe": {"/data/object/description"}, "other": {"/id"}},
	}, nil)
	body := []byte(`{"id":"evt_pii","object":"event","type":"charge.succeeded","data":{"object":{"id":"ch_pii","object":"charge",` +
		`"amount":100,"currency":"jpy","billing_details":{"email":"ann@example.com","name":"Ann Smith"},"receipt_email":"ann@example.com",` +
		`"description":"for Ann","metadata":{"ssn":"123-45-6789","order":"o-1"},"status":"succeeded"}}}`)
	req, err := http.NewRequest(http.MethodPost, r.URL+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range signature.Sign(signature.SchemeStripe, secret, "", time.Now(), body) {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Basic dXNlcjpwYXNz")
	req.Header.Set("Webhook-Signature", "v1,c2VjcmV0")
	req.Header.Set("Content-Type", "application/json")
	if a := do(t, req); a.status != http.StatusOK {
		t.Fatalf("a charge.succeeded: %d %s", a.status, a.raw)
	}
	ctx := context.Background()
	l, err := r.Store.Deliveries().Deliveries(ctx, store.DeliveryFilter{Source: "stripe"})
	if err != nil || len(l) != 1 {
		t.Fatalf("kept %d, %v; want the ignored charge", len(l), err)
	}
	d, err := r.Store.Deliveries().Delivery(ctx, l[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"ann@example.com", "Ann Smith", "123-45-6789", "for Ann"} {
		if bytes.Contains(d.Body, []byte(gone)) {
			t.Errorf("the kept body holds %q: %s", gone, d.Body)
		}
	}
	var kept struct {
		ID   string
		Data struct {
			Object struct {
				BillingDetails any `json:"billing_details"`
				ReceiptEmail   any `json:"receipt_email"`
				Amount         int
				Metadata       map[string]string
			}
		}
	}
	if err := json.Unmarshal(d.Body, &kept); err != nil {
		t.Fatal(err)
	}
	o := kept.Data.Object
	if kept.ID != "evt_pii" || o.Amount != 100 || o.BillingDetails != provider.Redacted || o.ReceiptEmail != provider.Redacted ||
		o.Metadata["ssn"] != provider.Redacted || o.Metadata["order"] != "o-1" {
		t.Fatalf("kept %s; want the provider's defaults and the operator's pointers redacted, the rest as sent", d.Body)
	}
	for _, h := range []string{"Authorization", "Webhook-Signature", "Stripe-Signature"} {
		if _, ok := d.Headers[h]; ok {
			t.Errorf("the kept headers hold %s: %v", h, d.Headers)
		}
	}
}
