package gocardless

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

const (
	accessToken = "live_paylock-test-access-token-0123456789"
	wrongToken  = "live_paylock-revoked-access-token-98765"
)

// fakeGoCardless is GoCardless's API as the fetcher uses it: GET
// /payments/{id}, GET /refunds/{id} and GET /refunds?payment={id} (paged
// by pageSize, with meta.cursors.after), behind one access token and the
// GoCardless-Version header. It records every request.
type fakeGoCardless struct {
	pageSize int

	mu       sync.Mutex
	payments map[string]json.RawMessage
	refunds  map[string][]json.RawMessage // by payment
	requests []*http.Request
}

// newFake serves the payments and refunds of the sample deliveries, and
// the pending payment of api_pending.json.
func newFake(t *testing.T) (*fakeGoCardless, *httptest.Server) {
	t.Helper()
	api := &fakeGoCardless{pageSize: 2, payments: map[string]json.RawMessage{}, refunds: map[string][]json.RawMessage{}}
	bodies := [][]byte{sample("api_pending.json")}
	for _, d := range (Provider{}).Samples().Deliveries {
		bodies = append(bodies, d.Body)
	}
	for _, b := range bodies {
		var answer struct {
			Payments json.RawMessage   `json:"payments"`
			Refunds  []json.RawMessage `json:"refunds"`
		}
		var p struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &answer); err != nil || json.Unmarshal(answer.Payments, &p) != nil {
			t.Fatalf("sample %s: %v", b, err)
		}
		api.payments[p.ID], api.refunds[p.ID] = answer.Payments, answer.Refunds
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return api, srv
}

