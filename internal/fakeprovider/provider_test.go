package fakeprovider_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/signature"
)

func start(t *testing.T, cfg fakeprovider.Config) (*fakeprovider.Provider, string) {
	t.Helper()
	p := fakeprovider.New(cfg)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	t.Cleanup(p.Close)
	return p, srv.URL
}

type reply struct {
	status   int
	body     map[string]any
	raw      string
	replayed bool
	err      error
}

// postPayout sends one POST on a fresh connection (no transparent retry).
func postPayout(t *testing.T, base, key, body string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/payouts", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := hc.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := reply{status: res.StatusCode, raw: string(raw), replayed: res.Header.Get("Idempotent-Replayed") == "true"}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

const body1 = `{"amount":500000,"currency":"JPY","reference":"L-1-1"}`

func TestSameKeyAndBodyReplaysTheFirstAnswer(t *testing.T) {
	t.Parallel()
	p, base := start(t, fakeprovider.Config{})
	first := postPayout(t, base, "k1", body1)
	again := postPayout(t, base, "k1", body1)
	if first.status != 201 || again.status != 201 || again.raw != first.raw || !again.replayed {
		t.Fatalf("first %d %s, again %d %s (replayed %v)", first.status, first.raw, again.status, again.raw, again.replayed)
	}
	if n := p.Created("L-1-1"); n != 1 {
		t.Fatalf("created %d", n)
	}
}

func TestSameKeyWithAnotherBodyIs422(t *testing.T) {
	t.Parallel()
	p, base := start(t, fakeprovider.Config{})
	postPayout(t, base, "k1", body1)
	r := postPayout(t, base, "k1", `{"amount":1,"currency":"JPY","reference":"L-1-1"}`)
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("got %d %s", r.status, r.raw)
	}
	if s := p.Stats(); s.Mismatches != 1 || s.Created["L-1-1"] != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestInFlightDuplicateIs409(t *testing.T) {
	t.Parallel()
	p, base := start(t, fakeprovider.Config{})
	release := p.Hold()
	first := make(chan reply, 1)
	go func() { first <- postPayout(t, base, "k1", body1) }()
	testkit.WaitFor(t, 10*time.Second, "the first call in the provider", func() bool { return p.Created("L-1-1") > 0 })
	if r := postPayout(t, base, "k1", body1); r.status != http.StatusConflict {
		t.Fatalf("in-flight duplicate: %d %s", r.status, r.raw)
	}
	release()
	if r := <-first; r.status != 201 {
		t.Fatalf("first: %d %s", r.status, r.raw)
	}
	if s := p.Stats(); s.MaxInFlight["k1"] != 2 || s.Conflicts != 1 {
		t.Fatalf("max in flight %d conflicts %d", s.MaxInFlight["k1"], s.Conflicts)
	}
}

func TestDroppedAnswerStillCreatesThePayout(t *testing.T) {
	t.Parallel()
	p, base := start(t, fakeprovider.Config{})
	p.DropNext(1)
	if r := postPayout(t, base, "k1", body1); r.err == nil {
		t.Fatalf("got an answer %d %s, want none", r.status, r.raw)
	}
	po, ok := p.PayoutByKey("k1")
	if !ok {
		t.Fatal("the payout was not created")
	}
	if r := postPayout(t, base, "k1", body1); r.status != 201 || r.body["id"] != po.ID {
		t.Fatalf("retry: %d %s, want the replayed %s", r.status, r.raw, po.ID)
	}
}

func TestRefusedRetriesDoNothingAndLookupStillFindsThePayout(t *testing.T) {
	t.Parallel()
	p, base := start(t, fakeprovider.Config{})
	p.DropNext(1)
	p.RefuseRetries(http.StatusForbidden)
	if r := postPayout(t, base, "k1", body1); r.err == nil {
		t.Fatalf("got an answer %d %s, want none", r.status, r.raw)
	}
	for range 2 {
		if r := postPayout(t, base, "k1", body1); r.status != http.StatusForbidden || r.replayed {
			t.Fatalf("retry: %d %s, want 403 and no replay", r.status, r.raw)
		}
	}
	// A new key is not a retry: it is served.
	if r := postPayout(t, base, "k2", `{"amount":1,"currency":"JPY","reference":"L-2-1"}`); r.status != 201 {
		t.Fatalf("a new key: %d %s, want 201", r.status, r.raw)
	}
	if p.Created("L-1-1") != 1 {
		t.Fatalf("created %d payouts for L-1-1, want 1", p.Created("L-1-1"))
	}
	res, err := http.Get(base + "/v1/payouts?idempotency_key=k1")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("lookup: %d, want 200", res.StatusCode)
	}
	p.RefuseRetries(0)
	if r := postPayout(t, base, "k1", body1); r.status != 201 || !r.replayed {
		t.Fatalf("after RefuseRetries(0): %d %s, want the replay", r.status, r.raw)
	}
}

