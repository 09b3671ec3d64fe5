package compat

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paylock/paylock/internal/fakereceiver"
	"github.com/paylock/paylock/signature"
)

// libraryVerdicts wraps the fake receiver (which verifies with paylock's
// signature package) in a handler that first verifies the same request with
// the Standard Webhooks library, and records the library's verdict per
// webhook-id: the two must agree on every delivery.
type libraryVerdicts struct {
	wh   *standardwebhooks.Webhook
	next http.Handler

	mu       sync.Mutex
	accepted map[string]bool
}

func (l *libraryVerdicts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		ok := l.wh.Verify(body, r.Header) == nil
		l.mu.Lock()
		l.accepted[r.Header.Get("webhook-id")] = ok
		l.mu.Unlock()
	}
	l.next.ServeHTTP(w, r)
}

func (l *libraryVerdicts) verdict(id string) (accepted, seen bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	accepted, seen = l.accepted[id]
	return accepted, seen
}

func startReceiver(t *testing.T) (*fakereceiver.Receiver, *libraryVerdicts, string) {
	t.Helper()
	v, _ := standardVerifier(t)
	rcv, err := fakereceiver.New(fakereceiver.Config{Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	lib := &libraryVerdicts{wh: newWebhook(t, standardCur), next: rcv, accepted: map[string]bool{}}
	srv := httptest.NewServer(lib)
	t.Cleanup(srv.Close)
	return rcv, lib, srv.URL
}

func forwardedEvent(tx string) []byte {
	return []byte(`{"type":"payment.recorded","data":{"source":"payments","transaction_id":"` + tx +
		`","amount":1200,"currency":"JPY","event_id":"evt-` + tx + `","received_at":"2026-11-30T22:00:00Z","payload":{"note":"caf\u00e9 \u2603"}}}`)
}

func deliver(t *testing.T, url string, h http.Header, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/paylock", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// The fake receiver of the chaos suite and the Standard Webhooks library
// accept the same deliveries, whether paylock or the library signed them,
// and refuse the same forgeries.
func TestFakeReceiverAndStandardWebhooksAgree(t *testing.T) {
	t.Parallel()
	rcv, lib, url := startReceiver(t)
	_, secrets := standardVerifier(t)
	other, err := signature.ParseSecrets(signature.SchemeStandard, "whsec_bm90IGNvbmZpZ3VyZWQgYW55d2hlcmU=")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	librarySigned := func(id string, body []byte) http.Header {
		sig, err := newWebhook(t, standardCur).Sign(id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		h.Set("webhook-signature", sig)
		return h
	}
	body := forwardedEvent("tx-1")
	for _, tc := range []struct {
		name string
		id   string
		h    http.Header
		body []byte
		want bool
	}{
		{"signed by paylock", "msg_paylock", signature.Sign(signature.SchemeStandard, secrets[1], "msg_paylock", now, body), body, true},
		{"signed by the library", "msg_library", librarySigned("msg_library", forwardedEvent("tx-3")), forwardedEvent("tx-3"), true},
		{"another secret", "msg_other", signature.Sign(signature.SchemeStandard, other[0], "msg_other", now, body), body, false},
		{"body tampered", "msg_tampered", signature.Sign(signature.SchemeStandard, secrets[1], "msg_tampered", now, body), forwardedEvent("tx-9"), false},
		{"stale", "msg_stale", signature.Sign(signature.SchemeStandard, secrets[1], "msg_stale", now.Add(-time.Hour), body), body, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := deliver(t, url, tc.h, tc.body)
			accepted, seen := lib.verdict(tc.id)
			if !seen || accepted != tc.want {
				t.Errorf("library verdict %v (seen %v), want %v", accepted, seen, tc.want)
			}
			if got := status == http.StatusNoContent; got != tc.want || (!tc.want && status != http.StatusUnauthorized) {
				t.Errorf("fake receiver answered %d, want accepted=%v", status, tc.want)
			}
			ev := rcv.Stats().Events[tc.id]
			if tc.want && (ev.Deliveries != 1 || ev.SignatureFailures != 0) || !tc.want && (ev.Deliveries != 0 || ev.SignatureFailures != 1) {
				t.Errorf("receiver event %+v", ev)
			}
		})
	}
}
