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

	"github.com/paylock/paylock/signature"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestFakereceiverVerifiesFailsFirstAttemptsAndReports(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := map[string]string{secretsEnv: testSecret}
	var stdout bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"--fail-first", "2", "--log-format", "json"},
			func(k string) string { return env[k] }, &stdout, io.Discard, ln)
	}()
	base := "http://" + ln.Addr().String()
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, testSecret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"payment.recorded","data":{"source":"payments","transaction_id":"tx-1"}}`)
	send := func(h http.Header) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/forwarded", bytes.NewReader(body))
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
	var got []int
	for range 3 {
		got = append(got, send(signature.Sign(signature.SchemeStandard, secrets[0], "msg_1", time.Now(), body)))
	}
	got = append(got, send(http.Header{"Webhook-Id": {"msg_1"}}))
	if want := []int{500, 500, 204, 401}; len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("answers %v, want %v", got, want)
	}

	res, err := http.Get(base + "/debug/stats")
	if err != nil {
		t.Fatal(err)
	}
	var stats struct {
		WebhookIDs        int `json:"webhook_ids"`
		SignatureFailures int `json:"signature_failures"`
		FailedFirst       int `json:"failed_first"`
	}
	err = json.NewDecoder(res.Body).Decode(&stats)
	res.Body.Close()
	if err != nil || stats.WebhookIDs != 1 || stats.SignatureFailures != 1 || stats.FailedFirst != 2 {
		t.Fatalf("stats %+v, %v", stats, err)
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

func TestFakereceiverRefusesBadFlags(t *testing.T) {
	env := func(string) string { return "" }
	for _, args := range [][]string{
		{},                        // no secret anywhere
		{"--secrets", "whsec_!!"}, // not base64
		{"--secrets", testSecret, "--drop-rate", "2"},
		{"--secrets", testSecret, "--fail-first", "-1"},
		{"--secrets", testSecret, "--tolerance", "-1s"},
		{"--secrets", testSecret, "--log-format", "xml"},
		{"--nope"},
	} {
		if code := run(context.Background(), args, env, io.Discard, io.Discard, nil); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
