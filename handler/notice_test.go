package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

// noticeProvider is a provider whose webhooks only name payments, as
// Mollie's do: a form body id=<ref>, unsigned. Its API answers
// {"id","amount","currency","status","refunded"}.
type noticeProvider struct{}

func init() { provider.Register("noticetest", noticeProvider{}) }

func (noticeProvider) Schemes() []signature.Scheme { return nil }
func (noticeProvider) Keys() []string              { return nil }
func (noticeProvider) SignsNothing()               {}
func (noticeProvider) Samples() provider.Samples   { return provider.Samples{} }
func (noticeProvider) New(cfg provider.Config) (provider.Adapter, error) {
	return noticeAdapter{rules: cfg.Rules}, nil
}

type noticeAdapter struct{ rules *payload.Rules }

func (noticeAdapter) MediaTypes() []string { return []string{"application/x-www-form-urlencoded"} }

// Notices reads id=pay_... (several: a batch, as GoCardless's); with
// events=1, each notice carries an event id (ev_<ref>), as a batch's
// events do.
func (noticeAdapter) Notices(body []byte, _ string) ([]provider.Notice, error) {
	v, err := url.ParseQuery(string(body))
	if err != nil || len(v["id"]) == 0 || len(v) > 2 || len(v) == 2 && v.Get("events") != "1" {
		return nil, payload.Malformed("id", "want id=pay_...")
	}
	var out []provider.Notice
	for _, id := range v["id"] {
		if !strings.HasPrefix(id, "pay_") {
			return nil, payload.Malformed("id", "want id=pay_...")
		}
		n := provider.Notice{Ref: id, Type: "status_changed"}
		if v.Get("events") == "1" {
			n.EventID = "ev_" + id
		}
		out = append(out, n)
	}
	return out, nil
}

