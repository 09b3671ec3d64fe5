package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// startReplicas starts n in-process paylock replicas sharing a fresh schema
// and the test Redis (under keys of this test's own), verifying signatures
// with testSecret. It returns their base URLs and the schema's DSN.
func startReplicas(t *testing.T, n int) ([]string, string) {
	t.Helper()
	v := testkit.Verifier(t, signature.SchemeStandard, testSecret)
	reps := paylocktest.StartReplicas(t, n, paylocktest.Options{
		Config: handler.Config{Sources: []handler.Source{handler.PaymentsSource(v)}},
		Store:  func(c *store.Config) { c.MaxConns = 8 },
	})
	urls := make([]string, n)
	for i, r := range reps {
		urls[i] = r.URL
	}
	return urls, reps[0].DSN
}

// flaky answers every other request 503 with Retry-After: 1 before passing
// it to next, as a replica under a passing fault would.
func flaky(t *testing.T, next string) string {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, next+r.URL.Path, r.Body)
		req.Header = r.Header.Clone()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		w.Header().Set("Content-Type", res.Header.Get("Content-Type"))
		w.WriteHeader(res.StatusCode)
		io.Copy(w, res.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// deadAddress is a loopback URL nothing listens on.
func deadAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func runJSON(t *testing.T, args ...string) (Summary, int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), append(args, "--json"), func(string) string { return "" }, &stdout, &stderr)
	var s Summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("exit %d, stdout not JSON (%v): %s\nstderr: %s", code, err, stdout.String(), stderr.String())
	}
	return s, code, stderr.String()
}

func TestStormAcrossReplicasAFlakyOneAndADeadOnePasses(t *testing.T) {
	t.Parallel()
	urls, dsn := startReplicas(t, 2)
	targets := []string{urls[0], flaky(t, urls[1]), deadAddress(t)}
	const txs, deliveries = 60, 3
	s, code, stderr := runJSON(t,
		"--targets", strings.Join(targets, ","),
		"--txs", "60", "--deliveries", "3", "--concurrency", "16",
		"--secret", testSecret, "--database-url", dsn, "--run-id", "e2e-pass",
		"--retry-initial", "5ms", "--retry-max", "50ms", "--time-scale", "0.01",
		"--deadline", "20s", "--attempt-timeout", "5s",
	)
	t.Logf("%s", stderr)
	if code != 0 || s.Verdict != "pass" {
		t.Fatalf("exit %d, verdict %s: %v", code, s.Verdict, s.Reasons)
	}
	if s.Deliveries != txs*deliveries || s.Acknowledged != s.Deliveries || s.Rows != txs {
		t.Fatalf("deliveries %d acknowledged %d rows %d", s.Deliveries, s.Acknowledged, s.Rows)
	}
	if s.Answers["200 processed"] != txs {
		t.Fatalf("processed answers = %d, want %d (%v)", s.Answers["200 processed"], txs, s.Answers)
	}
	if s.Answers["503"] == 0 || s.Answers[errRefused] == 0 || s.Retries == 0 {
		t.Fatalf("the flaky and the dead target were not retried past: retries %d, answers %v", s.Retries, s.Answers)
	}
	if s.Latency.N == 0 || s.Latency.P50 <= 0 || s.Latency.Max < s.Latency.P99 {
		t.Fatalf("latency %+v", s.Latency)
	}
}

func TestAReceiverThatAcknowledgesWithoutRecordingFails(t *testing.T) {
	t.Parallel()
	_, dsn := startReplicas(t, 1) // a migrated, empty schema
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"result":"processed"}`)
	}))
	t.Cleanup(liar.Close)
	s, code, _ := runJSON(t, "--targets", liar.URL, "--txs", "5", "--deliveries", "2",
		"--database-url", dsn, "--deadline", "10s")
	if code != 1 || s.Verdict != "fail" {
		t.Fatalf("exit %d, verdict %s", code, s.Verdict)
	}
	if s.Lost != 5 || s.LostAcknowledged != 5 || s.Rows != 0 {
		t.Fatalf("lost %d (acknowledged %d), rows %d; want 5 lost", s.Lost, s.LostAcknowledged, s.Rows)
	}
	if s.Duplicates != 5 || s.ProcessedMoreThanOnce != 5 {
		t.Fatalf("duplicates %d; want the 5 transactions answered processed twice", s.Duplicates)
	}
}

func TestAReceiverThatNeverAcknowledgesFailsAtTheDeadline(t *testing.T) {
	t.Parallel()
	_, dsn := startReplicas(t, 1)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	start := time.Now()
	s, code, _ := runJSON(t, "--targets", down.URL, "--txs", "3", "--deliveries", "1",
		"--database-url", dsn, "--deadline", "500ms", "--retry-initial", "10ms", "--time-scale", "0.02")
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v past a 500ms deadline", took)
	}
	if code != 1 || s.NeverAcknowledged != 3 || s.Unacknowledged != 3 || s.Retries == 0 {
		t.Fatalf("exit %d, never acknowledged %d, unacknowledged %d, retries %d", code, s.NeverAcknowledged, s.Unacknowledged, s.Retries)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--targets", "127.0.0.1:8080"},
		{"--targets", "http://x", "--txs", "0"},
		{"--targets", "http://x", "--run-id", "has space"},
		{"--targets", "http://x", "--secret", "whsec_!!"},
		{"--targets", "http://x", "--txs", "100", "--rate", "1", "--deadline", "10s"},
	} {
		var stderr bytes.Buffer
		if code := Run(context.Background(), args, func(string) string { return "" }, io.Discard, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr.String())
		}
	}
}
