package paypal

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/storetest"
	"github.com/paylock/paylock/lock"
)

// TestTheWebhookRefusesAPayPalDeliveryItCannotAuthenticate: through the
// real pipeline (Postgres, Redis), a delivery naming a cert URL off the
// allowlist, over http, redirected off it, an oversized or foreign
// certificate, an old transmission time or another webhook id is answered
// 401 and writes nothing, takes no lock, and nothing reaches the host off
// the allowlist; the authentic one is recorded.
func TestTheWebhookRefusesAPayPalDeliveryItCannotAuthenticate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, st := storetest.MigratedSchema(t)
	rdb, prefix := testkit.Redis(t), testkit.Key(t, "")+":"
	h, err := handler.New(handler.Config{LockPrefix: prefix, Logger: testkit.Logger(),
		Sources: []handler.Source{{Name: "paypal", Provider: "paypal", Verifier: verifier(t, sampleWebhookID)}}}, lock.New(rdb), st.Payments())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(hdr http.Header, body []byte) int {
		return testkit.PostJSON(t, ctx, srv.URL+"/webhooks/paypal", hdr, body)
	}
	written := func() (rows, keys int) {
		if err := st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM payments) + (SELECT count(*) FROM payment_events)`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		k, err := rdb.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return rows, len(k)
	}
	body := sample("payment_capture_completed.json")
	now := time.Now()
	const offPath = "/v1/notifications/certs/CERT-pipeline-off"
	for name, hdr := range map[string]http.Header{
		"cert URL off the allowlist": signed(t, sampleWebhookID, now, body, pki.offlist.URL+offPath),
		"cert URL over http":         signed(t, sampleWebhookID, now, body, "http"+pki.srv.URL[len("https"):]+"/v1/notifications/certs/CERT-sample"),
		"redirected off the list":    signed(t, sampleWebhookID, now, body, pki.srv.URL+"/redirect-off"),
		"an oversized certificate":   signed(t, sampleWebhookID, now, body, pki.srv.URL+"/big"),
		"another CA's certificate":   signed(t, sampleWebhookID, now, body, pki.srv.URL+"/other"),
		"an hour-old transmission":   signed(t, sampleWebhookID, now.Add(-time.Hour), body, ""),
		"another webhook id":         signed(t, "9XX597110X687430LKGECATB", now, body, ""),
	} {
		if code := post(hdr, body); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, code)
		}
		if rows, keys := written(); rows != 0 || keys != 0 {
			t.Fatalf("%s: %d rows and %d lock keys written, want none", name, rows, keys)
		}
	}
	if n := hits(offPath); n != 0 {
		t.Fatalf("%d requests reached the host off the allowlist, want none", n)
	}
	if code := post(signed(t, sampleWebhookID, now, body, ""), body); code != http.StatusOK {
		t.Fatalf("authentic: %d, want 200", code)
	}
	if rows, _ := written(); rows == 0 {
		t.Fatal("the authentic delivery recorded nothing")
	}
}
