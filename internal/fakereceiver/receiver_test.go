package fakereceiver_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakereceiver"
	"github.com/paylock/paylock/signature"
)

const (
	secretText = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	otherText  = "whsec_bm90IGNvbmZpZ3VyZWQgYW55d2hlcmU="
)

func secret(t *testing.T, text string) signature.Secret {
	t.Helper()
	s, err := signature.ParseSecrets(signature.SchemeStandard, text)
	if err != nil {
		t.Fatal(err)
	}
	return s[0]
}

func start(t *testing.T, failFirst int, dropRate float64) (*fakereceiver.Receiver, string) {
	t.Helper()
	v, err := signature.NewVerifier(signature.SchemeStandard, []signature.Secret{secret(t, secretText)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := fakereceiver.New(fakereceiver.Config{Verifier: v, FailFirst: failFirst, DropRate: dropRate})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func event(source, tx string) []byte {
	return fmt.Appendf(nil, `{"type":"payment.recorded","data":{"source":%q,"transaction_id":%q,"amount":1200,"currency":"JPY","event_id":%q,"received_at":"2026-11-30T22:00:00Z","payload":{"amount":1200}}}`, source, tx, "evt-"+tx)
}

func signed(t *testing.T, id string, body []byte) http.Header {
	t.Helper()
	return signature.Sign(signature.SchemeStandard, secret(t, secretText), id, time.Now(), body)
}

// post sends one delivery on a fresh connection; status 0 means no answer.
func post(t *testing.T, url string, h http.Header, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/hooks/paylock", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := hc.Do(req)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

func TestFirstAttemptsFailThenEveryAttemptIsProcessed(t *testing.T) {
	t.Parallel()
	r, url := start(t, 2, 0)
	body := event("payments", "tx-1")
	var got []int
	for range 4 {
		got = append(got, post(t, url, signed(t, "msg_1", body), body))
	}
	if want := []int{500, 500, 204, 204}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("answers %v, want %v", got, want)
	}
	s := r.Stats()
	ev := s.Events["msg_1"]
	if ev.Attempts != 4 || ev.Deliveries != 2 || ev.SignatureFailures != 0 || ev.FirstDeliveredAt.IsZero() ||
		ev.Source != "payments" || ev.TransactionID != "tx-1" {
		t.Errorf("event %+v", ev)
	}
	if s.Requests != 4 || s.FailedFirst != 2 || s.Delivered != 2 || s.WebhookIDs != 1 || s.Payments != 1 ||
		s.DuplicatePayments != 0 || s.Conflicts != 0 || s.Dropped != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestFailFirstCountsPerWebhookID(t *testing.T) {
	t.Parallel()
	r, url := start(t, 1, 0)
	a, b := event("payments", "tx-a"), event("payments", "tx-b")
	for _, step := range []struct {
		id   string
		body []byte
		want int
	}{{"msg_a", a, 500}, {"msg_b", b, 500}, {"msg_a", a, 204}, {"msg_b", b, 204}} {
		if got := post(t, url, signed(t, step.id, step.body), step.body); got != step.want {
			t.Fatalf("%s: %d, want %d", step.id, got, step.want)
		}
	}
	if s := r.Stats(); s.WebhookIDs != 2 || s.Payments != 2 || s.FailedFirst != 2 {
		t.Errorf("stats %+v", s)
	}
}

func TestDeliveriesThatDoNotVerifyAreRefusedAndCounted(t *testing.T) {
	t.Parallel()
	body := event("payments", "tx-1")
	now := time.Now()
	set := func(h http.Header, k, v string) http.Header { h.Set(k, v); return h }
	for _, tc := range []struct {
		name string
		h    http.Header
		body []byte
		id   string // the webhook-id the failure is counted under; "" none
	}{
		{"another secret", signature.Sign(signature.SchemeStandard, secret(t, otherText), "msg_x", now, body), body, "msg_x"},
		{"body tampered", signed(t, "msg_x", body), event("payments", "tx-2"), "msg_x"},
		{"id tampered", set(signed(t, "msg_x", body), signature.HeaderWebhookID, "msg_y"), body, "msg_y"},
		{"too old", signature.Sign(signature.SchemeStandard, secret(t, secretText), "msg_x", now.Add(-time.Hour), body), body, "msg_x"},
		{"unsigned", http.Header{}, body, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, url := start(t, 0, 0)
			if got := post(t, url, tc.h, tc.body); got != http.StatusUnauthorized {
				t.Fatalf("answer %d, want 401", got)
			}
			s := r.Stats()
			if s.SignatureFailures != 1 || s.Delivered != 0 || s.WebhookIDs != 0 || s.Payments != 0 {
				t.Errorf("stats %+v", s)
			}
			if tc.id == "" {
				if len(s.Events) != 0 {
					t.Errorf("events %+v, want none", s.Events)
				}
				return
			}
			if ev := s.Events[tc.id]; ev.Attempts != 1 || ev.SignatureFailures != 1 || ev.Deliveries != 0 || ev.TransactionID != "" {
				t.Errorf("event %+v", ev)
			}
		})
	}
}

func TestDroppedAnswerIsProcessedBeforeTheConnectionCloses(t *testing.T) {
	t.Parallel()
	r, url := start(t, 0, 1)
	body := event("stripe", "pi_1")
	for range 2 {
		if got := post(t, url, signed(t, "msg_1", body), body); got != 0 {
			t.Fatalf("answer %d, want none", got)
		}
	}
	s := r.Stats()
	if s.Delivered != 2 || s.Dropped != 2 || s.WebhookIDs != 1 || s.Payments != 1 {
		t.Errorf("stats %+v", s)
	}
	if ev := s.Events["msg_1"]; ev.Deliveries != 2 || ev.FirstDeliveredAt.IsZero() {
		t.Errorf("event %+v", ev)
	}
}

func TestPaymentUnderTwoWebhookIDsIsADuplicate(t *testing.T) {
	t.Parallel()
	r, url := start(t, 0, 0)
	body := event("payments", "tx-1")
	for _, id := range []string{"msg_1", "msg_2", "msg_3"} {
		if got := post(t, url, signed(t, id, body), body); got != http.StatusNoContent {
			t.Fatalf("%s: %d", id, got)
		}
	}
	// The same transaction id from another source is another payment.
	other := event("stripe", "tx-1")
	if got := post(t, url, signed(t, "msg_4", other), other); got != http.StatusNoContent {
		t.Fatalf("msg_4: %d", got)
	}
	if s := r.Stats(); s.WebhookIDs != 4 || s.Payments != 2 || s.DuplicatePayments != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestWebhookIDWithAnotherPaymentIsAConflict(t *testing.T) {
	t.Parallel()
	r, url := start(t, 0, 0)
	for _, tx := range []string{"tx-1", "tx-2", "tx-3"} {
		body := event("payments", tx)
		if got := post(t, url, signed(t, "msg_1", body), body); got != http.StatusNoContent {
			t.Fatalf("%s: %d", tx, got)
		}
	}
	s := r.Stats()
	if s.Conflicts != 1 || s.WebhookIDs != 1 {
		t.Errorf("stats %+v", s)
	}
	if ev := s.Events["msg_1"]; ev.TransactionID != "tx-1" || ev.Deliveries != 3 {
		t.Errorf("event %+v, want the first payment kept", ev)
	}
}

func TestVerifiedBodyThatIsNotAnEventIs400(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`not json`,
		`{"type":"payment.refunded","data":{"source":"payments","transaction_id":"tx-1"}}`,
		`{"type":"payment.recorded","data":{"source":"payments"}}`,
		`{"type":"payment.recorded","data":{"transaction_id":"tx-1"}}`,
	} {
		r, url := start(t, 0, 0)
		if got := post(t, url, signed(t, "msg_1", []byte(body)), []byte(body)); got != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", body, got)
		}
		if s := r.Stats(); s.Malformed != 1 || s.Delivered != 0 || s.SignatureFailures != 0 {
			t.Errorf("%s: stats %+v", body, s)
		}
	}
}

func TestDeliveriesListOneLinePerWebhookID(t *testing.T) {
	t.Parallel()
	r, url := start(t, 1, 0)
	a, c := event("payments", "tx-a"), event("payments", "tx\tc\n")
	post(t, url, signed(t, "msg_b", a), event("payments", "tx-b")) // tampered: a failure under msg_b
	post(t, url, signed(t, "msg_a", a), a)
	post(t, url, signed(t, "msg_a", a), a)
	post(t, url, signed(t, "msg_c", c), c)
	post(t, url, signed(t, "msg_c", c), c)
	res, err := http.Get(url + "/debug/deliveries")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, _ := io.ReadAll(res.Body)
	st := r.Stats()
	ms := func(id string) string { return strconv.FormatInt(st.Events[id].FirstDeliveredAt.UnixMilli(), 10) }
	want := "msg_a\tpayments\ttx-a\t2\t0\t1\tpayment.recorded\t-\t" + ms("msg_a") + "\nmsg_b\t-\t-\t1\t1\t0\t-\t-\t0\n" +
		"msg_c\tpayments\ttx?c?\t2\t0\t1\tpayment.recorded\t-\t" + ms("msg_c") + "\n"
	if string(got) != want {
		t.Errorf("deliveries\n%q, want\n%q", got, want)
	}
	var buf bytes.Buffer
	if err := r.WriteDeliveries(&buf); err != nil || buf.String() != want {
		t.Errorf("WriteDeliveries = %q, %v", buf.String(), err)
	}
}

func TestConcurrentDeliveriesAreCountedOnce(t *testing.T) {
	t.Parallel()
	r, url := start(t, 2, 0.3)
	const payments, senders = 20, 4
	var wg sync.WaitGroup
	for i := range payments {
		for range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, body := fmt.Sprintf("msg_%d", i), event("payments", fmt.Sprintf("tx-%d", i))
				for a := 0; a < 50; a++ {
					if post(t, url, signed(t, id, body), body) == http.StatusNoContent {
						return
					}
				}
				t.Errorf("%s: never acknowledged", id)
			}()
		}
	}
	wg.Wait()
	s := r.Stats()
	if s.WebhookIDs != payments || s.Payments != payments || s.DuplicatePayments != 0 || s.Conflicts != 0 ||
		s.FailedFirst != 2*payments || s.Delivered < payments*senders {
		t.Errorf("stats %+v", s)
	}
}

