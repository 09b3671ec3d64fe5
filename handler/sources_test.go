package handler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/signature"
	"github.com/prometheus/client_golang/prometheus"
)

// Three counterparties, three secrets: the PSP signs payments, the lending
// platform signs loan approvals, the payout provider signs payout statuses.
const (
	pspSecret     = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	lenderSecret  = "whsec_bGVuZGVyLXNlY3JldC1mb3ItdGVzdHMtb25seQ=="
	payoutsSecret = "whsec_cGF5b3V0LXByb3ZpZGVyLXNlY3JldC10ZXN0cw=="
)

// separateSources starts a lending replica whose three sources each verify
// with their own secret, and returns each source's signing secret.
func separateSources(t *testing.T, cfg handler.Config) (*lending, map[string]signature.Secret) {
	t.Helper()
	secrets := map[string]signature.Secret{}
	var sources []handler.Source
	for _, s := range []struct{ name, adapter, secret string }{
		{"payments", handler.PaymentsProvider, pspSecret},
		{"loans", handler.ProviderLoans, lenderSecret},
		{"payouts", handler.ProviderPayouts, payoutsSecret},
	} {
		v, sec := verifier(t, signature.SchemeStandard, s.secret)
		secrets[s.name] = sec[0]
		src := handler.Source{Name: s.name, Provider: s.adapter, Verifier: v}
		if s.name == "payments" {
			src = handler.PaymentsSource(v)
		}
		sources = append(sources, src)
	}
	cfg.Sources = sources
	return startLending(t, lendingOptions{cfg: cfg}), secrets
}

// bodies are a valid delivery for each source.
var bodies = map[string][]byte{
	"payments": []byte(`{"transaction_id":"tx-forged","amount":1000,"currency":"JPY"}`),
	"loans":    []byte(`{"event_id":"evt-forged","loan_id":"L-forged","tranche":1,"amount":5000,"currency":"JPY"}`),
	"payouts":  []byte(`{"event_id":"evt-po-forged","payout_id":"po_000001","status":"failed"}`),
}

func sendSigned(t *testing.T, base, source string, secret signature.Secret, id string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/"+source, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range signature.Sign(signature.SchemeStandard, secret, id, time.Now(), body) {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	return do(t, req)
}

func TestASecretVerifiesOnlyItsOwnSource(t *testing.T) {
	t.Parallel()
	l, secrets := separateSources(t, handler.Config{})
	for _, target := range []string{"payments", "loans", "payouts"} {
		for _, signer := range []string{"payments", "loans", "payouts"} {
			if signer == target {
				continue
			}
			t.Run(signer+" secret on "+target, func(t *testing.T) {
				a := sendSigned(t, l.reps[0].URL, target, secrets[signer], "msg-"+signer+"-"+target, bodies[target])
				wantProblem(t, a, http.StatusUnauthorized)
			})
		}
	}
	for table, n := range map[string]int{
		"payments":       testkit.Count(t, l.admin.Pool(), "SELECT count(*) FROM payments"),
		"disbursements":  testkit.Count(t, l.admin.Pool(), "SELECT count(*) FROM disbursements"),
		"webhook_events": testkit.Count(t, l.admin.Pool(), "SELECT count(*) FROM webhook_events"),
	} {
		if n != 0 {
			t.Errorf("forged deliveries wrote %d rows to %s", n, table)
		}
	}
	// Each source's own secret still works.
	wantResult(t, sendSigned(t, l.reps[0].URL, "payments", secrets["payments"], "msg-p", bodies["payments"]), "processed")
	wantResult(t, sendSigned(t, l.reps[0].URL, "loans", secrets["loans"], "msg-l", bodies["loans"]), "accepted")
}

func TestRefusedDeliveriesAreNeverCountedAsVerified(t *testing.T) {
	t.Parallel()
	// The drift this guards against: loans and payouts once counted refused
	// deliveries as verified by secret 0, the series a rotation watches.
	for _, source := range []string{"payments", "loans", "payouts"} {
		t.Run(source, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			l, _ := separateSources(t, handler.Config{Metrics: handler.NewMetrics(reg, 5*time.Second)})
			a := post(t, l.reps[0].URL, "/webhooks/"+source, "application/json", bodies[source])
			wantProblem(t, a, http.StatusUnauthorized)
			if got := testkit.Gathered(t, reg).Sum("paylock_signature_failures_total", fmt.Sprintf("source=%q", source), `reason="missing_header"`); got != 1 {
				t.Errorf("signature failures{source=%s} = %v, want 1", source, got)
			}
			if got := seriesCount(t, reg, "paylock_signature_verified_total"); got != 0 {
				t.Errorf("a refused delivery left %d paylock_signature_verified_total series", got)
			}
		})
	}
}

