package handler_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit/paylocktest"
	_ "github.com/paylock/paylock/provider/all" // the providers the sources name
)

// startReplicas starts n replicas sharing one database and one Redis
// (paylocktest.StartReplicas), each Redis client giving up after 500ms
// (before o.Redis's own tweaks), so that a cut Redis fails a request
// instead of stalling it.
func startReplicas(t *testing.T, n int, o paylocktest.Options) []*paylocktest.Replica {
	t.Helper()
	tweak := o.Redis
	o.Redis = func(opt *redis.Options) {
		opt.ReadTimeout = 500 * time.Millisecond
		opt.WriteTimeout = 500 * time.Millisecond
		opt.DialTimeout = 500 * time.Millisecond
		if tweak != nil {
			tweak(opt)
		}
	}
	return paylocktest.StartReplicas(t, n, o)
}

func startReplica(t *testing.T, o paylocktest.Options) *paylocktest.Replica {
	t.Helper()
	return startReplicas(t, 1, o)[0]
}

// answer is a decoded HTTP answer.
type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (a answer) str(k string) string { s, _ := a.body[k].(string); return s }

func post(t *testing.T, base, path, contentType string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return answer{}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func payJSON(tx string, amount int64, currency string) []byte {
	b, _ := json.Marshal(map[string]any{"transaction_id": tx, "amount": amount, "currency": currency})
	return b
}

func pay(t *testing.T, base, tx string, amount int64, currency string) answer {
	t.Helper()
	return post(t, base, "/webhooks/payments", "application/json", payJSON(tx, amount, currency))
}

func wantProblem(t *testing.T, a answer, status int) {
	t.Helper()
	if a.status != status {
		t.Fatalf("status = %d, want %d; body %s", a.status, status, a.raw)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	for _, k := range []string{"type", "title", "detail"} {
		if a.str(k) == "" {
			t.Fatalf("problem without %q: %s", k, a.raw)
		}
	}
	if got, _ := a.body["status"].(float64); int(got) != status {
		t.Fatalf("problem status = %v, want %d", a.body["status"], status)
	}
}

func wantRetryAfter(t *testing.T, a answer) {
	t.Helper()
	if a.header.Get("Retry-After") == "" {
		t.Fatalf("%d answer without Retry-After: %s", a.status, a.raw)
	}
}

// noRetries makes a client to a dead Redis fail fast.
func noRetries(o *redis.Options) { o.MaxRetries = -1 }

// httptestRecorder serves one GET on h.
func httptestRecorder(h http.Handler, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}
