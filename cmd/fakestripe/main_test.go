package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
)

func TestFakestripeListsTheGivenPayments(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- run(ctx, []string{"-key", "sk_test_demo", "-payments", "pi_a:2000:JPY,pi_b:1500:jpy"}, &out, &errb, ln)
	}()
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/v1/events?type=payment_intent.succeeded", nil)
	req.Header.Set("Authorization", "Bearer sk_test_demo")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Data []struct{ ID string } `json:"data"`
	}
	err = json.NewDecoder(res.Body).Decode(&page)
	res.Body.Close()
	if err != nil || len(page.Data) != 2 || page.Data[0].ID != "evt_pi_b" || page.Data[1].ID != "evt_pi_a" {
		t.Errorf("listed %+v, %v; want evt_pi_b then evt_pi_a", page, err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d: %s", code, errb.String())
	}
}

func TestFakestripeRefusesBadPayments(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"pi_a", "pi_a:0:jpy", "pi_a:x:jpy", ":1:jpy", "pi_a:1:"} {
		var errb bytes.Buffer
		if code := run(context.Background(), []string{"-payments", v}, &bytes.Buffer{}, &errb, nil); code != 2 {
			t.Errorf("-payments %q: exit %d, want 2", v, code)
		}
	}
}
