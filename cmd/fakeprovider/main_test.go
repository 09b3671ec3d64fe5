package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFakeproviderServesUntilStopped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"--settle", "paid", "--log-format", "json"}, &stdout, io.Discard, ln)
	}()
	base := "http://" + ln.Addr().String()

	post := func() string {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/payouts",
			strings.NewReader(`{"amount":100,"currency":"JPY","reference":"L-1-1"}`))
		req.Header.Set("Idempotency-Key", "disburse-L-1-1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("%d %s", res.StatusCode, b)
		}
		return string(b)
	}
	if first, again := post(), post(); first != again {
		t.Fatalf("replay differs: %s vs %s", first, again)
	}
	res, err := http.Get(base + "/debug/stats")
	if err != nil {
		t.Fatal(err)
	}
	var stats struct {
		Created map[string]int `json:"created"`
		Replays int            `json:"replays"`
	}
	json.NewDecoder(res.Body).Decode(&stats)
	res.Body.Close()
	if stats.Created["L-1-1"] != 1 || stats.Replays != 1 {
		t.Fatalf("stats %+v", stats)
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop")
	}
	if !strings.Contains(stdout.String(), "listening on http://") {
		t.Fatalf("stdout %q", stdout.String())
	}
}

func TestFakeproviderRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--settle", "maybe"}, {"--secret", "whsec_!!"}, {"--nope"}} {
		if code := run(context.Background(), args, io.Discard, io.Discard, nil); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
