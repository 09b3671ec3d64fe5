package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// fakeDestinations is a DestinationView over fixed rows; a resume makes a
// parked row healthy.
type fakeDestinations struct {
	mu   sync.Mutex
	rows []admin.Destination
}

func (f *fakeDestinations) ListDestinations(context.Context) ([]admin.Destination, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]admin.Destination(nil), f.rows...), nil
}

func (f *fakeDestinations) ResumeDestination(_ context.Context, name string) (admin.DestinationResume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.rows {
		if r.Name == name {
			moved := r.State == "parked"
			f.rows[i].State, f.rows[i].NextProbeSeconds = "healthy", nil
			return admin.DestinationResume{Destination: name, Moved: moved, Released: r.Backlog}, nil
		}
	}
	return admin.DestinationResume{}, fmt.Errorf("%w: destination %q", store.ErrNotFound, name)
}

// docDestinations are the destinations of the documentation's listener:
// crm parked, ledger healthy.
func docDestinations() *fakeDestinations {
	since := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	probe := int64(4)
	return &fakeDestinations{rows: []admin.Destination{
		{Name: "crm", State: "parked", URL: "https://crm.internal/hooks", Types: []string{"payment.*"}, Sources: []string{"stripe"},
			Backlog: 42, LagSeconds: 61, LastError: "forward: the receiver answered 500", LastErrorAt: &since, StateSince: &since, NextProbeSeconds: &probe},
		{Name: "ledger", State: "healthy", URL: "https://xxxxx@ledger.internal/hooks?token=xxxxx", Types: []string{"*"}, Filter: "data.amount >= 1000",
			Sources: []string{"stripe"}, Backlog: 3},
	}}
}

func TestDestinationsPageShowsEachStateAndResumesAParkedOne(t *testing.T) {
	t.Parallel()
	_, st := paylocktest.MigratedSchema(t)
	since := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	probe := int64(4)
	f := &fakeDestinations{rows: []admin.Destination{
		{Name: "crm", State: "parked", URL: "https://crm.internal/hooks?token=xxxxx", Types: []string{"payment.*"}, Sources: []string{"stripe"},
			Backlog: 42, LagSeconds: 61, LastError: "forward: the receiver answered 500 <b>", StateSince: &since, NextProbeSeconds: &probe},
		{Name: "ledger", State: "healthy", URL: "https://ledger.internal/hooks", Types: []string{"*"}, Filter: "data.amount >= 1000", Sources: []string{"stripe"}},
	}}
	srv := httptest.NewServer(admin.New(admin.Config{Token: adminTestToken, Logger: testkit.Logger(),
		Tokens: []admin.Token{{Name: "alice", Token: aliceToken}}, Console: consoleStore(st), ForwardDestinations: f}))
	t.Cleanup(srv.Close)

	bearer := map[string]string{"Authorization": "Bearer " + adminTestToken}
	api := adminDo(t, srv, http.MethodGet, "/admin/api/v1/destinations", nil, bearer, nil)
	var listed struct{ Destinations []admin.Destination }
	if api.status != http.StatusOK || json.Unmarshal([]byte(api.body), &listed) != nil || len(listed.Destinations) != 2 ||
		listed.Destinations[0].State != "parked" || *listed.Destinations[0].NextProbeSeconds != 4 {
		t.Fatalf("GET the API: %d %s", api.status, api.body)
	}

	l := login(t, srv, aliceToken, "/admin/destinations")
	if l.cookie == nil {
		t.Fatalf("login: %d", l.status)
	}
	page := adminDo(t, srv, http.MethodGet, "/admin/destinations", nil, nil, l.cookie)
	for _, want := range []string{`href="/admin/destinations" aria-current="page"`, `<span class="state state-parked">parked</span>`,
		"next probe in 4s", "2026-12-03 10:00:00Z", `<span class="state state-healthy">healthy</span>`, "data.amount &gt;= 1000",
		"forward: the receiver answered 500 &lt;b&gt;", `action="/admin/destinations/crm/resume"`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page.body, `action="/admin/destinations/ledger/resume"`) {
		t.Error("a healthy destination has a Resume button")
	}
	m := csrfField.FindStringSubmatch(page.body)
	if page.status != http.StatusOK || m == nil {
		t.Fatalf("page: %d, csrf %v", page.status, m)
	}
	sameOrigin := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}
	post := func(name string, form url.Values) adminAnswer {
		return adminDo(t, srv, http.MethodPost, "/admin/destinations/"+name+"/resume", strings.NewReader(form.Encode()), sameOrigin, l.cookie)
	}
	if a := post("crm", url.Values{}); a.status != http.StatusForbidden {
		t.Fatalf("resume without the CSRF token: %d, want 403", a.status)
	}
	if a := post("nope", url.Values{"csrf": {m[1]}}); a.status != http.StatusNotFound {
		t.Fatalf("resume an unknown destination: %d, want 404", a.status)
	}
	a := post("crm", url.Values{"csrf": {m[1]}})
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/admin/destinations?released=42&resumed=crm" {
		t.Fatalf("resume: %d %v", a.status, a.header)
	}
	done := adminDo(t, srv, http.MethodGet, a.header.Get("Location"), nil, nil, l.cookie)
	if !strings.Contains(done.body, "Destination crm resumed: 42 waiting messages released.") ||
		!strings.Contains(done.body, `<span class="state state-healthy">healthy</span>`) || strings.Contains(done.body, "state-parked") {
		t.Errorf("after the resume: %s", done.body)
	}
	j := adminDo(t, srv, http.MethodPost, "/admin/api/v1/destinations/nope/resume", nil, bearer, nil)
	if j.status != http.StatusNotFound || !strings.Contains(j.header.Get("Content-Type"), "problem+json") {
		t.Errorf("the API's resume of an unknown destination: %d %s", j.status, j.header.Get("Content-Type"))
	}
}
