package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/review"
	"github.com/paylock/paylock/store"
)

// reviewBundle is an admin listener serving the review queue of a fresh
// schema, with a fake payout provider.
type reviewBundle struct {
	st   *store.Store
	srv  *httptest.Server
	fake *fakeprovider.Provider
	pc   *payout.Client
}

const aliceToken = "alice-token-0123456789"

func setupReview(t *testing.T, providerURL string) *reviewBundle {
	t.Helper()
	_, st := paylocktest.MigratedSchema(t)
	fake := fakeprovider.New(fakeprovider.Config{})
	t.Cleanup(fake.Close)
	fsrv := httptest.NewServer(fake)
	t.Cleanup(fsrv.Close)
	if providerURL == "" {
		providerURL = fsrv.URL
	}
	pc := payout.NewClient(fsrv.URL, nil)
	q := review.New(st.Review(), payout.NewClient(providerURL, nil))
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(),
		Tokens: []admin.Token{{Name: "alice", Token: aliceToken}}, Review: q}))
	t.Cleanup(srv.Close)
	return &reviewBundle{st: st, srv: srv, fake: fake, pc: pc}
}

func (b *reviewBundle) flagged(t *testing.T, loan string) (store.Disbursement, string) {
	t.Helper()
	ctx := context.Background()
	d, err := b.st.Disbursements().AcceptDisbursement(ctx, store.Disbursement{LoanID: loan, Tranche: 1, Amount: 500, Currency: "JPY", EventID: "evt_" + loan})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.st.Disbursements().FlagForReview(ctx, d.ID, "lookup refused"); err != nil {
		t.Fatal(err)
	}
	return d, "disbursement-" + strconv.FormatInt(d.ID, 10)
}

func (b *reviewBundle) resolve(t *testing.T, token, id, action, note string) adminAnswer {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"action": action, "note": note})
	return adminDo(t, b.srv, http.MethodPost, "/admin/review/"+id+"/resolve", strings.NewReader(string(body)),
		map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"}, nil)
}

func (b *reviewBundle) lastResolution(t *testing.T, id string) (who, action, note string) {
	t.Helper()
	err := b.st.Pool().QueryRow(context.Background(),
		`SELECT who, action, note FROM review_resolutions WHERE item_id = $1 ORDER BY id DESC LIMIT 1`, id).Scan(&who, &action, &note)
	if err != nil {
		t.Fatalf("resolution of %s: %v", id, err)
	}
	return who, action, note
}

func TestAdminReviewAPIResolvesEachKindAndRecordsWhoAndWhy(t *testing.T) {
	t.Parallel()
	b := setupReview(t, "")
	ctx := context.Background()

	// A mismatch.
	if _, err := b.st.Payments().RecordPayment(ctx, store.Payment{TransactionID: "tx-r", Amount: 100, Currency: "EUR", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := b.st.Payments().RecordMismatch(ctx, store.Mismatch{TransactionID: "tx-r", Amount: 101, Currency: "EUR", RequestID: "req-1", Body: []byte(`{"amount":101}`)}); err != nil {
		t.Fatal(err)
	}
	// Disbursements: the provider holds the first one's payout, not the
	// second's; the third is retried.
	dAdopt, adoptID := b.flagged(t, "L-adopt")
	if _, err := b.pc.Create(ctx, dAdopt.IdempotencyKey, payout.Request{Amount: 500, Currency: "JPY", Reference: dAdopt.Reference()}); err != nil {
		t.Fatal(err)
	}
	_, failID := b.flagged(t, "L-fail")
	_, retryID := b.flagged(t, "L-retry")

	list := adminDo(t, b.srv, http.MethodGet, "/admin/review", nil, map[string]string{"Authorization": "Bearer " + aliceToken}, nil)
	var got struct{ Items []store.ReviewItem }
	if err := json.Unmarshal([]byte(list.body), &got); list.status != 200 || err != nil || len(got.Items) != 4 {
		t.Fatalf("list: %d %s", list.status, list.body)
	}
	mmID := ""
	for _, it := range got.Items {
		if it.Kind == store.ReviewMismatch {
			mmID = it.ID
		}
	}
	if a := adminDo(t, b.srv, http.MethodGet, "/admin/review/"+mmID, nil, map[string]string{"Authorization": "Bearer " + aliceToken}, nil); a.status != 200 || !strings.Contains(a.body, `"stored_amount":100`) {
		t.Errorf("show: %d %s", a.status, a.body)
	}

	for _, c := range []struct {
		name, token, id, action, note string
		status                        int
		who                           string
	}{
		{"unknown id", aliceToken, "mismatch-99999", "acknowledge", "n", 404, ""},
		{"malformed id", aliceToken, "nothing", "acknowledge", "n", 400, ""},
		{"bad action", aliceToken, mmID, "adopt", "n", 400, ""},
		{"no note", aliceToken, mmID, "acknowledge", "", 400, ""},
		{"fail while the provider holds the payout", aliceToken, adoptID, "fail", "n", 409, ""},
		{"adopt while the provider holds none", aliceToken, failID, "adopt", "n", 409, ""},
		{"mismatch acknowledged", aliceToken, mmID, "acknowledge", "PSP sent a partial capture", 200, "alice"},
		{"acknowledged twice", aliceToken, mmID, "acknowledge", "again", 409, ""},
		{"adopt", adminTestToken, adoptID, "adopt", "provider has it", 200, "admin"},
		{"fail", aliceToken, failID, "fail", "provider never paid", 200, "alice"},
		{"retry", aliceToken, retryID, "retry", "provider fixed its API keys", 200, "alice"},
	} {
		a := b.resolve(t, c.token, c.id, c.action, c.note)
		if a.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, a.status, a.body, c.status)
			continue
		}
		if c.status != 200 {
			if a.header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s: %s", c.name, a.header.Get("Content-Type"))
			}
			continue
		}
		if who, action, note := b.lastResolution(t, c.id); who != c.who || action != c.action || note != c.note {
			t.Errorf("%s: recorded %s %s %q", c.name, who, action, note)
		}
	}
	if d, _ := b.st.Disbursements().Disbursement(ctx, "L-adopt", 1); d.Status != store.StatusSent || d.ProviderRef == "" {
		t.Errorf("adopted: %+v", d)
	}
	if d, _ := b.st.Disbursements().Disbursement(ctx, "L-fail", 1); d.Status != store.StatusFailed {
		t.Errorf("failed: %+v", d)
	}
	if p, _ := b.st.Payments().Payment(ctx, "", "tx-r"); p.Amount != 100 {
		t.Errorf("payment changed: %+v", p)
	}
	if items, _ := b.st.Review().ReviewItems(ctx, store.ReviewFilter{}); len(items) != 0 {
		t.Errorf("queue left: %+v", items)
	}
}