func (a noticeAdapter) Adapt(body []byte, _ string) ([]provider.Event, error) {
	var p struct {
		ID, Currency, Status string
		Amount, Refunded     int64
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, payload.Malformed("", "not the API's payment")
	}
	if p.Status != "paid" {
		return nil, nil
	}
	out := []provider.Event{{TransactionID: p.ID, Amount: p.Amount, Currency: p.Currency, EventID: p.ID + ":paid", Payload: body}}
	if p.Refunded > 0 {
		out = append(out, provider.Event{Kind: lifecycle.Refund, TransactionID: p.ID, Amount: p.Refunded, Currency: p.Currency,
			EventID: p.ID + ":refunded", RefundID: p.ID + ":refund", Cumulative: true, Payload: body})
	}
	for _, e := range out {
		if err := a.rules.CheckPayment(e.Payment(), nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fakeAPI is the provider's API: payments by ref, each fetch counted and
// taking delay.
type fakeAPI struct {
	mu       sync.Mutex
	payments map[string]string
	delay    time.Duration
	fetches  atomic.Int64
	inFlight atomic.Int64
	maxIn    atomic.Int64
}

func (f *fakeAPI) set(ref, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.payments == nil {
		f.payments = map[string]string{}
	}
	f.payments[ref] = body
}

func (f *fakeAPI) Fetch(ctx context.Context, ref string) ([]byte, string, error) {
	f.fetches.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxIn.Load()
		if n <= m || f.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
	f.mu.Lock()
	body, ok := f.payments[ref]
	f.mu.Unlock()
	if !ok {
		return nil, "", fmt.Errorf("fake: %s: %w", ref, provider.ErrNoSuchPayment)
	}
	var p struct{ Status string }
	_ = json.Unmarshal([]byte(body), &p)
	if p.Status == "open" {
		return nil, p.Status, nil
	}
	return []byte(body), p.Status, nil
}

// noticeReplicas starts n replicas serving the source "notes" of
// noticetest, fetching from api.
func noticeReplicas(t *testing.T, n int, api provider.Fetcher, tweak func(*handler.Config)) []*paylocktest.Replica {
	t.Helper()
	cfg := handler.Config{Sources: []handler.Source{{Name: "notes", Provider: "noticetest", Fetcher: api}}}
	if tweak != nil {
		tweak(&cfg)
	}
	return startReplicas(t, n, paylocktest.Options{Config: cfg})
}

func sendNotice(t *testing.T, r *paylocktest.Replica, ref string) answer {
	t.Helper()
	return post(t, r.URL, "/webhooks/notes", "application/x-www-form-urlencoded", []byte("id="+ref))
}

// A notice records what the provider's API says of the payment, never
// what the webhook says; a later notice fetches again and records the new
// state (a refund) once.
func TestANoticeRecordsWhatTheProvidersAPISays(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{}
	r := noticeReplicas(t, 1, api, nil)[0]
	ctx := context.Background()

	api.set("pay_1", `{"id":"pay_1","amount":2500,"currency":"EUR","status":"open"}`)
	if a := sendNotice(t, r, "pay_1"); a.status != 200 || a.str("result") != "not_final" {
		t.Fatalf("a notice of an open payment: %d %s; want 200 not_final", a.status, a.raw)
	}
	if _, err := r.Store.Payments().Payment(ctx, "notes", "pay_1"); err == nil {
		t.Fatal("an open payment was recorded")
	}

	api.set("pay_1", `{"id":"pay_1","amount":2500,"currency":"EUR","status":"paid"}`)
	if a := sendNotice(t, r, "pay_1"); a.status != 200 || a.str("result") != "processed" || a.str("transaction_id") != "pay_1" {
		t.Fatalf("a notice of a paid payment: %d %s; want 200 processed", a.status, a.raw)
	}
	p, err := r.Store.Payments().Payment(ctx, "notes", "pay_1")
	if err != nil || p.Amount != 2500 || p.Currency != "EUR" {
		t.Fatalf("recorded %+v, %v; want 2500 EUR from the API", p, err)
	}
	if a := sendNotice(t, r, "pay_1"); a.status != 200 || a.str("result") != "duplicate" {
		t.Fatalf("the same notice again: %d %s; want 200 duplicate", a.status, a.raw)
	}

	api.set("pay_1", `{"id":"pay_1","amount":2500,"currency":"EUR","status":"paid","refunded":1000}`)
	if a := sendNotice(t, r, "pay_1"); a.status != 200 || a.str("result") != "processed" {
		t.Fatalf("a notice of a refund: %d %s; want 200 processed", a.status, a.raw)
	}
	st, err := r.Store.Payments().PaymentState(ctx, "notes", "pay_1")
	if err != nil || st.AmountRefunded != 1000 || st.Amount != 2500 {
		t.Fatalf("state %+v, %v; want 2500 with 1000 refunded", st, err)
	}
	if got := api.fetches.Load(); got != 4 {
		t.Fatalf("%d fetches for 4 notices arriving one after another, want 4 (each may announce a new state)", got)
	}

	// A body shaped as the API's answer, posted as a webhook, is never
	// read as one: 415 as JSON, 400 as a form, nothing written.
	forged := []byte(`{"id":"pay_2","amount":99999999,"currency":"EUR","status":"paid"}`)
	wantProblem(t, post(t, r.URL, "/webhooks/notes", "application/json", forged), http.StatusUnsupportedMediaType)
	wantProblem(t, post(t, r.URL, "/webhooks/notes", "application/x-www-form-urlencoded", forged), http.StatusBadRequest)
	if _, err := r.Store.Payments().Payment(ctx, "notes", "pay_2"); err == nil {
		t.Fatal("a forged API answer was recorded")
	}
	if got := api.fetches.Load(); got != 4 {
		t.Fatalf("refused bodies fetched: %d fetches, want still 4", got)
	}
}

// Three replicas, five copies of one notice each, at once: one payment,
// every copy acknowledged, and a fetch that began after a copy arrived
// answers it, so the storm costs one or two fetches, not fifteen. The same
// storm of an id the API does not know: 422 for every copy, nothing
// written, as few fetches.
func TestANoticeStormFetchesABoundedNumberOfTimes(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{delay: 50 * time.Millisecond}
	api.set("pay_storm", `{"id":"pay_storm","amount":700,"currency":"GBP","status":"paid"}`)
	rs := noticeReplicas(t, 3, api, nil)

	storm := func(ref string) []answer {
		var wg sync.WaitGroup
		out := make([]answer, 15)
		for i := range out {
			wg.Go(func() { out[i] = sendNotice(t, rs[i%3], ref) })
		}
		wg.Wait()
		return out
	}
	for _, a := range storm("pay_storm") {
		if a.status != 200 || (a.str("result") != "processed" && a.str("result") != "duplicate") {
			t.Fatalf("a copy answered %d %s; want 200", a.status, a.raw)
		}
	}
	if n := testkit.Count(t, rs[0].Store.Pool(), `SELECT count(*) FROM payments WHERE source = 'notes' AND transaction_id = 'pay_storm'`); n != 1 {
		t.Fatalf("%d payments recorded, want 1", n)
	}
	if got := api.fetches.Load(); got < 1 || got > 3 {
		t.Fatalf("15 copies at once fetched %d times, want 1 to 3", got)
	}
	if m := api.maxIn.Load(); m != 1 {
		t.Fatalf("%d fetches of one payment at once, want 1 (the payment's lock)", m)
	}

	api.fetches.Store(0)
	for _, a := range storm("pay_unknown") {
		if a.status != http.StatusUnprocessableEntity || !strings.HasSuffix(a.str("type"), "#unknown-payment") {
			t.Fatalf("a copy of an unknown id answered %d %s; want 422 unknown-payment", a.status, a.raw)
		}
	}
	if got := api.fetches.Load(); got < 1 || got > 3 {
		t.Fatalf("15 copies of an unknown id fetched %d times, want 1 to 3", got)
	}
	if n := testkit.Count(t, rs[0].Store.Pool(), `SELECT count(*) FROM payments WHERE transaction_id = 'pay_unknown'`); n != 0 {
		t.Fatalf("an unknown id wrote %d payments", n)
	}
}

// A flood of ids nobody paid (Mollie's webhooks are unsigned: anyone can
// send ids) costs the provider's API at most the source's budget, shared
// by the replicas: the rest are answered 503 with Retry-After, and nothing
// is written.
func TestAFloodOfUnknownIdsCostsAtMostTheFetchBudget(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{delay: 5 * time.Millisecond}
	rs := noticeReplicas(t, 2, api, func(c *handler.Config) { c.FetchRate, c.FetchConcurrency = 10, 2 })

	start := time.Now()
	var wg sync.WaitGroup
	var paced, unknown, other atomic.Int64
	for i := range 60 {
		wg.Go(func() {
			a := sendNotice(t, rs[i%2], fmt.Sprintf("pay_flood%d", i))
			switch {
			case a.status == http.StatusServiceUnavailable && strings.HasSuffix(a.str("type"), "#fetch-paced") && a.header.Get("Retry-After") != "":
				paced.Add(1)
			case a.status == http.StatusUnprocessableEntity:
				unknown.Add(1)
			default:
				other.Add(1)
				t.Errorf("answer %d %s", a.status, a.raw)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	got := api.fetches.Load()
	// 10 starts a second, shared, after a burst of 10: at most one per
	// 100ms of the flood beyond the burst.
	if limit := int64(elapsed/(100*time.Millisecond)) + 10 + 1; got > limit {
		t.Fatalf("the flood fetched %d times in %v; the budget allows at most %d", got, elapsed, limit)
	}
	if paced.Load() == 0 || unknown.Load() != got || other.Load() != 0 {
		t.Fatalf("%d paced, %d unknown (%d fetches), %d other", paced.Load(), unknown.Load(), got, other.Load())
	}
	if m := api.maxIn.Load(); m > 2 {
		t.Fatalf("%d fetches at once, the budget allows 2", m)
	}
	t.Logf("60 unknown ids over %v: %d fetched (budget 10/s, burst 10), %d paced", elapsed.Round(time.Millisecond), got, paced.Load())
	if n := testkit.Count(t, rs[0].Store.Pool(), `SELECT count(*) FROM payments WHERE source = 'notes'`); n != 0 {
		t.Fatalf("the flood wrote %d payments", n)
	}
}

// With Redis down the ledger and the shared budget cannot answer: each
// notice fetches (within this replica's budget) and the database records
// the payment once.
func TestNoticesWithRedisDownFetchEachTimeAndRecordOnce(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{}
	api.set("pay_r", `{"id":"pay_r","amount":100,"currency":"USD","status":"paid"}`)
	cfg := handler.Config{Sources: []handler.Source{{Name: "notes", Provider: "noticetest", Fetcher: api}}}
	r := startReplicas(t, 1, paylocktest.Options{Config: cfg, RedisURL: "redis://127.0.0.1:1/0", Redis: noRetries})[0]
	for i := range 3 {
		a := sendNotice(t, r, "pay_r")
		want := "duplicate"
		if i == 0 {
			want = "processed"
		}
		if a.status != 200 || a.str("result") != want {
			t.Fatalf("notice %d with Redis down: %d %s; want 200 %s", i, a.status, a.raw, want)
		}
	}
	if got := api.fetches.Load(); got != 3 {
		t.Fatalf("%d fetches, want 3 (nothing coalesces without the ledger)", got)
	}
	if n := testkit.Count(t, r.Store.Pool(), `SELECT count(*) FROM payments WHERE source = 'notes'`); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
}

// A provider's API that fails is a 503 with Retry-After (the provider
// retries), and writes nothing; a source of a notifier without an API is
// refused at start.
func TestANoticeWhoseFetchFailsIsRetried(t *testing.T) {
	t.Parallel()
	r := noticeReplicas(t, 1, failingAPI{}, nil)[0]
	a := sendNotice(t, r, "pay_f")
	wantProblem(t, a, http.StatusServiceUnavailable)
	wantRetryAfter(t, a)
	if !strings.HasSuffix(a.str("type"), "#provider-unavailable") {
		t.Fatalf("type %q", a.str("type"))
	}
	if n := testkit.Count(t, r.Store.Pool(), `SELECT count(*) FROM payments WHERE source = 'notes'`); n != 0 {
		t.Fatalf("%d payments written", n)
	}

	_, err := handler.New(handler.Config{Sources: []handler.Source{{Name: "notes", Provider: "noticetest"}}}, nil, nil)
	if !errors.Is(err, handler.ErrNoFetcher) {
		t.Fatalf("a notifier source without a fetcher: %v; want ErrNoFetcher", err)
	}
}

type failingAPI struct{}

func (failingAPI) Fetch(context.Context, string) ([]byte, string, error) {
	return nil, "", errors.New("fake: 502 from the provider")
}

// One payment of a batch that the API does not know stops neither the
// others nor their retries: each other payment is recorded, and the
// delivery is answered with the refusal (422) so that it is kept and seen.
func TestAnUnknownPaymentInABatchStopsNoOther(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{}
	api.set("pay_a", `{"id":"pay_a","amount":100,"currency":"EUR","status":"paid"}`)
	api.set("pay_c", `{"id":"pay_c","amount":300,"currency":"EUR","status":"paid"}`)
	r := noticeReplicas(t, 1, api, nil)[0]
	body := []byte("id=pay_a&id=pay_gone&id=pay_c")
	for try := range 2 {
		a := post(t, r.URL, "/webhooks/notes", "application/x-www-form-urlencoded", body)
		wantProblem(t, a, http.StatusUnprocessableEntity)
		if !strings.HasSuffix(a.str("type"), "#unknown-payment") {
			t.Fatalf("try %d: %s; want unknown-payment", try+1, a.raw)
		}
		for _, ref := range []string{"pay_a", "pay_c"} {
			if _, err := r.Store.Payments().Payment(context.Background(), "notes", ref); err != nil {
				t.Fatalf("try %d: %s, named after the unknown payment, is not recorded: %v", try+1, ref, err)
			}
		}
	}
}

// A batch naming more payments than the fetch budget allows at once
// converges: each try fetches what the budget allows and is answered 503;
// a retried notice keeps its event's first place, so the payments fetched
// by an earlier try are answered without a fetch, and every payment is
// fetched once.
func TestABatchOverTheFetchBudgetConvergesOnRetries(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{}
	var body strings.Builder
	body.WriteString("events=1")
	for i := range 30 {
		ref := fmt.Sprintf("pay_b%02d", i)
		api.set(ref, fmt.Sprintf(`{"id":%q,"amount":%d,"currency":"EUR","status":"paid"}`, ref, 100+i))
		body.WriteString("&id=" + ref)
	}
	r := noticeReplicas(t, 1, api, func(c *handler.Config) { c.FetchRate = 10 })[0]
	var last answer
	tries := 0
	for ; tries < 8; tries++ {
		last = post(t, r.URL, "/webhooks/notes", "application/x-www-form-urlencoded", []byte(body.String()))
		if last.status == http.StatusOK {
			break
		}
		if last.status != http.StatusServiceUnavailable || !strings.HasSuffix(last.str("type"), "#fetch-paced") {
			t.Fatalf("try %d: %d %s; want 200 or 503 fetch-paced", tries+1, last.status, last.raw)
		}
		time.Sleep(time.Second)
	}
	if last.status != http.StatusOK {
		t.Fatalf("the batch did not converge in %d tries: %s", tries, last.raw)
	}
	if tries == 0 {
		t.Fatal("30 fetches went through a budget of 10 a second at once")
	}
	if n := testkit.Count(t, r.Store.Pool(), `SELECT count(*) FROM payments WHERE source = 'notes'`); n != 30 {
		t.Fatalf("%d payments recorded, want 30", n)
	}
	if got := api.fetches.Load(); got != 30 {
		t.Fatalf("%d fetches over %d tries, want 30: one per payment", got, tries+1)
	}
}
