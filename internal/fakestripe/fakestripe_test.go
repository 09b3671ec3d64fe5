package fakestripe_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakestripe"
)

func TestFixturesAreTheStripeProvidersSamples(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"payment_intent.succeeded.json", "charge.succeeded.json"} {
		ours, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := os.ReadFile("../../provider/stripe/samples/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("testdata/%s differs from provider/stripe/samples/%s: copy it again", name, name)
		}
	}
}

type page struct {
	Object  string `json:"object"`
	HasMore bool   `json:"has_more"`
	URL     string `json:"url"`
	Data    []struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Created int64  `json:"created"`
		Data    struct {
			Object map[string]any `json:"object"`
		} `json:"data"`
	} `json:"data"`
}

func get(t *testing.T, url, key string) (int, page) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var p page
	if res.StatusCode == http.StatusOK {
		if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
	}
	return res.StatusCode, p
}

func TestEventsArePagedFilteredAndNewestFirst(t *testing.T) {
	t.Parallel()
	api := fakestripe.New("sk_test_ok")
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	t0 := time.Unix(1764500000, 0)
	for i := range 5 {
		api.Add(fakestripe.PaymentIntentSucceeded(fakestripe.Payment{
			ID: fmt.Sprintf("pi_%d", i), Amount: int64(1000 + i), Currency: "jpy", Created: t0.Add(time.Duration(i) * time.Minute)}))
	}
	api.Add(fakestripe.ChargeSucceeded(fakestripe.Payment{ID: "ch_1", Amount: 1500, Currency: "eur", Created: t0.Add(time.Hour)}))

	status, p := get(t, srv.URL+"/v1/events?type=payment_intent.succeeded&limit=2", "sk_test_ok")
	if status != 200 || p.Object != "list" || !p.HasMore || p.URL != "/v1/events" || len(p.Data) != 2 || p.Data[0].ID != "evt_pi_4" || p.Data[1].ID != "evt_pi_3" {
		t.Fatalf("first page: %d %+v", status, p)
	}
	if amt := p.Data[0].Data.Object["amount_received"]; amt != float64(1004) {
		t.Errorf("amount_received = %v, want 1004", amt)
	}
	var ids []string
	after := ""
	for {
		_, p := get(t, srv.URL+"/v1/events?type=payment_intent.succeeded&limit=2&created[gte]="+fmt.Sprint(t0.Add(time.Minute).Unix())+after, "sk_test_ok")
		for _, e := range p.Data {
			ids = append(ids, e.ID)
		}
		if !p.HasMore {
			break
		}
		after = "&starting_after=" + p.Data[len(p.Data)-1].ID
	}
	if fmt.Sprint(ids) != "[evt_pi_4 evt_pi_3 evt_pi_2 evt_pi_1]" {
		t.Errorf("paged from created[gte]: %v", ids)
	}
	_, p = get(t, srv.URL+"/v1/events?types[]=charge.succeeded", "sk_test_ok")
	if len(p.Data) != 1 || p.Data[0].ID != "evt_ch_1" || p.Data[0].Type != "charge.succeeded" || p.HasMore {
		t.Errorf("types[]=charge.succeeded: %+v", p)
	}
	if status, _ := get(t, srv.URL+"/v1/events?limit=101", "sk_test_ok"); status != http.StatusBadRequest {
		t.Errorf("limit=101: %d, want 400", status)
	}
}

func TestWrongKeyIsRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(fakestripe.New("sk_test_ok"))
	t.Cleanup(srv.Close)
	for _, key := range []string{"", "sk_test_wrong"} {
		if status, _ := get(t, srv.URL+"/v1/events", key); status != http.StatusUnauthorized {
			t.Errorf("key %q: %d, want 401", key, status)
		}
	}
}