func TestNewRefusesABadConfig(t *testing.T) {
	t.Parallel()
	v, err := signature.NewVerifier(signature.SchemeStandard, []signature.Secret{secret(t, secretText)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  fakereceiver.Config
	}{
		{"no verifier", fakereceiver.Config{}},
		{"negative fail-first", fakereceiver.Config{Verifier: v, FailFirst: -1}},
		{"drop rate above 1", fakereceiver.Config{Verifier: v, DropRate: 1.5}},
		{"negative drop rate", fakereceiver.Config{Verifier: v, DropRate: -0.1}},
	} {
		if r, err := fakereceiver.New(tc.cfg); err == nil {
			t.Errorf("%s: New = %v, nil; want an error", tc.name, r)
		}
	}
	if _, err := fakereceiver.New(fakereceiver.Config{Verifier: v, FailFirst: 2, DropRate: 1}); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

func startWith(t *testing.T, cfg fakereceiver.Config) (*fakereceiver.Receiver, string) {
	t.Helper()
	v, err := signature.NewVerifier(signature.SchemeStandard, []signature.Secret{secret(t, secretText)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Verifier = v
	r, err := fakereceiver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func TestScriptedAnswersComeFirstWhateverTheWebhookID(t *testing.T) {
	t.Parallel()
	r, url := startWith(t, fakereceiver.Config{Answers: []int{502, 200, 429}, FailFirst: 1, KeepAttempts: true})
	a, b := event("payments", "tx-a"), event("payments", "tx-b")
	post(t, url, signed(t, "msg_x", a), event("payments", "tx-x")) // does not verify: not in the script
	var got []int
	for _, d := range []struct {
		id   string
		body []byte
	}{{"msg_a", a}, {"msg_b", b}, {"msg_a", a}, {"msg_b", b}, {"msg_a", a}} {
		got = append(got, post(t, url, signed(t, d.id, d.body), d.body))
	}
	// 502 scripted; 200 lets msg_b through to FailFirst (500); 429 scripted;
	// then msg_b processed, msg_a meets FailFirst, then is processed.
	if want := []int{502, 500, 429, 204, 500}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("answers %v, want %v", got, want)
	}
	s := r.Stats()
	if s.Scripted != 2 || s.FailedFirst != 2 || s.Delivered != 1 || s.SignatureFailures != 1 {
		t.Errorf("stats %+v", s)
	}
	attempts := r.Attempts()
	if len(attempts) != 6 || attempts[0].Err == nil || attempts[0].Status != 401 || attempts[1].Status != 502 ||
		attempts[4].Status != 204 || attempts[4].Header.Get(signature.HeaderWebhookID) != "msg_b" || string(attempts[4].Body) != string(b) {
		t.Errorf("attempts %+v", attempts)
	}
}

func TestOtherEventsAreProcessedWhenAccepted(t *testing.T) {
	t.Parallel()
	r, url := startWith(t, fakereceiver.Config{OtherEvents: true})
	body := []byte(`{"type":"disbursement.paid","data":{"loan_id":"L-1","tranche":1}}`)
	for range 2 {
		if got := post(t, url, signed(t, "msg_d", body), body); got != http.StatusNoContent {
			t.Fatalf("answer %d, want 204", got)
		}
	}
	s := r.Stats()
	if s.Other != 2 || s.Delivered != 2 || s.WebhookIDs != 1 || s.Payments != 0 || s.Malformed != 0 || len(r.Attempts()) != 0 {
		t.Errorf("stats %+v (attempts kept without KeepAttempts: %d)", s, len(r.Attempts()))
	}
	if ev := s.Events["msg_d"]; ev.Deliveries != 2 || ev.TransactionID != "" || ev.Type != "disbursement.paid" {
		t.Errorf("event %+v", ev)
	}
	order := []byte(`{"type":"order.paid","data":{"order_id":"ord-1","status":"paid","version":2}}`)
	if got := post(t, url, signed(t, "msg_o", order), order); got != http.StatusNoContent {
		t.Fatalf("answer %d, want 204", got)
	}
	if ev := r.Stats().Events["msg_o"]; ev.Type != "order.paid" || ev.OrderID != "ord-1" || ev.Deliveries != 1 {
		t.Errorf("order event %+v, want its type and order_id", ev)
	}
	var buf bytes.Buffer
	if err := r.WriteDeliveries(&buf); err != nil || !strings.Contains(buf.String(), "msg_o\t-\t-\t1\t0\t1\torder.paid\tord-1\t") {
		t.Errorf("WriteDeliveries = %q, %v: want the order's line with its type and order_id", buf.String(), err)
	}
}

func TestDelayNextHoldsTheNextProcessedAnswer(t *testing.T) {
	t.Parallel()
	r, url := startWith(t, fakereceiver.Config{FailFirst: 1})
	body := event("payments", "tx-1")
	r.DelayNext(300 * time.Millisecond)
	start := time.Now()
	if got := post(t, url, signed(t, "msg_1", body), body); got != 500 || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("a failed first attempt: %d after %v, want 500 at once", got, time.Since(start))
	}
	start = time.Now()
	if got := post(t, url, signed(t, "msg_1", body), body); got != 204 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("the processed attempt: %d after %v, want 204 after the delay", got, time.Since(start))
	}
}
