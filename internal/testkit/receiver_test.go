package testkit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/signature"
)

func send(t *testing.T, url, id string, body []byte, secret string) *http.Response {
	t.Helper()
	s, err := signature.ParseSecrets(signature.SchemeStandard, secret)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url+"/events", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = signature.Sign(signature.SchemeStandard, s[0], id, time.Now(), body)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

func TestReceiverAnswersItsScriptThenProcessesEveryEvent(t *testing.T) {
	t.Parallel()
	var fronted atomic.Int32
	r := testkit.StartReceiver(t, testkit.ReceiverConfig{
		Answers: []int{http.StatusInternalServerError, http.StatusTooManyRequests}, OtherEvents: true,
		Front: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { fronted.Add(1); next.ServeHTTP(w, req) })
		},
	})
	payment := []byte(`{"type":"payment.recorded","data":{"source":"payments","transaction_id":"tx-1"}}`)
	status := []byte(`{"type":"disbursement.paid","data":{"loan_id":"L-1"}}`)
	var got []string
	for _, d := range []struct {
		id   string
		body []byte
	}{{"msg_1", payment}, {"msg_1", payment}, {"msg_1", payment}, {"msg_2", status}} {
		res := send(t, r.URL, d.id, d.body, testkit.ReceiverSecret)
		got = append(got, fmt.Sprintf("%d%s", res.StatusCode, res.Header.Get("Retry-After")))
	}
	if fmt.Sprint(got) != "[500 4291 204 204]" {
		t.Fatalf("answers %v, want the script (429 with Retry-After: 1), then 204 for any event", got)
	}
	if res := send(t, r.URL, "msg_3", payment, "whsec_bm90IGNvbmZpZ3VyZWQgYW55d2hlcmU="); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("another secret: %d", res.StatusCode)
	}
	a := r.WaitAttempts(t, 5)
	if len(a) != 5 || fronted.Load() != 5 || a[0].Status != 500 || a[2].Status != 204 || a[4].Status != 401 ||
		a[4].Err == nil || a[3].Err != nil || a[3].Header.Get("webhook-id") != "msg_2" || !strings.Contains(string(a[3].Body), "disbursement.paid") {
		t.Fatalf("attempts %+v (fronted %d)", a, fronted.Load())
	}
	if s := r.Stats(); s.Scripted != 2 || s.Delivered != 2 || s.Other != 1 || s.Payments != 1 || s.WebhookIDs != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestReceiverDelayNextHoldsOneAnswer(t *testing.T) {
	t.Parallel()
	r := testkit.StartReceiver(t, testkit.ReceiverConfig{})
	body := []byte(`{"type":"payment.recorded","data":{"source":"payments","transaction_id":"tx-1"}}`)
	r.DelayNext(300 * time.Millisecond)
	for i, want := range []time.Duration{300 * time.Millisecond, 0} {
		start := time.Now()
		send(t, r.URL, "msg_1", body, testkit.ReceiverSecret)
		if took := time.Since(start); took < want || (want == 0 && took > 250*time.Millisecond) {
			t.Errorf("attempt %d answered after %v, want %v", i+1, took, want)
		}
	}
	if ev := r.Stats().Events["msg_1"]; ev.Deliveries != 2 {
		t.Errorf("event %+v, want both processed", ev)
	}
}

func TestRunStopsWhatItRunsWhenTheTestEnds(t *testing.T) {
	t.Parallel()
	var stopped bool
	t.Run("run", func(t *testing.T) {
		testkit.Run(t, "worker", func(ctx context.Context) error {
			<-ctx.Done()
			stopped = true
			return nil
		})
	})
	if !stopped {
		t.Fatal("the function still ran after its test ended")
	}
	r := testkit.Run(t, "one-shot", func(context.Context) error { return nil })
	<-r.Stopped()
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
}

func TestWaitReadyGivesUpWhenTheServerStops(t *testing.T) {
	t.Parallel()
	ln := testkit.Listen(t)
	r := testkit.Run(t, "server", func(context.Context) error { return nil })
	<-r.Stopped()
	start := time.Now()
	msg := failure(t, func(tb testing.TB) { testkit.WaitReady(tb, "http://"+ln.Addr().String()+"/readyz", time.Minute, r) })
	if time.Since(start) > 5*time.Second || !strings.Contains(msg, "it stopped") {
		t.Fatalf("%q after %v", msg, time.Since(start))
	}

	// A server that answers is ready.
	live := testkit.Listen(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	served := testkit.Run(t, "http server", func(ctx context.Context) error {
		go func() { <-ctx.Done(); srv.Close() }()
		if err := srv.Serve(live); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	testkit.WaitReady(t, "http://"+live.Addr().String()+"/readyz", 10*time.Second, served)
}

func TestLogBufferKeepsWhatIsLogged(t *testing.T) {
	t.Parallel()
	var logs testkit.LogBuffer
	logs.Logger().Debug("payout worker started", "id", "w-1")
	if !logs.Contains(`"msg":"payout worker started"`) || !logs.Contains(`"id":"w-1"`) {
		t.Fatalf("logs %q", logs.String())
	}
}
