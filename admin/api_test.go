package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/review"
	"github.com/paylock/paylock/store"
)

// apiFixture is an admin listener with every part on (console, payments,
// deliveries and their replay, review, disbursements) over a schema
// holding: stripe payments pi_api_1, pi_api_2, pi_api_3 and pi_other_1
// (forwarded), an adyen payment pi_api_9; one kept refused delivery; a
// mismatch review items (mismatch-1 and mismatch-2); and the disbursement of loan L-1 tranche 1.
type apiFixture struct {
	srv        *httptest.Server
	admin      *admin.Admin
	st         *store.Store
	deliveryID int64
	reviewID   string
	replayed   []int64 // the deliveries ReplayDelivery was asked to replay
}

func startAPI(t *testing.T) *apiFixture {
	t.Helper()
	_, st := paylocktest.MigratedSchema(t)
	ctx := context.Background()
	f := &apiFixture{st: st}
	// Order ord-1001, paid by payment pay_ord_1 of the payments source
	// (recorded first: the oldest payment), derived once.
	if _, _, err := st.Orders().RegisterOrder(ctx, store.OrderRegistration{OrderID: "ord-1001", Amount: 2000, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Payments().RecordPayment(ctx, store.Payment{Source: "payments", TransactionID: "pay_ord_1", Amount: 2000,
		Currency: "EUR", EventID: "evt_ord_1", Payload: []byte(`{"transaction_id":"pay_ord_1","amount":2000,"currency":"EUR","order_id":"ord-1001"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Orders().DeriveOrders(ctx, store.OrderDeriver{Links: map[string][]string{"payments": {"order_id"}}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.Payment{
		{Source: "stripe", TransactionID: "pi_api_1", Amount: 100, Currency: "EUR", EventID: "evt_api_1"},
		{Source: "stripe", TransactionID: "pi_api_2", Amount: 200, Currency: "EUR", EventID: "evt_api_2"},
		{Source: "stripe", TransactionID: "pi_other_1", Amount: 300, Currency: "EUR", EventID: "evt_other_1"},
		{Source: "stripe", TransactionID: "pi_api_3", Amount: 400, Currency: "EUR", EventID: "evt_api_3"},
		{Source: "adyen", TransactionID: "pi_api_9", Amount: 900, Currency: "USD", EventID: "evt_api_9"},
	} {
		p.Payload = []byte(`{"id":"` + p.TransactionID + `"}`)
		if _, err := st.Payments().RecordPaymentForwarded(ctx, p, forward.DefaultDestination); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if f.deliveryID, err = st.Deliveries().Keep(ctx, store.Delivery{Source: "stripe", EventID: "evt_kept", Outcome: store.DeliveryRefused,
		Status: 400, ProblemDetail: "amount must be a number", Body: []byte(`{"id":"evt_kept"}`), RequestID: "r"}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []store.Mismatch{
		{Source: "stripe", TransactionID: "pi_api_1", Amount: 101, Currency: "EUR", EventID: "evt_api_1b", RequestID: "r",
			Body: []byte(`{"id":"pi_api_1","amount":101}`)},
		{Source: "stripe", TransactionID: "pi_api_2", Amount: 201, Currency: "EUR", EventID: "evt_api_2b", RequestID: "r",
			Body: []byte(`{"id":"pi_api_2","amount":201}`)},
	} {
		if err := st.Payments().RecordMismatch(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	q := review.New(st.Review(), payout.NewClient("http://127.0.0.1:1", nil))
	items, err := q.ReviewItems(ctx, store.ReviewFilter{Kind: store.ReviewMismatch})
	if err != nil || len(items) != 2 {
		t.Fatalf("review items %v, %v", items, err)
	}
	f.reviewID = items[0].ID
	if _, err := st.Disbursements().AcceptDisbursement(ctx, store.Disbursement{LoanID: "L-1", Tranche: 1, Amount: 500, Currency: "JPY", EventID: "evt_loan"}); err != nil {
		t.Fatal(err)
	}
	f.admin = admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(),
		Console: consoleStore(st), Payments: st.Payments(), Orders: st.Orders(), Deliveries: st.Deliveries(), Review: q, Disbursements: st.Disbursements(),
		ReplayDelivery: func(_ context.Context, d store.Delivery) (admin.DeliveryReplay, error) {
			f.replayed = append(f.replayed, d.ID)
			return admin.DeliveryReplay{Result: "processed", Recorded: true}, nil
		},
		Sync:                docSync{st},
		ForwardDestinations: docDestinations(),
		Forwards:            map[string]string{"stripe": forward.DefaultDestination, "adyen": forward.DefaultDestination}})
	f.srv = httptest.NewServer(f.admin)
	t.Cleanup(f.srv.Close)
	return f
}

// docSync stands for the providers' APIs in the documented examples: a
// sync of a stripe payment finds it succeeded for 700 EUR, a confirm of
// an adyen one records the pspReference it names for 1000 EUR; both
// record as the pipeline would (a payment already stored is "duplicate",
// whatever its amount), and any other source is the pipeline's no-sync
// problem.
type docSync struct{ st *store.Store }

func (d docSync) record(ctx context.Context, p store.Payment) (admin.SyncOutcome, error) {
	p.Payload = []byte(`{"id":"` + p.EventID + `"}`)
	if stored, err := d.st.Payments().Payment(ctx, p.Source, p.TransactionID); err == nil {
		p.Amount, p.Currency = stored.Amount, stored.Currency
	}
	_, err := d.st.Payments().RecordPaymentForwarded(ctx, p, forward.DefaultDestination)
	out := admin.SyncOutcome{Result: "processed", TransactionID: p.TransactionID}
	if errors.Is(err, store.ErrDuplicate) {
		out.Result, err = "duplicate", nil
	}
	return out, err
}

func (d docSync) Sync(ctx context.Context, source, txID string) (admin.SyncOutcome, error) {
	if source != "stripe" {
		return admin.SyncOutcome{}, problem.New(http.StatusUnprocessableEntity, "no-sync", "Cannot sync this source", "source",
			"source "+strconv.Quote(source)+" has no status API to sync from: a stripe source with its api_key_env set")
	}
	out, err := d.record(ctx, store.Payment{Source: source, TransactionID: txID, Amount: 700, Currency: "EUR", EventID: "sync:" + txID + ":succeeded"})
	out.ProviderStatus = "succeeded"
	return out, err
}

func (d docSync) Confirm(ctx context.Context, source string, answer []byte) (admin.SyncOutcome, error) {
	var a struct {
		PSP string `json:"pspReference"`
	}
	if source != "adyen" || json.Unmarshal(answer, &a) != nil || a.PSP == "" {
		return admin.SyncOutcome{}, problem.New(http.StatusBadRequest, "malformed", "Malformed request", "pspReference", "pspReference is required")
	}
	out, err := d.record(ctx, store.Payment{Source: source, TransactionID: a.PSP, Amount: 1000, Currency: "EUR", EventID: a.PSP + ":AUTHORISATION"})
	out.ProviderStatus = "Authorised"
	return out, err
}

// get GETs path with the bearer header and extra headers.
func (f *apiFixture) get(t *testing.T, path string, extra ...string) adminAnswer {
	t.Helper()
	h := map[string]string{"Authorization": "Bearer " + adminTestToken}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return adminDo(t, f.srv, http.MethodGet, path, nil, h, nil)
}

type listedPayments struct {
	Payments []struct {
		Source        string `json:"source"`
		TransactionID string `json:"transaction_id"`
		Status        string `json:"status"`
		URL           string `json:"url"`
	} `json:"payments"`
	NextCursor string `json:"next_cursor"`
	Next       string `json:"next"`
}

func (l listedPayments) names() []string {
	var out []string
	for _, p := range l.Payments {
		out = append(out, p.Source+"/"+p.TransactionID)
	}
	return out
}

func decodeList(t *testing.T, a adminAnswer) listedPayments {
	t.Helper()
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	var l listedPayments
	if err := json.Unmarshal([]byte(a.body), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAPIListsPaymentsAPageAtATimeWithAnOpaqueCursor(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	first := decodeList(t, f.get(t, "/admin/api/v1/payments?source=stripe&limit=2"))
	if !slices.Equal(first.names(), []string{"stripe/pi_api_3", "stripe/pi_other_1"}) || first.NextCursor == "" {
		t.Fatalf("first page %v next %q", first.names(), first.NextCursor)
	}
	if first.Payments[0].URL != "/admin/api/v1/payments/stripe/pi_api_3" {
		t.Errorf("url %q", first.Payments[0].URL)
	}
	// A payment arriving between two pages is not on the next one (it
	// is newer than the cursor), and none repeats.
	if _, err := f.st.Payments().RecordPayment(context.Background(), store.Payment{Source: "stripe", TransactionID: "pi_api_new",
		Amount: 1, Currency: "EUR", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	second := decodeList(t, f.get(t, first.Next))
	if !slices.Equal(second.names(), []string{"stripe/pi_api_2", "stripe/pi_api_1"}) {
		t.Fatalf("second page %v", second.names())
	}
	last := decodeList(t, f.get(t, second.Next))
	if len(last.Payments) != 0 || last.Next != "" || last.NextCursor != "" {
		t.Fatalf("last page %+v", last)
	}
	for query, want := range map[string][]string{
		"q=pi_api_&source=stripe":    {"stripe/pi_api_new", "stripe/pi_api_3", "stripe/pi_api_2", "stripe/pi_api_1"},
		"q=pi_api_9":                 {"adyen/pi_api_9"},
		"q=pi_%25":                   nil, // % is a literal character, not a wildcard
		"status=refunded":            nil,
		"status=succeeded&limit=1":   {"stripe/pi_api_new"},
		"since=3d&source=adyen":      {"adyen/pi_api_9"},
		"since=2999-01-01T00:00:00Z": nil,
	} {
		if got := decodeList(t, f.get(t, "/admin/api/v1/payments?"+query)).names(); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", query, got, want)
		}
	}
}

func TestAPIRefusesEveryBadParameterNamingIt(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	for _, tc := range []struct{ path, field string }{
		{"/admin/api/v1/payments?status=lost", "status"},
		{"/admin/api/v1/payments?since=yesterday", "since"},
		{"/admin/api/v1/payments?since=3w", "since"},
		{"/admin/api/v1/payments?since=-3d", "since"},
		{"/admin/api/v1/payments?limit=0", "limit"},
		{"/admin/api/v1/payments?limit=501", "limit"},
		{"/admin/api/v1/payments?limit=ten", "limit"},
		{"/admin/api/v1/payments?cursor=not-a-cursor", "cursor"},
		{"/admin/api/v1/payments?q=" + url.QueryEscape("pi\x00"), "q"},
		{"/admin/api/v1/payments?q=" + strings.Repeat("x", 201), "q"},
		{"/admin/api/v1/payments?source=a&source=b", "source"},
		{"/admin/api/v1/payments?sort=amount", "sort"},
		{"/admin/api/v1/disbursements?status=lost", "status"},
		{"/admin/api/v1/disbursements?before=x", "before"},
		{"/admin/api/v1/disbursements/L-1/one", "tranche"},
		{"/admin/api/v1/deliveries/abc", "id"},
		{"/admin/api/v1/deliveries?limit=0", "limit"},
		{"/admin/api/v1/review/abc", "id"},
		{"/admin/api/v1/review?kind=lost", "kind"},
		{"/admin/api/v1/review?all=yes", "all"},
		{"/admin/api/v1/review?state=open", "state"},
		{"/admin/api/v1/deliveries?outcom=refused", "outcom"},
		{"/admin/api/v1/disbursements?loan=L-1", "loan"},
	} {
		a := f.get(t, tc.path)
		var p struct{ Field string }
		json.Unmarshal([]byte(a.body), &p)
		if a.status != http.StatusBadRequest || a.header.Get("Content-Type") != "application/problem+json" || p.Field != tc.field {
			t.Errorf("%s: %d %s %s, want 400 problem naming %s", tc.path, a.status, a.header.Get("Content-Type"), a.body, tc.field)
		}
	}
}

func TestConsolePagesAnswerNonNumericIDsWith400(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	for _, path := range []string{"/admin/deliveries/abc", "/admin/disbursements/L-1/one", "/admin/review/abc"} {
		for _, accept := range []string{"", "text/html"} {
			if a := f.get(t, path, "Accept", accept); a.status != http.StatusBadRequest {
				t.Errorf("%s (Accept %q): %d %s, want 400", path, accept, a.status, a.body)
			}
		}
	}
}

func TestToolsGetJSONByDefaultAndBrowsersGetHTML(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	browser := "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	for _, path := range []string{"/admin/payments", "/admin/payments/stripe/pi_api_1", "/admin/deliveries",
		"/admin/deliveries/" + itoa(f.deliveryID), "/admin/review", "/admin/review/" + f.reviewID,
		"/admin/disbursements", "/admin/disbursements/L-1/1"} {
		for accept, want := range map[string]string{
			"":                 "application/json",
			"*/*":              "application/json",
			"application/json": "application/json",
			"text/html":        "text/html; charset=utf-8",
			browser:            "text/html; charset=utf-8",
		} {
			a := f.get(t, path, "Accept", accept)
			if a.status != http.StatusOK || a.header.Get("Content-Type") != want {
				t.Errorf("%s with Accept %q: %d %s, want 200 %s", path, accept, a.status, a.header.Get("Content-Type"), want)
			}
		}
	}
}

func TestOldPagesRedirectPermanentlyToTheirNewPaths(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	for _, tc := range []struct{ method, path, to string }{
		{"GET", "/admin/", "/admin/payments"},
		{"GET", "/admin/?source=stripe&since=1h", "/admin/payments?source=stripe&since=1h"},
		{"GET", "/admin/delivery-log?outcome=refused", "/admin/deliveries?outcome=refused"},
		{"GET", "/admin/delivery-log/7", "/admin/deliveries/7"},
		{"GET", "/admin/review-queue", "/admin/review"},
		{"GET", "/admin/review-queue/mismatch-1", "/admin/review/mismatch-1"},
		{"POST", "/admin/review-queue/mismatch-1/resolve", "/admin/review/mismatch-1/resolve"},
	} {
		a := adminDo(t, f.srv, tc.method, tc.path, nil, map[string]string{"Authorization": "Bearer " + adminTestToken, "Accept": "text/html"}, nil)
		if a.status != http.StatusPermanentRedirect || a.header.Get("Location") != tc.to {
			t.Errorf("%s %s: %d Location %q, want 308 %s", tc.method, tc.path, a.status, a.header.Get("Location"), tc.to)
		}
	}
}

func TestOldJSONPathsStillAnswerMarkedDeprecated(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	for _, tc := range []struct{ path, successor string }{
		{"/admin/deliveries?outcome=refused", "/admin/api/v1/deliveries?outcome=refused"},
		{"/admin/deliveries/" + itoa(f.deliveryID), "/admin/api/v1/deliveries/" + itoa(f.deliveryID)},
		{"/admin/review", "/admin/api/v1/review"},
		{"/admin/review/" + f.reviewID, "/admin/api/v1/review/" + f.reviewID},
		{"/admin/payments/stripe/pi_api_1", "/admin/api/v1/payments/stripe/pi_api_1"},
		{"/disbursements/L-1/1", "/admin/api/v1/disbursements/L-1/1"},
	} {
		old := f.get(t, tc.path, "Accept", "application/json")
		if old.status != http.StatusOK || old.header.Get("Deprecation") != "true" ||
			old.header.Get("Link") != "<"+tc.successor+`>; rel="successor-version"` {
			t.Errorf("%s: %d Deprecation %q Link %q", tc.path, old.status, old.header.Get("Deprecation"), old.header.Get("Link"))
		}
		cur := f.get(t, tc.successor)
		if cur.status != http.StatusOK || cur.header.Get("Deprecation") != "" || cur.body != old.body {
			t.Errorf("%s: %d Deprecation %q; body differs from %s: %v", tc.successor, cur.status, cur.header.Get("Deprecation"), tc.path, cur.body != old.body)
		}
	}
}

func TestAPIWritesReplayAndResolve(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	bearerJSON := map[string]string{"Authorization": "Bearer " + adminTestToken, "Content-Type": "application/json"}
	a := adminDo(t, f.srv, "POST", "/admin/api/v1/payments/stripe/pi_api_2/replay", nil, bearerJSON, nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, `"transaction_id":"pi_api_2"`) || !strings.Contains(a.body, `"pending":1`) {
		t.Errorf("payment replay: %d %s", a.status, a.body)
	}
	if a := adminDo(t, f.srv, "POST", "/admin/api/v1/payments/stripe/nope/replay", nil, bearerJSON, nil); a.status != http.StatusNotFound {
		t.Errorf("replay of no payment: %d %s", a.status, a.body)
	}
	a = adminDo(t, f.srv, "POST", "/admin/api/v1/deliveries/"+itoa(f.deliveryID)+"/replay", nil, bearerJSON, nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, `"result":"processed"`) || !slices.Equal(f.replayed, []int64{f.deliveryID}) {
		t.Errorf("delivery replay: %d %s, replayed %v", a.status, a.body, f.replayed)
	}
	if a := adminDo(t, f.srv, "POST", "/admin/api/v1/deliveries/999999/replay", nil, bearerJSON, nil); a.status != http.StatusNotFound {
		t.Errorf("replay of no delivery: %d %s", a.status, a.body)
	}
	a = adminDo(t, f.srv, "POST", "/admin/api/v1/review/"+f.reviewID+"/resolve", strings.NewReader(`{"action":"acknowledge","note":"seen"}`), bearerJSON, nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, `"acknowledge"`) {
		t.Errorf("resolve: %d %s", a.status, a.body)
	}
	if a := adminDo(t, f.srv, "POST", "/admin/api/v1/payments", nil, bearerJSON, nil); a.status != http.StatusMethodNotAllowed ||
		a.header.Get("Allow") != "GET" || a.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("POST on the listing: %d Allow %q %s", a.status, a.header.Get("Allow"), a.body)
	}
}

func TestAPIListsDisbursements(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	a := f.get(t, "/admin/api/v1/disbursements?loan_id=L-1")
	if a.status != http.StatusOK || !strings.Contains(a.body, `"loan_id":"L-1"`) || !strings.Contains(a.body, `"status":"pending"`) {
		t.Errorf("list: %d %s", a.status, a.body)
	}
	if a := f.get(t, "/admin/api/v1/disbursements?status=paid"); a.status != http.StatusOK || a.body != "{\"disbursements\":[]}\n" {
		t.Errorf("none paid: %d %s", a.status, a.body)
	}
	if a := f.get(t, "/admin/api/v1/disbursements/L-9/1"); a.status != http.StatusNotFound || !strings.Contains(a.body, "no such disbursement") {
		t.Errorf("no such: %d %s", a.status, a.body)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