func TestForgottenKeyMakesANewPayoutButLookupStillFindsTheFirst(t *testing.T) {
	t.Parallel()
	p, base := start(t, fakeprovider.Config{KeyRetention: 50 * time.Millisecond})
	first := postPayout(t, base, "k1", body1)
	time.Sleep(100 * time.Millisecond)
	second := postPayout(t, base, "k1", body1)
	if second.body["id"] == first.body["id"] || p.Created("L-1-1") != 2 {
		t.Fatalf("after retention: first %s second %s: a blind POST must pay twice here", first.raw, second.raw)
	}
	res, err := http.Get(base + "/v1/payouts?idempotency_key=k1")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var po fakeprovider.Payout
	json.NewDecoder(res.Body).Decode(&po)
	if res.StatusCode != 200 || po.ID != first.body["id"] {
		t.Fatalf("lookup: %d %+v, want the first payout", res.StatusCode, po)
	}
}

func TestInjectedFailuresDoNothing(t *testing.T) {
	t.Parallel()
	p, base := start(t, fakeprovider.Config{})
	p.FailNext(1, http.StatusServiceUnavailable)
	if r := postPayout(t, base, "k1", body1); r.status != 503 || p.Created("L-1-1") != 0 {
		t.Fatalf("got %d, created %d", r.status, p.Created("L-1-1"))
	}
	if r := postPayout(t, base, "k1", body1); r.status != 201 {
		t.Fatalf("after the failure: %d", r.status)
	}
}

func TestWebhooksAreSignedRetriedDuplicatedAndReordered(t *testing.T) {
	t.Parallel()
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(signature.SchemeStandard, secrets, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var acked []fakeprovider.Event
	refused := 0
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if _, err := v.Verify(r.Header, body); err != nil {
			t.Errorf("webhook signature: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if refused < 2 {
			refused++
			w.WriteHeader(http.StatusNotFound)
			return
		}
		var ev fakeprovider.Event
		json.Unmarshal(body, &ev)
		acked = append(acked, ev)
	}))
	defer cb.Close()
	p, base := start(t, fakeprovider.Config{
		CallbackURL: cb.URL, Secret: &secrets[0], Duplicates: 1, Reorder: true, WebhookRetry: 5 * time.Millisecond,
	})
	r := postPayout(t, base, "k1", body1)
	id, _ := r.body["id"].(string)
	events, err := p.Settle(id, "", "paid", "failed")
	if err != nil || len(events) != 2 {
		t.Fatalf("settle: %v %v", events, err)
	}
	if _, err := p.Settle("po_nope", "", "paid"); !errors.Is(err, fakeprovider.ErrUnknownPayout) {
		t.Fatalf("unknown payout: %v", err)
	}
	testkit.WaitFor(t, 5*time.Second, "4 webhooks acknowledged", func() bool { return p.Stats().WebhooksAcked >= 4 })
	mu.Lock()
	defer mu.Unlock()
	if len(acked) != 4 || acked[0].Status != "failed" || acked[3].Status != "paid" || acked[0].EventID != acked[1].EventID {
		t.Fatalf("acked %+v: want failed twice, then paid twice", acked)
	}
	if s := p.Stats(); s.WebhookStatuses[404] != 2 {
		t.Fatalf("statuses %v", s.WebhookStatuses)
	}
}