// gcError writes GoCardless's error document.
func gcError(w http.ResponseWriter, code int, typ, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"error":{"message":%q,"documentation_url":"https://developer.gocardless.com/api-reference#%s","type":%q,"request_id":"0AA0PAYLOCKFAKE","errors":[{"reason":%q,"message":%q}],"code":%d}}`,
		message, typ, typ, typ, message, code)
}

func (api *fakeGoCardless) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.requests = append(api.requests, r.Clone(context.Background()))
	switch {
	case r.Method != http.MethodGet:
		gcError(w, http.StatusMethodNotAllowed, "invalid_api_usage", "Method not allowed")
		return
	case r.Header.Get("Authorization") != "Bearer "+accessToken:
		gcError(w, http.StatusUnauthorized, "invalid_api_usage", "Invalid access token")
		return
	case r.Header.Get("GoCardless-Version") != APIVersion:
		gcError(w, http.StatusBadRequest, "invalid_api_usage", "version_not_found")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if id, ok := strings.CutPrefix(r.URL.Path, "/payments/"); ok {
		p, found := api.payments[id]
		if !found {
			gcError(w, http.StatusNotFound, "invalid_api_usage", "Resource not found")
			return
		}
		fmt.Fprintf(w, `{"payments":%s}`, p)
		return
	}
	if id, ok := strings.CutPrefix(r.URL.Path, "/refunds/"); ok {
		for _, rs := range api.refunds {
			for _, raw := range rs {
				if idOf(raw) == id {
					fmt.Fprintf(w, `{"refunds":%s}`, raw)
					return
				}
			}
		}
		gcError(w, http.StatusNotFound, "invalid_api_usage", "Resource not found")
		return
	}
	if r.URL.Path != "/refunds" {
		gcError(w, http.StatusNotFound, "invalid_api_usage", "Resource not found")
		return
	}
	all := api.refunds[r.URL.Query().Get("payment")]
	start := 0
	if after := r.URL.Query().Get("after"); after != "" {
		start = slices.IndexFunc(all, func(raw json.RawMessage) bool { return idOf(raw) == after }) + 1
		if start == 0 {
			gcError(w, http.StatusBadRequest, "invalid_api_usage", "invalid cursor")
			return
		}
	}
	end := min(start+api.pageSize, len(all))
	page := all[start:end]
	after := "null"
	if end < len(all) {
		after = strconv.Quote(idOf(page[len(page)-1]))
	}
	items := make([]string, len(page))
	for i, raw := range page {
		items[i] = string(raw)
	}
	fmt.Fprintf(w, `{"refunds":[%s],"meta":{"cursors":{"before":null,"after":%s},"limit":%s}}`,
		strings.Join(items, ","), after, r.URL.Query().Get("limit"))
}

// idOf is the id of a GoCardless resource.
func idOf(raw json.RawMessage) string {
	var r struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &r)
	return r.ID
}

// asked are the requests since the n-th, as "path?query".
func (api *fakeGoCardless) asked(n int) []string {
	api.mu.Lock()
	defer api.mu.Unlock()
	var out []string
	for _, r := range api.requests[n:] {
		out = append(out, r.URL.RequestURI())
	}
	return out
}

func (api *fakeGoCardless) count() int {
	api.mu.Lock()
	defer api.mu.Unlock()
	return len(api.requests)
}

// fetcherOf is a gocardless source's fetcher of the API at url with token.
func fetcherOf(t *testing.T, url, token string) provider.Fetcher {
	t.Helper()
	s, ok := provider.Provider(Provider{}).(provider.Syncer)
	if !ok {
		t.Fatal("Provider is not a provider.Syncer")
	}
	f, err := s.NewFetcher(provider.ListerConfig{Source: "gocardless", URL: url, Key: token,
		Settings: provider.Settings{provider.KeyAPIKeyEnv: json.RawMessage(`"GOCARDLESS_ACCESS_TOKEN"`)}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// noToken fails if err's text holds either token.
func noToken(t *testing.T, err error) {
	t.Helper()
	if err != nil && (strings.Contains(err.Error(), accessToken) || strings.Contains(err.Error(), wrongToken)) {
		t.Errorf("error %q reveals an access token", err)
	}
}

// TestFetchAnswersWhatEachSampleDeliveryIs: for each sample's ref, the
// fetcher asks GoCardless for the payment and its refunds (every page),
// and returns the sample's body, which records the sample's events.
func TestFetchAnswersWhatEachSampleDeliveryIs(t *testing.T) {
	t.Parallel()
	api, srv := newFake(t)
	f := fetcherOf(t, srv.URL, accessToken)
	a := newNotifier(t)
	for _, d := range (Provider{}).Samples().Deliveries {
		before := api.count()
		body, status, err := f.Fetch(t.Context(), d.Ref)
		if err != nil {
			t.Errorf("%s: %v", d.Name, err)
			continue
		}
		if !sameJSON(t, body, d.Body) {
			t.Errorf("%s: fetched %s, want %s", d.Name, body, d.Body)
		}
		var p struct {
			Payments struct{ Status string } `json:"payments"`
		}
		_ = json.Unmarshal(d.Body, &p)
		if status != p.Payments.Status {
			t.Errorf("%s: status %q, want %q", d.Name, status, p.Payments.Status)
		}
		got, err := a.Adapt(body, "")
		if err != nil {
			t.Errorf("%s: Adapt: %v", d.Name, err)
			continue
		}
		want := wanted(d)
		for i := range want {
			want[i].Payload = body
		}
		providertest.WantEvents(t, got, want)
		pm := want[0].TransactionID
		asked := []string{"/payments/" + pm, "/refunds?limit=500&payment=" + pm}
		if strings.HasPrefix(d.Ref, "RF") {
			asked = append([]string{"/refunds/" + d.Ref}, asked...)
		}
		if d.Ref == pmRefunded { // three refunds, two a page
			asked = append(asked, "/refunds?after="+rfBounced+"&limit=500&payment="+pm)
		}
		if got := api.asked(before); !slices.Equal(got, asked) {
			t.Errorf("%s: asked %q, want %q", d.Name, got, asked)
		}
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	for _, r := range api.requests {
		if r.Header.Get("Authorization") != "Bearer "+accessToken || r.Header.Get("GoCardless-Version") != "2015-07-06" ||
			r.Header.Get("Accept") != "application/json" || r.Method != http.MethodGet {
			t.Errorf("%s %s with headers %v", r.Method, r.URL, r.Header)
		}
	}
}

// TestFetchOfAPendingPaymentIsNoBody: nothing to record yet, its status
// said.
func TestFetchOfAPendingPaymentIsNoBody(t *testing.T) {
	t.Parallel()
	_, srv := newFake(t)
	body, status, err := fetcherOf(t, srv.URL, accessToken).Fetch(t.Context(), pmPending)
	if err != nil || body != nil || status != "pending_submission" {
		t.Fatalf("pending_submission: body %s, status %q, %v; want no body", body, status, err)
	}
}

// TestFetchAsksNothingAboutARefThatIsNoGoCardlessID: a malformed ref (a
// path, a query, another resource's id) is never sent to GoCardless.
func TestFetchAsksNothingAboutARefThatIsNoGoCardlessID(t *testing.T) {
	t.Parallel()
	api, srv := newFake(t)
	f := fetcherOf(t, srv.URL, accessToken)
	for _, ref := range []string{"", "PM", "pm0paylock0001", "PM0PAYLOCK0001 ", "PM0PAYLOCK0001/refunds", "PM0PAYLOCK0001?x=1",
		"../payments/PM0PAYLOCK0001", "PM0PAYLOCK%30001", "MD0PAYLOCK0001", "EV0PAYLOCK0001", "tr_12345",
		"PM" + strings.Repeat("0", 63), "PM0PAYLOCK000\u00c9"} {
		body, _, err := f.Fetch(t.Context(), ref)
		if body != nil || !errors.Is(err, provider.ErrNoSuchPayment) {
			t.Errorf("Fetch(%q) = %s, %v; want ErrNoSuchPayment", ref, body, err)
		}
	}
	if n := api.count(); n != 0 {
		t.Errorf("%d requests for malformed refs, want none", n)
	}
}

// TestFetchErrorsSayWhatGoCardlessSaid: an unknown payment or refund is
// ErrNoSuchPayment, a refused token ErrRefused, and no error holds the
// token.
func TestFetchErrorsSayWhatGoCardlessSaid(t *testing.T) {
	t.Parallel()
	api, srv := newFake(t)
	f := fetcherOf(t, srv.URL, accessToken)
	for _, ref := range []string{"PM0NOBODY0001", "RF0NOBODY0001"} {
		_, _, err := f.Fetch(t.Context(), ref)
		if !errors.Is(err, provider.ErrNoSuchPayment) || errors.Is(err, provider.ErrRefused) {
			t.Errorf("Fetch(%s) = %v, want ErrNoSuchPayment", ref, err)
		}
		noToken(t, err)
	}
	before := api.count()
	_, _, err := fetcherOf(t, srv.URL, wrongToken).Fetch(t.Context(), pmConfirmed)
	if !errors.Is(err, provider.ErrRefused) || errors.Is(err, provider.ErrNoSuchPayment) ||
		!strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "Invalid access token") {
		t.Errorf("a revoked token: %v, want ErrRefused saying GoCardless's 401", err)
	}
	noToken(t, err)
	if got := api.asked(before); len(got) != 1 {
		t.Errorf("a refused token asked %q, want the payment alone", got)
	}
	_, _, err = fetcherOf(t, srv.URL, "").Fetch(t.Context(), pmConfirmed)
	if !errors.Is(err, provider.ErrRefused) {
		t.Errorf("no token: %v, want ErrRefused", err)
	}
}

// TestFetchRefusalsAndFailuresAreToldApart: a 4xx but 429 wraps
// ErrRefused (trying again will not help); a 404 ErrNoSuchPayment; a 429,
// a 5xx, a network failure and a strange answer are plain errors, worth a
// retry.
func TestFetchRefusalsAndFailuresAreToldApart(t *testing.T) {
	t.Parallel()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for _, tc := range []struct {
		name           string
		url            string
		refused, no404 bool
	}{
		{"403", serve(t, 403, `{"error":{"message":"Your access token does not have permission","type":"invalid_api_usage","code":403}}`), true, false},
		{"400", serve(t, 400, `{"error":{"message":"Bad request","type":"invalid_api_usage","code":400}}`), true, false},
		{"404", serve(t, 404, `{"error":{"message":"Resource not found","type":"invalid_api_usage","code":404}}`), false, true},
		{"429", serve(t, 429, `{"error":{"message":"Rate limit exceeded","type":"invalid_api_usage","code":429}}`), false, false},
		{"500", serve(t, 500, `{"error":{"message":"Internal error","type":"gocardless","code":500}}`), false, false},
		{"503 of HTML", serve(t, 503, `<html>down</html>`), false, false},
		{"a network failure", gone.URL, false, false},
		{"200 of HTML", serve(t, 200, `<html>hello</html>`), false, false},
		{"200 of another payment", serve(t, 200, `{"payments":{"id":"PM0PAYLOCK0002","status":"confirmed"}}`), false, false},
		{"200 of no payment", serve(t, 200, `{"refunds":[]}`), false, false},
		{"200 of a payment without a status", serve(t, 200, `{"payments":{"id":"PM0PAYLOCK0001"}}`), false, false},
	} {
		body, _, err := fetcherOf(t, tc.url, accessToken).Fetch(t.Context(), pmConfirmed)
		if body != nil || err == nil || errors.Is(err, provider.ErrRefused) != tc.refused || errors.Is(err, provider.ErrNoSuchPayment) != tc.no404 {
			t.Errorf("%s: %s, %v; want refused %v, no such payment %v", tc.name, body, err, tc.refused, tc.no404)
		}
		noToken(t, err)
	}
}

// serve is the URL of a server answering status and body to everything.
func serve(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestFetchChecksTheRefundsAreThePayments: a listed refund of another
// payment, a repeated refund, a refund by id of no payment, or a cursor
// that does not move is an error, not a body.
func TestFetchChecksTheRefundsAreThePayments(t *testing.T) {
	t.Parallel()
	payment := `{"payments":{"id":"PM0PAYLOCK0001","amount":1000,"currency":"GBP","status":"confirmed"}}`
	refund := func(id, pm string) string {
		return `{"id":"` + id + `","amount":100,"currency":"GBP","status":"paid","links":{"payment":"` + pm + `"}}`
	}
	for _, tc := range []struct {
		name, ref, refundByID, list string
	}{
		{name: "a refund of another payment", ref: pmConfirmed,
			list: `{"refunds":[` + refund("RF0X1", "PM0PAYLOCK0002") + `],"meta":{"cursors":{"after":null}}}`},
		{name: "a refund listed twice", ref: pmConfirmed,
			list: `{"refunds":[` + refund("RF0X1", pmConfirmed) + `,` + refund("RF0X1", pmConfirmed) + `],"meta":{"cursors":{"after":null}}}`},
		{name: "a refund without an id", ref: pmConfirmed,
			list: `{"refunds":[{"amount":100,"status":"paid","links":{"payment":"PM0PAYLOCK0001"}}],"meta":{"cursors":{"after":null}}}`},
		{name: "a cursor that does not move", ref: pmConfirmed,
			list: `{"refunds":[` + refund("RF0X1", pmConfirmed) + `],"meta":{"cursors":{"after":"RF0X1"}}}`},
		{name: "a refund's answer of another refund", ref: "RF0X1", refundByID: `{"refunds":` + refund("RF0X2", pmConfirmed) + `}`},
		{name: "a refund's answer of a malformed payment", ref: "RF0X1", refundByID: `{"refunds":{"id":"RF0X1","links":{"payment":"MD0X1"}}}`},
	} {
		pages := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.HasPrefix(r.URL.Path, "/payments/"):
				_, _ = w.Write([]byte(payment))
			case strings.HasPrefix(r.URL.Path, "/refunds/"):
				_, _ = w.Write([]byte(tc.refundByID))
			default:
				pages++
				_, _ = w.Write([]byte(tc.list))
			}
		}))
		body, _, err := fetcherOf(t, srv.URL, accessToken).Fetch(t.Context(), tc.ref)
		srv.Close()
		if body != nil || err == nil || errors.Is(err, provider.ErrRefused) || errors.Is(err, provider.ErrNoSuchPayment) {
			t.Errorf("%s: %s, %v; want a plain error", tc.name, body, err)
		}
		if pages > 2 {
			t.Errorf("%s: %d pages asked", tc.name, pages)
		}
	}
}

// TestARefundOfAMandateNamesNoPayment: GoCardless's mandate refunds link
// a mandate, not a payment; fetched by the refund's id, there is no
// payment to record, and nothing more is asked.
func TestARefundOfAMandateNamesNoPayment(t *testing.T) {
	t.Parallel()
	for _, links := range []string{`{"mandate":"MD0X1"}`, `{"mandate":"MD0X1","payment":null}`} {
		asked := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked++
			_, _ = w.Write([]byte(`{"refunds":{"id":"RF0X1","amount":100,"currency":"GBP","status":"paid","links":` + links + `}}`))
		}))
		body, _, err := fetcherOf(t, srv.URL, accessToken).Fetch(t.Context(), "RF0X1")
		srv.Close()
		if body != nil || !errors.Is(err, provider.ErrNoSuchPayment) || asked != 1 {
			t.Errorf("links %s: %s, %v after %d requests; want ErrNoSuchPayment after one", links, body, err, asked)
		}
	}
}

// TestFetchReadsAtMostAMebibyte: an answer past MaxAnswerBytes is an
// error, read no further.
func TestFetchReadsAtMostAMebibyte(t *testing.T) {
	t.Parallel()
	huge := `{"payments":{"id":"PM0PAYLOCK0001","status":"confirmed","description":"` + strings.Repeat("x", MaxAnswerBytes) + `"}}`
	body, _, err := fetcherOf(t, serve(t, 200, huge), accessToken).Fetch(t.Context(), pmConfirmed)
	if body != nil || err == nil || !strings.Contains(err.Error(), "exceed") {
		t.Fatalf("a 1 MiB answer: %d bytes, %v", len(body), err)
	}
}

// TestFetchStopsWithItsContext: a canceled fetch says so.
func TestFetchStopsWithItsContext(t *testing.T) {
	t.Parallel()
	_, srv := newFake(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := fetcherOf(t, srv.URL, accessToken).Fetch(ctx, pmConfirmed)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a canceled fetch: %v", err)
	}
	noToken(t, err)
}

// TestNewFetcherChecksItsSettingsAndURL: what New refuses, and a URL that
// is no API's, is a *provider.SettingError; "" is GoCardless's live API,
// and no client is a client with a timeout.
func TestNewFetcherChecksItsSettingsAndURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, url string
		settings  provider.Settings
		key       string
	}{
		{"an unknown key", "", provider.Settings{"events": json.RawMessage(`[]`)}, "events"},
		{"a bad api_key_env", "", provider.Settings{provider.KeyAPIKeyEnv: json.RawMessage(`"live_x-y"`)}, provider.KeyAPIKeyEnv},
		{"credentials in the URL", "https://user:" + accessToken + "@api.gocardless.com", nil, provider.KeyAPIURL},
		{"no scheme", "api.gocardless.com", nil, provider.KeyAPIURL},
		{"ftp", "ftp://api.gocardless.com", nil, provider.KeyAPIURL},
	} {
		_, err := Provider{}.NewFetcher(provider.ListerConfig{Source: "gocardless", URL: tc.url, Key: accessToken, Settings: tc.settings})
		var se *provider.SettingError
		if !errors.As(err, &se) || se.Key != tc.key {
			t.Errorf("%s: %v, want a *provider.SettingError naming %s", tc.name, err, tc.key)
		}
		noToken(t, err)
	}
	f, err := Provider{}.NewFetcher(provider.ListerConfig{Source: "gocardless", Key: accessToken})
	if err != nil {
		t.Fatal(err)
	}
	got := f.(fetcher)
	if got.base != DefaultURL || got.client == nil || got.client.Timeout != 30*time.Second {
		t.Errorf("defaults: base %q, client %+v", got.base, got.client)
	}
	slash, _ := Provider{}.NewFetcher(provider.ListerConfig{Source: "gocardless", URL: "https://api-sandbox.gocardless.com/", Key: accessToken})
	if slash.(fetcher).base != "https://api-sandbox.gocardless.com" {
		t.Errorf("a trailing slash kept: %q", slash.(fetcher).base)
	}
}
