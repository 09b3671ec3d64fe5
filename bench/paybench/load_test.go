package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

func TestLoaderDeliversEveryTransactionCopiesTimesSigned(t *testing.T) {
	_, secret, err := newSecret()
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(signature.SchemeStandard, []signature.Secret{secret}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		seen  = map[string]int{}
		bad   int
		conns = map[string]bool{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p struct {
			TransactionID string `json:"transaction_id"`
		}
		_, verr := v.Verify(r.Header, body)
		jerr := json.Unmarshal(body, &p)
		mu.Lock()
		conns[r.RemoteAddr] = true
		if verr != nil || jerr != nil || r.Header.Get("Content-Type") != "application/json" {
			bad++
		}
		seen[p.TransactionID]++
		mu.Unlock()
		time.Sleep(time.Millisecond)
		w.Write([]byte(`{"result":"processed"}`))
	}))
	defer srv.Close()

	l := newLoader(loadConfig{URL: srv.URL, Senders: 6, Copies: 3, Prefix: "t-", Secret: &secret})
	defer l.close()
	p := l.run(context.Background(), "m", 200*time.Millisecond)

	if p.Distinct == 0 || p.Sent != 3*p.Distinct || p.Acked != p.Sent || p.Statuses[200] != p.Sent {
		t.Fatalf("phase = %+v: want every one of Distinct transactions sent 3 times and acknowledged", p)
	}
	if bad != 0 {
		t.Fatalf("%d deliveries badly signed or formed", bad)
	}
	if len(seen) != p.Distinct {
		t.Fatalf("server saw %d transactions, loader dispatched %d", len(seen), p.Distinct)
	}
	for tx, n := range seen {
		if n != 3 {
			t.Fatalf("transaction %s delivered %d times, want 3", tx, n)
		}
	}
	if len(conns) > 6 {
		t.Fatalf("%d connections for 6 senders: keep-alive is not reused", len(conns))
	}
	if p.Latency.N != p.Sent || p.Latency.P50 < time.Millisecond {
		t.Fatalf("latency = %+v, want one sample per delivery of at least the server's 1ms", p.Latency)
	}
}
