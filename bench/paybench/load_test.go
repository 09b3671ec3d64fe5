package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

func TestLoaderDeliversEveryTransactionCopiesTimesSigned(t *testing.T) {
	for _, copies := range []int{1, 3} {
		t.Run("copies="+strconv.Itoa(copies), func(t *testing.T) { testLoaderDelivers(t, copies) })
	}
}

func testLoaderDelivers(t *testing.T, copies int) {
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
		if verr != nil || jerr != nil || r.Header.Get("Content-Type") != "application/json" || r.URL.RequestURI() != "/webhooks/payments?k=v" {
			bad++
		}
		if strings.HasPrefix(p.TransactionID, "t-m-") { // the measured phase's
			seen[p.TransactionID]++
		}
		mu.Unlock()
		time.Sleep(time.Millisecond)
		w.Write([]byte(`{"result":"processed"}`))
	}))
	defer srv.Close()

	l, err := newLoader(loadConfig{URL: srv.URL + "/webhooks/payments?k=v", Senders: 6, Copies: copies, Prefix: "t-", Secret: &secret})
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	l.run(context.Background(), "w", 50*time.Millisecond) // the warm-up's connections carry over
	p := l.run(context.Background(), "m", 200*time.Millisecond)

	if p.Distinct == 0 || p.Sent != copies*p.Distinct || p.Acked != p.Sent || p.Statuses[200] != p.Sent {
		t.Fatalf("phase = %+v: want every one of Distinct transactions sent %d times and acknowledged", p, copies)
	}
	if bad != 0 {
		t.Fatalf("%d deliveries badly signed or formed", bad)
	}
	if len(seen) != p.Distinct {
		t.Fatalf("server saw %d transactions, loader dispatched %d", len(seen), p.Distinct)
	}
	for tx, n := range seen {
		if n != copies {
			t.Fatalf("transaction %s delivered %d times, want %d", tx, n, copies)
		}
	}
	if len(conns) > 6 {
		t.Fatalf("%d connections for 6 senders over two phases: keep-alive is not reused", len(conns))
	}
	if p.Latency.N != p.Sent || p.Latency.P50 < time.Millisecond {
		t.Fatalf("latency = %+v, want one sample per delivery of at least the server's 1ms", p.Latency)
	}
}

// TestLoaderRedialsAConnectionTheServerClosed: an answer with Connection:
// close, or a server gone, costs the sender its connection, not its next
// deliveries.
func TestLoaderRedialsAConnectionTheServerClosed(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		n++
		closing := n%3 == 0
		mu.Unlock()
		if closing {
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	l, err := newLoader(loadConfig{URL: srv.URL, Senders: 2, Copies: 1, Prefix: "r-"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	p := l.run(context.Background(), "m", 100*time.Millisecond)
	if p.Sent < 10 || p.Acked != p.Sent || p.Statuses[http.StatusAccepted] != p.Sent {
		t.Fatalf("phase = %+v: want every delivery acknowledged with 202 across the closed connections", p)
	}

	srv.CloseClientConnections()
	srv.Close()
	p = l.run(context.Background(), "x", 20*time.Millisecond)
	if p.Sent == 0 || p.Acked != 0 || p.Statuses[0] != p.Sent {
		t.Fatalf("phase = %+v: want transport errors (status 0) once the server is gone", p)
	}
}

func TestLoaderTakesPlainHTTPURLsOnly(t *testing.T) {
	for _, u := range []string{"https://127.0.0.1:8080/webhooks", "127.0.0.1:8080", "http:///webhooks", "http://[::1"} {
		if _, err := newLoader(loadConfig{URL: u, Senders: 1}); err == nil {
			t.Errorf("%q: no error", u)
		}
	}
	l, err := newLoader(loadConfig{URL: "http://localhost/webhooks/payments", Senders: 1})
	if err != nil {
		t.Fatal(err)
	}
	if l.addr != "localhost:80" || l.host != "localhost" || l.path != "/webhooks/payments" {
		t.Errorf("addr %q, host %q, path %q", l.addr, l.host, l.path)
	}
}
