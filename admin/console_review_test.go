package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/review"
	"github.com/paylock/paylock/store"
)

func TestConsoleReviewQueueResolvesThroughTheForm(t *testing.T) {
	t.Parallel()
	_, st := paylocktest.MigratedSchema(t)
	ctx := context.Background()
	if err := st.Payments().RecordMismatch(ctx, store.Mismatch{Source: "acme", TransactionID: "tx-<b>", Amount: 101, Currency: "EUR",
		RequestID: "req-1", Body: []byte(`{"amount":101,"note":"<script>x</script>"}`)}); err != nil {
		t.Fatal(err)
	}
	items, err := st.Review().ReviewItems(ctx, store.ReviewFilter{})
	if err != nil || len(items) != 1 {
		t.Fatalf("items %v, %v", items, err)
	}
	id := items[0].ID
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(),
		Tokens: []admin.Token{{Name: "alice", Token: aliceToken}}, Console: consoleStore(st), Review: review.New(st.Review(), nil)}))
	t.Cleanup(srv.Close)

	l := login(t, srv, aliceToken, "/admin/review")
	if l.cookie == nil {
		t.Fatalf("login: %d", l.status)
	}
	list := adminDo(t, srv, http.MethodGet, "/admin/review", nil, nil, l.cookie)
	if list.status != 200 || !strings.Contains(list.body, `href="/admin/review/`+id+`"`) || !strings.Contains(list.body, `href="/admin/review"`) {
		t.Fatalf("list: %d %s", list.status, list.body)
	}
	page := adminDo(t, srv, http.MethodGet, "/admin/review/"+id, nil, nil, l.cookie)
	m := csrfField.FindStringSubmatch(page.body)
	if page.status != 200 || m == nil || !strings.Contains(page.body, `<option value="acknowledge"`) || strings.Contains(page.body, "<script") || strings.Contains(page.body, "<b>") {
		t.Fatalf("item page: %d %s", page.status, page.body)
	}
	sameOrigin := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}
	post := func(form url.Values) adminAnswer {
		return adminDo(t, srv, http.MethodPost, "/admin/review/"+id+"/resolve", strings.NewReader(form.Encode()), sameOrigin, l.cookie)
	}
	if a := post(url.Values{"action": {"acknowledge"}, "note": {"seen"}}); a.status != http.StatusForbidden {
		t.Fatalf("resolve without the CSRF token: %d, want 403", a.status)
	}
	if a := post(url.Values{"action": {"adopt"}, "csrf": {m[1]}}); a.status != http.StatusBadRequest || !strings.Contains(a.body, "Not resolved") {
		t.Fatalf("an action the kind does not allow: %d %s", a.status, a.body)
	}
	open, err := st.Review().ReviewItems(ctx, store.ReviewFilter{})
	if err != nil || len(open) != 1 {
		t.Fatalf("refused resolutions changed the queue: %v, %v", open, err)
	}
	a := post(url.Values{"action": {"acknowledge"}, "note": {"customer paid twice, <refunded>"}, "csrf": {m[1]}})
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/admin/review/"+id+"?resolved=1" {
		t.Fatalf("resolve: %d %v %s", a.status, a.header, a.body)
	}
	done := adminDo(t, srv, http.MethodGet, a.header.Get("Location"), nil, nil, l.cookie)
	for _, w := range []string{"Resolved: acknowledge by alice.", "customer paid twice, &lt;refunded&gt;"} {
		if !strings.Contains(done.body, w) {
			t.Errorf("the result page lacks %q", w)
		}
	}
	if open, _ := st.Review().ReviewItems(ctx, store.ReviewFilter{}); len(open) != 0 {
		t.Errorf("still open: %v", open)
	}
}

func TestConsoleReviewNoteIsCutWithoutSplittingACharacter(t *testing.T) {
	t.Parallel()
	_, st := paylocktest.MigratedSchema(t)
	ctx := context.Background()
	if err := st.Payments().RecordMismatch(ctx, store.Mismatch{Source: "acme", TransactionID: "tx-utf8", Amount: 101, Currency: "EUR",
		RequestID: "req-u", Body: []byte(`{"amount":101}`)}); err != nil {
		t.Fatal(err)
	}
	items, err := st.Review().ReviewItems(ctx, store.ReviewFilter{})
	if err != nil || len(items) != 1 {
		t.Fatalf("items %v, %v", items, err)
	}
	id := items[0].ID
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(),
		Console: consoleStore(st), Review: review.New(st.Review(), nil)}))
	t.Cleanup(srv.Close)
	l := login(t, srv, adminTestToken, "/admin/review")
	page := adminDo(t, srv, http.MethodGet, "/admin/review/"+id, nil, nil, l.cookie)
	m := csrfField.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("item page: %d", page.status)
	}
	// 1,999 bytes, then a 3-byte character across the 2,000-byte cut.
	note := strings.Repeat("a", 1999) + "€€"
	form := url.Values{"action": {"acknowledge"}, "note": {note}, "csrf": {m[1]}}
	a := adminDo(t, srv, http.MethodPost, "/admin/review/"+id+"/resolve", strings.NewReader(form.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}, l.cookie)
	if a.status != http.StatusSeeOther {
		t.Fatalf("resolve with a long note: %d %s", a.status, a.body)
	}
	all, err := st.Review().ReviewItems(ctx, store.ReviewFilter{All: true})
	if err != nil || len(all) != 1 || all[0].Resolution == nil || all[0].Resolution.Note != strings.Repeat("a", 1999) {
		t.Fatalf("resolution %+v, %v; want the note cut to its 1,999 ASCII bytes", all, err)
	}
}

// TestConsoleReviewItemsNameTheirPayment: a discarded forward's row and
// page name its payment and link to it.
func TestConsoleReviewItemsNameTheirPayment(t *testing.T) {
	t.Parallel()
	_, st := paylocktest.MigratedSchema(t)
	ctx := context.Background()
	if _, err := st.Payments().RecordPaymentForwarded(ctx, store.Payment{Source: "acme", TransactionID: "tx-fwd", Amount: 100,
		Currency: "EUR", Payload: []byte(`{}`)}, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE river_job SET state = 'discarded', finalized_at = now(), attempt = max_attempts WHERE kind = 'forward'`); err != nil {
		t.Fatal(err)
	}
	items, err := st.Review().ReviewItems(ctx, store.ReviewFilter{Kind: store.ReviewForward})
	if err != nil || len(items) != 1 {
		t.Fatalf("items %v, %v", items, err)
	}
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(),
		Console: consoleStore(st), Review: review.New(st.Review(), nil)}))
	t.Cleanup(srv.Close)
	link := `href="/admin/payments/acme/tx-fwd"`
	for _, path := range []string{"/admin/review", "/admin/review/" + items[0].ID} {
		a := adminDo(t, srv, http.MethodGet, path, nil, page, nil)
		if a.status != http.StatusOK || !strings.Contains(a.body, link) || !strings.Contains(a.body, "payment.recorded") {
			t.Errorf("%s: %d, no link to the payment: %s", path, a.status, a.body)
		}
	}
}
