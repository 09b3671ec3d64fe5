package stripe

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakestripe"
	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

// thinSettings are a thin source's settings, with more (key, JSON value)
// pairs.
func thinSettings(more ...string) provider.Settings {
	s := provider.Settings{KeyThin: json.RawMessage(`true`)}
	for i := 0; i+1 < len(more); i += 2 {
		s[more[i]] = json.RawMessage(more[i+1])
	}
	return s
}

// newThin is the adapter of a thin source with settings.
func newThin(t testing.TB, settings provider.Settings) provider.Notifier {
	t.Helper()
	a, err := Provider{}.New(provider.Config{Source: "stripe-thin", Rules: payload.NewRules("", nil), Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := a.(provider.Notifier)
	if !ok {
		t.Fatalf("the adapter of a thin source is a %T, not a provider.Notifier", a)
	}
	return n
}

func TestThinNoticesNameThePaymentIntentTheyAreAbout(t *testing.T) {
	t.Parallel()
	a := newThin(t, thinSettings())
	for _, tc := range []struct {
		name string
		body []byte
		want []provider.Notice
	}{
		{"v1.payment_intent.succeeded", sample("thin_payment_intent.succeeded.json"), []provider.Notice{
			{Ref: "pi_3QpaylockPI0001", EventID: "evt_test_65RpaylockThinPI0001", Type: "v1.payment_intent.succeeded"}}},
		{"v1.payment_intent.canceled, with its request", sample("thin_payment_intent.canceled.json"), []provider.Notice{
			{Ref: "pi_3QpaylockPI0002", EventID: "evt_test_65RpaylockThinPC0001", Type: "v1.payment_intent.canceled"}}},
		{"a live event id", thinEvent(`"evt_test_1"`, `"evt_65RCjj4EqW1sabcjs2Z16RCMoNQdSQkOWvfL6L5uU2K40u"`), []provider.Notice{
			{Ref: "pi_1", EventID: "evt_65RCjj4EqW1sabcjs2Z16RCMoNQdSQkOWvfL6L5uU2K40u", Type: "v1.payment_intent.succeeded"}}},
		{"a type that is not final is fetched too", thinEvent(`.succeeded`, `.processing`), []provider.Notice{
			{Ref: "pi_1", EventID: "evt_test_1", Type: "v1.payment_intent.processing"}}},
		{"members it does not read, of any shape", thinEvent(`"reason":null`, `"reason":{"type":"request","request":{"id":"req_1","idempotency_key":null}},`+
			`"changes":{"before":{"status":"processing"},"after":{"status":"succeeded"}},"snapshot_event":"evt_3Q1","data":[1]`), []provider.Notice{
			{Ref: "pi_1", EventID: "evt_test_1", Type: "v1.payment_intent.succeeded"}}},
		{"related_object without a url", thinEvent(`,"url":"/v1/payment_intents/pi_1"`, ``), []provider.Notice{
			{Ref: "pi_1", EventID: "evt_test_1", Type: "v1.payment_intent.succeeded"}}},
		{"an empty context is the account's own", thinEvent(`"context":null`, `"context":""`), []provider.Notice{
			{Ref: "pi_1", EventID: "evt_test_1", Type: "v1.payment_intent.succeeded"}}},
		{"a Charge", sample("thin_charge.succeeded.json"), nil},
		{"a billing Meter", sample("thin_billing.meter.error_report_triggered.json"), nil},
		{"a Refund", thinEvent(`"pi_1"`, `"re_1"`, `"payment_intent"`, `"refund"`, `.payment_intent.succeeded`, `.refund.created`), nil},
		{"a Dispute", thinEvent(`"pi_1"`, `"du_1"`, `"payment_intent"`, `"dispute"`, `.payment_intent.succeeded`, `.charge.dispute.created`), nil},
		{"a v2 Account", thinEvent(`"pi_1"`, `"acct_1"`, `"payment_intent"`, `"v2.core.account"`, `v1.payment_intent.succeeded`, `v2.core.account.closed`), nil},
		{"related_object null", thinEvent(`{"id":"pi_1","type":"payment_intent","url":"/v1/payment_intents/pi_1"}`, `null`), nil},
		{"related_object absent", thinEvent(`,"related_object":{"id":"pi_1","type":"payment_intent","url":"/v1/payment_intents/pi_1"}`, ``), nil},
		{"a connected account's PaymentIntent", thinEvent(`"context":null`, `"context":"acct_1"`), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := a.Notices(tc.body, "")
			if err != nil {
				t.Fatalf("Notices: %v", err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Notices = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestThinNoticesRefuseMalformedEvents(t *testing.T) {
	t.Parallel()
	a := newThin(t, thinSettings())
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
		field  string
	}{
		{"not JSON", []byte(`{"id":`), 400, ""},
		{"an array", []byte(`[]`), 400, ""},
		{"trailing data", append(thinEvent(), `{}`...), 400, ""},
		{"invalid UTF-8", thinEvent(`"evt_test_1"`, "\"evt_\xff\""), 400, ""},
		{"a snapshot event", sample("payment_intent.succeeded.json"), 422, "object"},
		{"a snapshot event of an ignored type", sample("customer.created.json"), 422, "object"},
		{"object missing", thinEvent(`"object":"v2.core.event",`, ``), 422, "object"},
		{"object of another kind", thinEvent(`"v2.core.event"`, `"v2.core.event_destination"`), 422, "object"},
		{"object null", thinEvent(`"v2.core.event"`, `null`), 400, "object"},
		{"object case-variant", thinEvent(`"object"`, `"Object"`), 400, "object"},
		{"id missing", thinEvent(`"id":"evt_test_1",`, ``), 422, "id"},
		{"id a number", thinEvent(`"evt_test_1"`, `1`), 400, "id"},
		{"id not an event's", thinEvent(`"evt_test_1"`, `"pi_2"`), 422, "id"},
		{"id the bare prefix", thinEvent(`"evt_test_1"`, `"evt_"`), 422, "id"},
		{"id with a space", thinEvent(`"evt_test_1"`, `"evt_test 1"`), 422, "id"},
		{"id too long", thinEvent(`"evt_test_1"`, `"evt_`+strings.Repeat("x", 252)+`"`), 422, "id"},
		{"id repeated", thinEvent(`"id":"evt_test_1"`, `"id":"evt_test_1","id":"evt_test_2"`), 400, "id"},
		{"type missing", thinEvent(`"type":"v1.payment_intent.succeeded",`, ``), 422, "type"},
		{"type empty", thinEvent(`"v1.payment_intent.succeeded"`, `""`), 422, "type"},
		{"type with a newline", thinEvent(`"v1.payment_intent.succeeded"`, `"v1.payment_intent\nsucceeded"`), 422, "type"},
		{"type an array", thinEvent(`"v1.payment_intent.succeeded"`, `["v1.payment_intent.succeeded"]`), 400, "type"},
		{"context a number", thinEvent(`"context":null`, `"context":1`), 400, "context"},
		{"context case-variant", thinEvent(`"context":null`, `"context":null,"Context":"acct_1"`), 400, "context"},
		{"related_object a string", thinEvent(`{"id":"pi_1","type":"payment_intent","url":"/v1/payment_intents/pi_1"}`, `"pi_1"`), 400, "related_object"},
		{"related_object case-variant", thinEvent(`"related_object"`, `"Related_Object"`), 400, "related_object"},
		{"related_object without a type", thinEvent(`,"type":"payment_intent"`, ``), 422, "related_object.type"},
		{"related_object without an id", thinEvent(`"id":"pi_1",`, ``), 422, "related_object.id"},
		{"related_object's type null", thinEvent(`"type":"payment_intent"`, `"type":null`), 400, "related_object.type"},
		{"related_object's id a number, of a Charge", thinEvent(`"id":"pi_1","type":"payment_intent"`, `"id":1,"type":"charge"`), 400, "related_object.id"},
		{"related_object's id repeated", thinEvent(`"id":"pi_1"`, `"id":"pi_1","id":"pi_2"`), 400, "related_object.id"},
		{"a PaymentIntent's id that is not pi_", thinEvent(`"pi_1"`, `"ch_1"`), 422, "related_object.id"},
		{"a PaymentIntent's id with a slash", thinEvent(`"id":"pi_1"`, `"id":"pi_1/../../v1/charges"`), 422, "related_object.id"},
		{"a PaymentIntent's id too long", thinEvent(`"id":"pi_1"`, `"id":"pi_`+strings.Repeat("1", 253)+`"`), 422, "related_object.id"},
		{"a PaymentIntent's id with a NUL escape", thinEvent(`"id":"pi_1"`, `"id":"pi_1\u0000"`), 422, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := a.Notices(tc.body, "")
			if got != nil {
				t.Errorf("notices %+v returned with a refusal", got)
			}
			providertest.WantRefused(t, err, tc.status, tc.field)
		})
	}
}

// TestThinSourceRefusesSnapshotEventsSayingItTakesThinOnes: a snapshot
// event sent to a thin source is refused, never recorded, and the answer
// says why.
func TestThinSourceRefusesSnapshotEventsSayingItTakesThinOnes(t *testing.T) {
	t.Parallel()
	_, err := newThin(t, thinSettings()).Notices(sample("payment_intent.succeeded.json"), "")
	var pe *payload.Error
	if !errors.As(err, &pe) || !errors.Is(err, payload.ErrInvalid) || !strings.Contains(pe.Detail, "thin events") {
		t.Fatalf("Notices(a snapshot event) = %v, want a 422 saying the source takes thin events", err)
	}
}

// TestThinSamplesHoldTogether: every notice's ref is answered by exactly
// one delivery, every delivery answers a notice's ref and records its
// events, every refusal is refused by Notices, and the secret is the
// snapshot samples'.
func TestThinSamplesHoldTogether(t *testing.T) {
	t.Parallel()
	s := ThinSamples()
	a := newThin(t, s.Settings)
	if s.Secret == "" || s.Secret != (Provider{}).Samples().Secret {
		t.Errorf("Secret %q, want the snapshot samples'", s.Secret)
	}
	named := map[string]int{}
	for _, n := range s.Notices {
		got, err := a.Notices(n.Body, n.HeaderID)
		if err != nil {
			t.Errorf("notice %s: %v", n.Name, err)
			continue
		}
		var refs []string
		for _, g := range got {
			refs = append(refs, g.Ref)
		}
		if !slices.Equal(refs, n.Refs) {
			t.Errorf("notice %s names %q, its sample says %q", n.Name, refs, n.Refs)
		}
		if n.ContentType != "" {
			t.Errorf("notice %s: content type %q, want \"\" (application/json)", n.Name, n.ContentType)
		}
		for _, r := range n.Refs {
			named[r]++
		}
	}
	answered := map[string]bool{}
	for _, d := range s.Deliveries {
		t.Run(d.Name, func(t *testing.T) {
			if named[d.Ref] == 0 {
				t.Errorf("ref %q is named by no notice", d.Ref)
			}
			if answered[d.Ref] {
				t.Errorf("ref %q is answered twice", d.Ref)
			}
			answered[d.Ref] = true
			events, err := a.Adapt(d.Body, d.HeaderID)
			providertest.CheckAdapted(t, events, err)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(d.Events)
			for i := range want {
				if want[i].Payload == nil {
					want[i].Payload = d.Body
				}
			}
			providertest.WantEvents(t, events, want)
		})
	}
	for r := range named {
		if !answered[r] {
			t.Errorf("ref %q is named by a notice but answered by no delivery", r)
		}
	}
	for _, r := range s.Refused {
		got, err := a.Notices(r.Body, "")
		if got != nil || err == nil {
			t.Errorf("refused %s: Notices = %+v, %v", r.Name, got, err)
			continue
		}
		providertest.WantRefused(t, err, r.Status, "*")
	}
}

// TestThinSamplesAreWhatTheFetcherReturns: each sample delivery is, byte
// for byte, what the source's fetcher returns when Stripe's API answers
// the PaymentIntent it carries, at the samples' time.
func TestThinSamplesAreWhatTheFetcherReturns(t *testing.T) {
	t.Parallel()
	const key = "sk_test_thin"
	api := fakestripe.New(key)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	f := fetcher{api: API{BaseURL: srv.URL, Key: key}, now: func() time.Time { return thinFetchedAt }}
	for _, d := range ThinSamples().Deliveries {
		var ev struct {
			Data struct {
				Object json.RawMessage `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal(d.Body, &ev); err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		api.PutPaymentIntent(ev.Data.Object)
		body, _, err := f.Fetch(t.Context(), d.Ref)
		if err != nil || string(body) != string(d.Body) {
			t.Errorf("%s: Fetch(%s) = %s, %v;\nthe sample is %s", d.Name, d.Ref, body, err, d.Body)
		}
	}
}

// TestThinEventIsRecordedAsStripesAPIAnswersItsPaymentIntent: end to end
// without the pipeline, a thin event's ref fetched by the source's real
// fetcher from (a fake of) Stripe's API, then adapted, records the
// PaymentIntent's state now, under sync:<pi>:<status>; a state that is
// not final records nothing; an unknown PaymentIntent is
// ErrNoSuchPayment.
func TestThinEventIsRecordedAsStripesAPIAnswersItsPaymentIntent(t *testing.T) {
	t.Parallel()
	const key = "sk_test_thin_e2e"
	api := fakestripe.New(key)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	settings := thinSettings(provider.KeyAPIKeyEnv, `"STRIPE_THIN_KEY"`, provider.KeyAPIURL, `"`+srv.URL+`"`)
	a := newThin(t, settings)
	f, err := Provider{}.NewFetcher(provider.ListerConfig{Source: "stripe-thin", Settings: settings, URL: srv.URL, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		typ, status string
		want        []provider.Event // Payload is the fetched body
	}{
		{"v1.payment_intent.succeeded", "succeeded", []provider.Event{{TransactionID: "pi_thin_succeeded", Amount: 1200, Currency: "JPY"}}},
		{"v1.payment_intent.amount_capturable_updated", "requires_capture",
			[]provider.Event{{Kind: lifecycle.Authorized, TransactionID: "pi_thin_requires_capture", Amount: 1200, Currency: "JPY"}}},
		{"v1.payment_intent.canceled", "canceled", []provider.Event{{Kind: lifecycle.Canceled, TransactionID: "pi_thin_canceled", Amount: 1200, Currency: "JPY"}}},
		{"v1.payment_intent.processing", "processing", nil},
		{"v1.payment_intent.created", "requires_payment_method", nil},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			pi := "pi_thin_" + tc.status
			api.PutPaymentIntent(fakestripe.PaymentIntent(fakestripe.Payment{ID: pi, Amount: 1200, Currency: "jpy", Created: time.Now()}, tc.status))
			notices, err := a.Notices(thinEvent(`pi_1`, pi, `v1.payment_intent.succeeded`, tc.typ), "")
			if err != nil || len(notices) != 1 || notices[0].Ref != pi {
				t.Fatalf("Notices = %+v, %v; want one of %s", notices, err, pi)
			}
			body, status, err := f.Fetch(t.Context(), notices[0].Ref)
			if err != nil || status != tc.status {
				t.Fatalf("Fetch(%s) = status %q, %v", pi, status, err)
			}
			if tc.want == nil {
				if body != nil {
					t.Fatalf("a %s PaymentIntent fetched as %s, want no body", tc.status, body)
				}
				return
			}
			events, err := a.Adapt(body, "")
			providertest.CheckAdapted(t, events, err)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				tc.want[i].EventID = SyncEventPrefix + pi + ":" + tc.status
				tc.want[i].Payload = body
				if tc.want[i].Kind != "" {
					tc.want[i].At = events[0].At // the fetch's time, checked below
				}
			}
			providertest.WantEvents(t, events, tc.want)
			if tc.want[0].Kind != "" && time.Since(events[0].At) > time.Minute {
				t.Errorf("a fetched %s event dated %v, want the fetch's time", tc.status, events[0].At)
			}
		})
	}
	notices, err := a.Notices(thinEvent(`pi_1`, `pi_nobody`), "")
	if err != nil || len(notices) != 1 {
		t.Fatalf("Notices = %+v, %v", notices, err)
	}
	if _, _, err := f.Fetch(t.Context(), notices[0].Ref); !errors.Is(err, provider.ErrNoSuchPayment) {
		t.Errorf("an unknown PaymentIntent: %v, want ErrNoSuchPayment", err)
	}
}

// TestThinAdapterRecordsOnlyWhatStripesAPIAnswers: the thin adapter's
// Adapt reads the API's snapshot events as a snapshot source's adapter
// does, and a thin event, should one reach it, records nothing.
func TestThinAdapterRecordsOnlyWhatStripesAPIAnswers(t *testing.T) {
	t.Parallel()
	thin := newThin(t, thinSettings())
	snapshot := newAdapter(t, nil)
	for _, file := range []string{"payment_intent.succeeded.json", "payment_intent.canceled.json", "charge.refunded.json",
		"charge.dispute.closed.json", "customer.created.json"} {
		body := sample(file)
		got, err := thin.Adapt(body, "")
		want, wantErr := snapshot.Adapt(body, "")
		if err != nil || wantErr != nil {
			t.Fatalf("%s: %v, %v", file, err, wantErr)
		}
		providertest.WantEvents(t, got, want)
	}
	events, err := thin.Adapt(sample("thin_payment_intent.succeeded.json"), "")
	if events != nil {
		t.Errorf("a thin event adapted into %+v", events)
	}
	providertest.WantRefused(t, err, 422, "object")
	if _, isNotifier := snapshot.(provider.Notifier); isNotifier {
		t.Error("a snapshot source's adapter is a provider.Notifier")
	}
	if _, typed := thin.(provider.Typed); !typed {
		t.Error("a thin source's adapter is no provider.Typed")
	}
}

func TestNewChecksTheThinSetting(t *testing.T) {
	t.Parallel()
	rules := payload.NewRules("", nil)
	for _, tc := range []struct {
		name     string
		settings provider.Settings
		notifier bool
	}{
		{"thin", thinSettings(), true},
		{"thin false", provider.Settings{KeyThin: json.RawMessage(`false`)}, false},
		{"thin with its API", thinSettings(provider.KeyAPIKeyEnv, `"STRIPE_KEY"`, provider.KeyAPIURL, `"https://api.stripe.com"`), true},
		{"thin with events of PaymentIntents", thinSettings("events", `["payment_intent.succeeded","payment_intent.canceled"]`), true},
		{"thin with events of both", thinSettings("events", `["payment_intent.succeeded","charge.succeeded"]`), true},
	} {
		a, err := Provider{}.New(provider.Config{Source: "s", Rules: rules, Settings: tc.settings})
		if err != nil {
			t.Errorf("%s: New: %v", tc.name, err)
			continue
		}
		if _, ok := a.(provider.Notifier); ok != tc.notifier {
			t.Errorf("%s: the adapter is a Notifier: %v, want %v", tc.name, ok, tc.notifier)
		}
		if _, err := (Provider{}).NewFetcher(provider.ListerConfig{Source: "s", Settings: tc.settings}); err != nil {
			t.Errorf("%s: NewFetcher: %v", tc.name, err)
		}
		if _, err := (Provider{}).NewLister(provider.ListerConfig{Source: "s", Settings: tc.settings}); err != nil {
			t.Errorf("%s: NewLister: %v", tc.name, err)
		}
	}
	for _, tc := range []struct {
		name     string
		settings provider.Settings
		key      string
		want     string
	}{
		{"a string", provider.Settings{KeyThin: json.RawMessage(`"true"`)}, KeyThin, "want true"},
		{"a number", provider.Settings{KeyThin: json.RawMessage(`1`)}, KeyThin, "want true"},
		{"null", provider.Settings{KeyThin: json.RawMessage(`null`)}, KeyThin, "want true"},
		{"an object", provider.Settings{KeyThin: json.RawMessage(`{}`)}, KeyThin, "want true"},
		{"yes", provider.Settings{KeyThin: json.RawMessage(`"yes"`)}, KeyThin, "want true"},
		{"with events of Charges alone", thinSettings("events", `["charge.succeeded"]`), "events", "must list payment_intent.succeeded"},
		{"with events of lifecycles alone", thinSettings("events", `["payment_intent.canceled"]`), "events", "must list payment_intent.succeeded"},
		{"with a bad event", thinSettings("events", `["v1.payment_intent.succeeded"]`), "events", "unknown Stripe event"},
	} {
		_, err := Provider{}.New(provider.Config{Source: "s", Rules: rules, Settings: tc.settings})
		var se *provider.SettingError
		if !errors.As(err, &se) || se.Key != tc.key || !strings.Contains(se.Err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want a *SettingError of %s saying %q", tc.name, err, tc.key, tc.want)
		}
		_, ferr := Provider{}.NewFetcher(provider.ListerConfig{Source: "s", Settings: tc.settings})
		if !errors.As(ferr, &se) || se.Key != tc.key {
			t.Errorf("%s: NewFetcher = %v, want the *SettingError of %s New gives", tc.name, ferr, tc.key)
		}
	}
	if !slices.Contains(Provider{}.Keys(), KeyThin) {
		t.Errorf("Keys %q leave out %s", Provider{}.Keys(), KeyThin)
	}
}

// TestThinSourceHonoursItsEvents: a fetched PaymentIntent whose event
// type a thin source does not list is acknowledged, not recorded.
func TestThinSourceHonoursItsEvents(t *testing.T) {
	t.Parallel()
	a := newThin(t, thinSettings("events", `["payment_intent.succeeded"]`))
	for _, d := range ThinSamples().Deliveries {
		events, err := a.Adapt(d.Body, "")
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		want := 0
		if d.Events[0].Kind == "" { // payment_intent.succeeded
			want = 1
		}
		if len(events) != want {
			t.Errorf("%s: %d events, want %d", d.Name, len(events), want)
		}
	}
}