func TestLoansLeaveTheFinishedMarker(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{})
	r := l.reps[0]
	wantResult(t, approve(t, r.URL, "evt-fm", "L-fm", 1, 100), "accepted")
	key := r.Config.LockPrefix + "loan:L-fm:1"
	_, err := lock.New(r.Redis).Obtain(context.Background(), key, time.Second)
	if !errors.Is(err, lock.ErrFinished) {
		t.Fatalf("after an accepted loan, obtaining %s: %v, want lock.ErrFinished", key, err)
	}
	// A redelivery meets the marker and settles with a read.
	wantResult(t, approve(t, r.URL, "evt-fm", "L-fm", 1, 100), "duplicate")
}

// readCounter records whether anything read a request body.
type readCounter struct {
	r     io.Reader
	reads atomic.Int64
}

func (c *readCounter) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.r.Read(p)
}

func TestBeyondMaxInFlightDeliveriesAre503UnreadWithRetryAfter(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{Config: handler.Config{MaxInFlight: 1}})
	h := r.Handler

	// The first delivery trickles its body and holds the only slot.
	pr, pw := io.Pipe()
	first := make(chan int)
	go func() {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/payments", pr)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		first <- rec.Code
	}()
	if _, err := pw.Write([]byte(`{"transaction_id":"tx-slow",`)); err != nil {
		t.Fatal(err)
	}

	body := &readCounter{r: bytes.NewReader(payJSON("tx-shed", 100, "JPY"))}
	req := httptest.NewRequest(http.MethodPost, "/webhooks/payments", body)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("second delivery: %d Retry-After=%q, want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if n := body.reads.Load(); n != 0 {
		t.Fatalf("the shed delivery's body was read %d times", n)
	}
	// Health checks are not webhook deliveries: never shed.
	hz := httptest.NewRecorder()
	h.ServeHTTP(hz, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if hz.Code != http.StatusOK {
		t.Fatalf("healthz while full: %d", hz.Code)
	}

	pw.Write([]byte(`"amount":100,"currency":"JPY"}`))
	pw.Close()
	if code := <-first; code != http.StatusOK {
		t.Fatalf("first delivery: %d", code)
	}
	if n := testkit.PaymentRows(t, r.Store.Pool(), "tx-shed"); n != 0 {
		t.Fatalf("the shed delivery wrote %d rows", n)
	}
	// The slot is free again.
	rec = httptest.NewRecorder()
	req = httptest.NewRequest(http.MethodPost, "/webhooks/payments", bytes.NewReader(payJSON("tx-after", 100, "JPY")))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("after the slow delivery: %d %s", rec.Code, rec.Body)
	}
}

func TestAdminListenerAnswers401WithoutTheToken(t *testing.T) {
	t.Parallel()
	l := startLending(t, lendingOptions{})
	wantResult(t, approve(t, l.reps[0].URL, "evt-adm", "L-adm", 1, 100), "accepted")
	asrv := httptest.NewServer(admin.New(admin.Config{Token: "s3cret-token", Disbursements: l.reps[0].Store.Disbursements(), Logger: testkit.Logger()}))
	t.Cleanup(asrv.Close)
	getWith := func(path, auth string) answer {
		req, _ := http.NewRequest(http.MethodGet, asrv.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		return do(t, req)
	}
	for _, path := range []string{"/disbursements/L-adm/1", "/", "/nothing/here", "/admin/river/"} {
		for _, auth := range []string{"", "Bearer wrong", "Basic czNjcmV0LXRva2Vu", "Bearer s3cret-token2"} {
			a := getWith(path, auth)
			wantProblem(t, a, http.StatusUnauthorized)
			if !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s with %q: WWW-Authenticate %q", path, auth, a.header.Get("WWW-Authenticate"))
			}
		}
	}
	if a := getWith("/disbursements/L-adm/1", "Bearer s3cret-token"); a.status != 200 || a.str("loan_id") != "L-adm" {
		t.Fatalf("with the token: %d %s", a.status, a.raw)
	}
	for _, tranche := range []string{"2147483648", "99999999999999999999", "-1", "0"} {
		wantProblem(t, getWith("/disbursements/L-adm/"+tranche, "Bearer s3cret-token"), http.StatusBadRequest)
	}
	// The public listener no longer serves the read.
	wantProblem(t, get(t, l.reps[0].URL, "/disbursements/L-adm/1"), http.StatusNotFound)
}

func TestSourceConfigurationErrors(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{})
	for _, tc := range []struct {
		name    string
		sources []handler.Source
		want    string
	}{
		{"bad name", []handler.Source{{Name: "Stripe/v2", Provider: handler.PaymentsProvider}}, "URL-safe"},
		{"unknown adapter", []handler.Source{{Name: "x", Provider: "acmepay"}}, "unknown adapter"},
		{"twice", []handler.Source{handler.PaymentsSource(nil), handler.PaymentsSource(nil)}, "twice"},
		{"loans without a store", []handler.Source{{Name: "loans", Provider: handler.ProviderLoans}}, "Disbursements"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := handler.New(handler.Config{Sources: tc.sources}, lock.New(r.Redis), r.Store.Payments())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// seriesCount is how many series the metric family name has.
func seriesCount(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	n := 0
	for _, s := range testkit.Gathered(t, reg) {
		if s.Name == name {
			n++
		}
	}
	return n
}
