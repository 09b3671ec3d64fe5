package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// keptDeliveries starts an admin listener with the console and the
// delivery log over a schema holding n ignored stripe deliveries, one
// refused adyen delivery with a hostile body, and returns the server and
// the refused one's id.
func keptDeliveries(t *testing.T, n int) (*httptest.Server, int64) {
	t.Helper()
	_, st := paylocktest.MigratedSchema(t)
	ctx := context.Background()
	for i := range n {
		if _, err := st.Deliveries().Keep(ctx, store.Delivery{Source: "stripe", EventID: fmt.Sprint("evt_", i), Outcome: store.DeliveryIgnored,
			Status: 200, Body: []byte(fmt.Sprintf(`{"id":"evt_%d","type":"charge.succeeded"}`, i)), RequestID: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	id, err := st.Deliveries().Keep(ctx, store.Delivery{Source: "adyen", Outcome: store.DeliveryRefused, Status: 400,
		ProblemType: "https://example/#invalid", ProblemDetail: "amount <b>must</b> be a number",
		Body: []byte(`{"note":"<script>alert(1)</script>"}`), Headers: map[string][]string{"User-Agent": {"Adyen"}}, RequestID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(),
		Console: consoleStore(st), Deliveries: st.Deliveries()}))
	t.Cleanup(srv.Close)
	return srv, id
}

func TestAdminDeliveriesListsPagesAndShowsOne(t *testing.T) {
	t.Parallel()
	srv, refused := keptDeliveries(t, 5)
	bearer := map[string]string{"Authorization": "Bearer " + adminTestToken}
	get := func(path string, v any) adminAnswer {
		t.Helper()
		a := adminDo(t, srv, http.MethodGet, path, nil, bearer, nil)
		if v != nil && a.status == http.StatusOK {
			if err := json.Unmarshal([]byte(a.body), v); err != nil {
				t.Fatalf("%s: %v in %s", path, err, a.body)
			}
		}
		return a
	}
	if a := adminDo(t, srv, http.MethodGet, "/admin/deliveries", nil, nil, nil); a.status != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", a.status)
	}
	type list struct {
		Deliveries []struct {
			ID      int64
			Source  string
			Outcome string
			Body    *string
		}
		Next string
	}
	var page list
	if a := get("/admin/deliveries?source=stripe&outcome=ignored&since=1h&limit=3", &page); a.status != 200 || len(page.Deliveries) != 3 || page.Next == "" {
		t.Fatalf("first page: %d %s", a.status, a.body)
	}
	if page.Deliveries[0].Body != nil || page.Deliveries[0].Source != "stripe" {
		t.Fatalf("a listing carries bodies or other sources: %+v", page.Deliveries[0])
	}
	var rest list
	if a := get(page.Next, &rest); a.status != 200 || len(rest.Deliveries) != 2 || rest.Next != "" || rest.Deliveries[0].ID >= page.Deliveries[2].ID {
		t.Fatalf("next page %s: %d %s", page.Next, a.status, a.body)
	}
	var one struct {
		Outcome       string
		ProblemDetail string `json:"problem_detail"`
		Body          string
		Headers       map[string][]string
	}
	if a := get(fmt.Sprint("/admin/deliveries/", refused), &one); a.status != 200 || one.Body != `{"note":"<script>alert(1)</script>"}` || one.Outcome != "refused" ||
		one.ProblemDetail != "amount <b>must</b> be a number" ||
		one.Headers["User-Agent"][0] != "Adyen" {
		t.Fatalf("one delivery: %d %s", a.status, a.body)
	}
	for path, status := range map[string]int{
		"/admin/deliveries/999999":        404,
		"/admin/deliveries/x":             400,
		"/admin/deliveries?outcome=lost":  400,
		"/admin/deliveries?since=someday": 400,
		"/admin/deliveries?limit=0":       400,
	} {
		if a := get(path, nil); a.status != status || !strings.Contains(a.header.Get("Content-Type"), "problem+json") {
			t.Errorf("%s: %d %s, want %d problem+json", path, a.status, a.body, status)
		}
	}
	if a := adminDo(t, srv, http.MethodPost, "/admin/deliveries", nil, bearer, nil); a.status != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", a.status)
	}
}

func TestConsoleDeliveryLogFiltersAndShowsTheBodyEscaped(t *testing.T) {
	t.Parallel()
	srv, refused := keptDeliveries(t, 2)
	l := login(t, srv, adminTestToken, "/admin/deliveries")
	if l.cookie == nil {
		t.Fatalf("login: %d", l.status)
	}
	list := adminDo(t, srv, http.MethodGet, "/admin/deliveries?outcome=refused", nil, nil, l.cookie)
	if list.status != 200 || !strings.Contains(list.body, fmt.Sprintf(`href="/admin/deliveries/%d"`, refused)) ||
		strings.Contains(list.body, "evt_0") || !strings.Contains(list.body, `>Delivery log</a>`) || strings.Contains(list.body, "<b>must") {
		t.Fatalf("list: %d %s", list.status, list.body)
	}
	page := adminDo(t, srv, http.MethodGet, fmt.Sprint("/admin/deliveries/", refused), nil, nil, l.cookie)
	if page.status != 200 || strings.Contains(page.body, "<script>") || !strings.Contains(page.body, "&lt;script&gt;alert(1)") ||
		!strings.Contains(page.body, "User-Agent: Adyen") {
		t.Fatalf("delivery page: %d %s", page.status, page.body)
	}
	if a := adminDo(t, srv, http.MethodGet, "/admin/deliveries?since=someday", nil, nil, l.cookie); a.status != http.StatusBadRequest {
		t.Fatalf("a bad filter: %d", a.status)
	}
	if a := adminDo(t, srv, http.MethodGet, "/admin/deliveries/999999", nil, nil, l.cookie); a.status != http.StatusNotFound {
		t.Fatalf("an unknown delivery: %d", a.status)
	}
}