func TestAdminReviewRefusesAdoptAndFailWhenTheProviderIsUnreachable(t *testing.T) {
	t.Parallel()
	b := setupReview(t, "http://127.0.0.1:1")
	ctx := context.Background()
	_, id := b.flagged(t, "L-down")
	for _, action := range []string{"adopt", "fail"} {
		a := b.resolve(t, aliceToken, id, action, "trying")
		if a.status != http.StatusConflict || !strings.Contains(a.body, "could not be asked") {
			t.Errorf("%s: %d %s, want 409", action, a.status, a.body)
		}
	}
	d, err := b.st.Disbursements().Disbursement(ctx, "L-down", 1)
	if err != nil || d.Status != store.StatusPending || d.ReviewReason == "" {
		t.Fatalf("row changed: %+v, %v", d, err)
	}
	if n := testkit.Count(t, b.st.Pool(), `SELECT count(*) FROM review_resolutions`); n != 0 {
		t.Errorf("%d resolutions recorded, want 0", n)
	}
}

func TestAdminIdentityIsTheNameOfTheTokenOrSession(t *testing.T) {
	t.Parallel()
	who := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(admin.Identity(r.Context()))) })
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(),
		Tokens: []admin.Token{{Name: "alice", Token: aliceToken}, {Name: "bob", Token: "bob-token-0123456789ab"}},
		Mounts: map[string]http.Handler{"/who": who}}))
	t.Cleanup(srv.Close)
	for token, want := range map[string]string{adminTestToken: "admin", aliceToken: "alice", "bob-token-0123456789ab": "bob"} {
		if a := adminDo(t, srv, http.MethodGet, "/who", nil, map[string]string{"Authorization": "Bearer " + token}, nil); a.status != 200 || a.body != want {
			t.Errorf("bearer %s: %d %q, want %q", want, a.status, a.body, want)
		}
		l := login(t, srv, token, "/who")
		if l.cookie == nil {
			t.Fatalf("login as %s: %d %s", want, l.status, l.body)
		}
		if a := adminDo(t, srv, http.MethodGet, "/who", nil, nil, l.cookie); a.status != 200 || a.body != want {
			t.Errorf("session %s: %d %q, want %q", want, a.status, a.body, want)
		}
	}
	if a := adminDo(t, srv, http.MethodGet, "/who", nil, map[string]string{"Authorization": "Bearer not-a-token-0123456789"}, nil); a.status != 401 {
		t.Errorf("wrong token: %d", a.status)
	}
	open := httptest.NewServer(admin.New(admin.Config{Logger: testkit.Logger(), Mounts: map[string]http.Handler{"/who": who}}))
	t.Cleanup(open.Close)
	if a := adminDo(t, open, http.MethodGet, "/who", nil, nil, nil); a.body != admin.Anonymous {
		t.Errorf("without tokens: %q", a.body)
	}
}
