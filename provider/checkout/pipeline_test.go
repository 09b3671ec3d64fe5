package checkout

import (
	"bytes"
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

// TestTheWebhookRefusesACheckoutDeliveryItCannotAuthenticate: through the
// real pipeline (Postgres, Redis), a delivery with a forged body, another
// secret key, no Cko-Signature, or a missing or wrong Authorization is
// answered 401 and writes nothing, takes no lock; the authentic one is
// recorded.
func TestTheWebhookRefusesACheckoutDeliveryItCannotAuthenticate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, st := storetest.MigratedSchema(t)
	rdb, prefix := testkit.Redis(t), testkit.Key(t, "")+":"
	v, _ := verifier(t, keyOld+"|"+authOld)
	h, err := handler.New(handler.Config{LockPrefix: prefix, Logger: testkit.Logger(),
		Sources: []handler.Source{{Name: "checkout", Provider: "checkout", Verifier: v}}}, lock.New(rdb), st.Payments())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(hdr http.Header, body []byte) int {
		return testkit.PostJSON(t, ctx, srv.URL+"/webhooks/checkout", hdr, body)
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
	body := sample("payment_approved.json")
	good := signed(t, keyOld+"|"+authOld, body)
	forged := bytes.Replace(body, []byte(`"amount": 6540`), []byte(`"amount": 6541`), 1)
	for name, tc := range map[string]struct {
		h    http.Header
		body []byte
	}{
		"forged body":           {good, forged},
		"another secret key":    {signed(t, keyNew+"|"+authOld, body), body},
		"no Cko-Signature":      {http.Header{HeaderAuthorization: {authOld}}, body},
		"no Authorization":      {signed(t, keyOld, body), body},
		"a wrong Authorization": {signed(t, keyOld+"|"+authNew, body), body},
	} {
		if code := post(tc.h, tc.body); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, code)
		}
		if rows, keys := written(); rows != 0 || keys != 0 {
			t.Fatalf("%s: %d rows and %d lock keys written, want none", name, rows, keys)
		}
	}
	if code := post(good, body); code != http.StatusOK {
		t.Fatalf("authentic: %d, want 200", code)
	}
	if rows, _ := written(); rows == 0 {
		t.Fatal("the authentic delivery recorded nothing")
	}
}
