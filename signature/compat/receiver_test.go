package compat

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// startReceiver serves the fake receiver with cfg (verifying with the
// Standard secrets) behind a libraryLog.
func startReceiver(t *testing.T, cfg testkit.ReceiverConfig) (*testkit.Receiver, *libraryLog) {
	t.Helper()
	cfg.Verifier, _ = standardVerifier(t)
	lib := &libraryLog{wh: newWebhook(t, standardCur)}
	cfg.Front = func(next http.Handler) http.Handler { lib.next = next; return lib }
	return testkit.StartReceiver(t, cfg), lib
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
	rcv, lib := startReceiver(t, testkit.ReceiverConfig{})
	url := rcv.URL
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
			seen := lib.log()
			if last := seen[len(seen)-1]; last.id != tc.id || (last.err == nil) != tc.want {
				t.Errorf("library: %q: %v, want accepted=%v", last.id, last.err, tc.want)
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

// The exact requests paylock's forward worker sends (a recorded payment,
// read back from Postgres, through the fake receiver's first-attempt
// failures) are accepted by the Standard Webhooks library on every attempt,
// under one webhook-id: the payment's, the same each time.
func TestForwardWorkerDeliveriesAreAcceptedByStandardWebhooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, st := paylocktest.MigratedSchema(t)
	p, err := st.Payments().RecordPayment(ctx, store.Payment{Source: "payments", TransactionID: "tx-fwd-1", Amount: 1999,
		Currency: "EUR", EventID: "evt-1", Payload: []byte(`{"transaction_id":"tx-fwd-1","note":"caf\u00e9 ☃ <&>"}`)})
	if err != nil {
		t.Fatal(err)
	}

	_, secrets := standardVerifier(t)
	rcv, lib := startReceiver(t, testkit.ReceiverConfig{FailFirst: 2})
	w, err := forward.New(forward.Config{Secret: secrets[1], Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler),
		Destinations: forward.Destinations{forward.DefaultDestination: rcv.URL + "/paylock/events"}}, st.Payments())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })

	id := store.PaymentForwardID(p.Source, p.TransactionID)
	args := store.ForwardArgs{ID: id, Type: store.ForwardPaymentRecorded, Destination: forward.DefaultDestination,
		Source: p.Source, TransactionID: p.TransactionID}
	for attempt := 1; attempt <= 3; attempt++ {
		job := &river.Job[store.ForwardArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: attempt, MaxAttempts: 25}, Args: args}
		err := w.Work(ctx, job)
		if attempt < 3 && err == nil || attempt == 3 && err != nil {
			t.Fatalf("attempt %d: Work = %v", attempt, err)
		}
	}
	seen := lib.log()
	if len(seen) != 3 {
		t.Fatalf("library saw %d requests, want 3", len(seen))
	}
	for i, r := range seen {
		if r.id != id || r.err != nil {
			t.Errorf("attempt %d: webhook-id %q, library Verify: %v", i+1, r.id, r.err)
		}
	}
	s := rcv.Stats()
	ev := s.Events[id]
	if s.SignatureFailures != 0 || s.WebhookIDs != 1 || ev.Attempts != 3 || ev.Deliveries != 1 ||
		ev.Source != "payments" || ev.TransactionID != "tx-fwd-1" {
		t.Errorf("receiver stats %+v, event %+v", s, ev)
	}
}

// libraryLog verifies every POST with the Standard Webhooks library before
// passing it on to the fake receiver (which verifies with paylock's
// signature package), and keeps the library's verdicts in order: the two
// must agree on every delivery.
type libraryLog struct {
	wh   *standardwebhooks.Webhook
	next http.Handler

	mu   sync.Mutex
	seen []libraryVerdict
}

type libraryVerdict struct {
	id  string
	err error
}

func (l *libraryLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	l.mu.Lock()
	l.seen = append(l.seen, libraryVerdict{r.Header.Get("webhook-id"), l.wh.Verify(body, r.Header)})
	l.mu.Unlock()
	l.next.ServeHTTP(w, r)
}

func (l *libraryLog) log() []libraryVerdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]libraryVerdict(nil), l.seen...)
}
