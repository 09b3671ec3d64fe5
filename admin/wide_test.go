package admin_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/review"
	"github.com/paylock/paylock/store"
)

// TestWideIDsAndCursorsAreNeverA500: ids and cursors are int64 end to
// end. One above 2^31-1 (where an inferred int4 parameter overflowed into
// a 500) is an ordinary value: a page, or no such item; one beyond int64,
// or not a number, is a 400 problem (HTML on the console's pages).
func TestWideIDsAndCursorsAreNeverA500(t *testing.T) {
	t.Parallel()
	_, st := paylocktest.MigratedSchema(t)
	if _, err := st.Deliveries().Keep(context.Background(), store.Delivery{Source: "stripe", EventID: "evt_1", Outcome: store.DeliveryIgnored,
		Status: 200, Body: []byte(`{"id":"evt_1"}`), RequestID: "r"}); err != nil {
		t.Fatal(err)
	}
	q := review.New(st.Review(), payout.NewClient("http://127.0.0.1:1", nil))
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(), Review: q,
		Console: consoleStore(st), Deliveries: st.Deliveries(), Disbursements: st.Disbursements()}))
	t.Cleanup(srv.Close)
	header := map[string]string{"Authorization": "Bearer " + adminTestToken, "Content-Type": "application/json"}
	const wide, huge = "2147483648", "9223372036854775808"
	for _, tc := range []struct {
		method, path string
		status       int
		contains     string
	}{
		{"GET", "/admin/deliveries?before=" + wide, 200, `"evt_1"`},
		{"GET", "/admin/deliveries?before=9223372036854775807", 200, `"evt_1"`},
		{"GET", "/admin/deliveries?before=" + huge, 400, "before"},
		{"GET", "/admin/deliveries?before=" + wide, 200, "evt_1"},
		{"GET", "/admin/deliveries/" + wide, 404, ""},
		{"GET", "/disbursements/loan-1/" + wide, 400, "tranche"},
		{"GET", "/admin/review?kind=forward", 200, ""},
	} {
		a := adminDo(t, srv, tc.method, tc.path, nil, header, nil)
		if a.status != tc.status || !strings.Contains(a.body, tc.contains) {
			t.Errorf("%s %s: %d %.200s, want %d with %q", tc.method, tc.path, a.status, a.body, tc.status, tc.contains)
		}
	}
	for _, kind := range []string{"mismatch", "disbursement", "forward", "lifecycle", "order"} {
		for _, tc := range []struct {
			num    string
			status int
		}{{wide, 404}, {"9223372036854775807", 404}, {huge, 400}, {"x", 400}, {"0", 400}, {"-1", 400}} {
			id := kind + "-" + tc.num
			action := store.ReviewActions[store.ReviewKind(kind)][0]
			for _, req := range []struct{ method, path, body string }{
				{"GET", "/admin/review/" + id, ""},
				{"POST", "/admin/review/" + id + "/resolve", `{"action":"` + action + `","note":"seen"}`},
				{"GET", "/admin/review/" + id, "html"},
			} {
				h, body, wantCT := header, req.body, "application/problem+json"
				if body == "html" {
					h = map[string]string{"Authorization": header["Authorization"], "Accept": "text/html"}
					body, wantCT = "", "text/html; charset=utf-8"
				}
				a := adminDo(t, srv, req.method, req.path, strings.NewReader(body), h, nil)
				ct := a.header.Get("Content-Type")
				if a.status != tc.status || ct != wantCT {
					t.Errorf("%s %s: %d %s %.200s, want %d %s", req.method, req.path, a.status, ct, a.body, tc.status, wantCT)
				}
			}
		}
	}
}
