package providertest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// The suite of a Notifier provider (provider.Notifier), whose webhooks
// name payments that the pipeline fetches from the provider's API. Its
// Samples.Deliveries are the API's answers, each for its Ref, served by a
// fake of the source's Fetcher; its Samples.Notices are the webhooks. The
// suite checks that:
//
//   - the adapter alone reads each API answer into its events, byte for
//     byte, each notice into its refs, and refuses each refused body;
//   - every notice, signed with the provider's first scheme (or unsigned
//     for a provider that signs nothing), is answered 200 and records
//     exactly the events of the payments it names, as the API gives them;
//     delivered again, it records nothing more;
//   - a notice tampered with is refused 401, fetching and writing nothing;
//   - an API answer posted as a webhook is never recorded (a 4xx,
//     nothing fetched, nothing written): only what the API says is;
//   - every refused sample is answered with its status, fetching and
//     writing nothing.

// sampleAPI is the fake of a notifier source's Fetcher: the samples'
// deliveries by ref, each fetch counted.
type sampleAPI struct {
	bodies  map[string][]byte
	fetches atomic.Int64
}

func (a *sampleAPI) Fetch(_ context.Context, ref string) ([]byte, string, error) {
	a.fetches.Add(1)
	b, ok := a.bodies[ref]
	if !ok {
		return nil, "", fmt.Errorf("providertest: no sample delivery for %q: %w", ref, provider.ErrNoSuchPayment)
	}
	return b, "sample", nil
}

// notifierEnv is a notifier provider's pipeline.
type notifierEnv struct {
	*env
	api      *sampleAPI
	verifier bool // the source checks a signature
}

// runNotifier is the suite of a Notifier provider.
func runNotifier(t *testing.T, name string, p provider.Provider, s provider.Samples) {
	e := startNotifier(t, name, p, s)
	t.Run("the adapter alone", func(t *testing.T) { e.noticesAlone(t) })
	for i, n := range s.Notices {
		t.Run("notice "+n.Name, func(t *testing.T) {
			if e.verifier {
				e.tamperedNotice(t, i, n)
			}
			e.authenticNotice(t, i, n)
		})
	}
	for _, d := range s.Deliveries {
		t.Run("API answer "+d.Name+" posted as a webhook", func(t *testing.T) { e.answerAsWebhook(t, d) })
	}
	for _, r := range s.Refused {
		t.Run("refused "+r.Name, func(t *testing.T) { e.refusedNotice(t, r) })
	}
}

// checkNoticeSamples fails unless s gives the notifier suite what it needs.
func checkNoticeSamples(t *testing.T, p provider.Provider, s provider.Samples) (signature.Scheme, *signature.Secret) {
	t.Helper()
	if len(s.Notices) == 0 {
		t.Fatal("a Notifier's Samples.Notices is empty: add the webhooks it sends, with the refs each names")
	}
	refs := map[string]bool{}
	for _, d := range s.Deliveries {
		if d.Ref == "" || refs[d.Ref] {
			t.Fatalf("delivery %q: a Notifier's deliveries are its API's answers, each for its own Ref (got %q)", d.Name, d.Ref)
		}
		refs[d.Ref] = true
	}
	named := false
	for _, n := range s.Notices {
		for _, r := range n.Refs {
			if !refs[r] {
				t.Fatalf("notice %q names %q, which no delivery answers", n.Name, r)
			}
			named = true
		}
	}
	if !named {
		t.Fatal("no notice names a payment: add one the API answers")
	}
	for _, r := range s.Refused {
		if r.Status != 400 && r.Status != 422 {
			t.Fatalf("refused sample %q: Status %d, want 400 or 422", r.Name, r.Status)
		}
	}
	if _, ok := p.(provider.SignsNothing); ok {
		if len(p.Schemes()) != 0 || s.Secret != "" {
			t.Fatal("a provider that signs nothing has no Schemes and no Samples.Secret")
		}
		return "", nil
	}
	if len(p.Schemes()) == 0 {
		t.Fatal("Schemes is empty: name the signature scheme(s) the provider's sources use, or implement provider.SignsNothing")
	}
	secrets, err := signature.ParseSecrets(p.Schemes()[0], s.Secret)
	if err != nil || len(secrets) != 1 {
		t.Fatalf("Samples.Secret is not one secret of scheme %s (Schemes()[0]): %v", p.Schemes()[0], err)
	}
	return p.Schemes()[0], &secrets[0]
}

// startNotifier builds the notifier provider's pipeline: one source, signed
// with Samples.Secret unless the provider signs nothing, fetching from the
// samples' fake API.
func startNotifier(t *testing.T, name string, p provider.Provider, s provider.Samples) *notifierEnv {
	t.Helper()
	scheme, secret := checkNoticeSamples(t, p, s)
	api := &sampleAPI{bodies: map[string][]byte{}}
	for _, d := range s.Deliveries {
		api.bodies[d.Ref] = d.Body
	}
	src := handler.Source{Name: signedSource, Provider: name, Settings: s.Settings, Fetcher: api}
	e := &notifierEnv{env: &env{name: name, p: p, samples: s, scheme: scheme, st: migrated(t),
		rdb: testkit.Redis(t), prefix: testkit.Key(t, "") + ":"}, api: api}
	if secret != nil {
		v, err := signature.NewVerifier(scheme, []signature.Secret{*secret}, 0)
		if err != nil {
			t.Fatal(err)
		}
		src.Verifier, e.secret, e.verifier = v, *secret, true
	}
	e.serve(t, handler.Config{
		Sources: []handler.Source{src},
		Notices: lock.NewNotices(e.rdb, e.prefix),
		// The suite fetches as fast as it delivers: the budget is the
		// pipeline's to test (handler), not a provider's.
		FetchRate: 10000,
	})
	return e
}

// migrated is a store over a migrated schema of the test's own, made here
// rather than by paylocktest: the providers' own tests import this
// package, and paylocktest imports every provider.
func migrated(t *testing.T) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, store.Config{URL: testkit.Schema(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// noticesAlone checks the adapter on its own: each API answer becomes its
// events, each notice its refs, each refused body its error.
func (e *notifierEnv) noticesAlone(t *testing.T) {
	a, err := e.p.New(provider.Config{Source: signedSource, Settings: e.samples.Settings, Rules: payload.NewRules("", nil)})
	if err != nil {
		t.Fatalf("New(Samples.Settings): %v", err)
	}
	n, ok := a.(provider.Notifier)
	if !ok {
		t.Fatal("the adapter is not a provider.Notifier")
	}
	for _, d := range e.samples.Deliveries {
		got, err := n.Adapt(d.Body, "")
		if err != nil {
			t.Fatalf("API answer %q: %v", d.Name, err)
		}
		CheckAdapted(t, got, nil)
		WantEvents(t, got, wanted(d))
	}
	for i, s := range e.samples.Notices {
		got, err := n.Notices(s.Body, e.noticeID(i, s))
		if err != nil {
			t.Fatalf("notice %q: %v", s.Name, err)
		}
		refs := make([]string, len(got))
		for j, g := range got {
			refs[j] = g.Ref
		}
		if !slices.Equal(refs, s.Refs) {
			t.Fatalf("notice %q names %q, want %q", s.Name, refs, s.Refs)
		}
	}
	for _, r := range e.samples.Refused {
		got, err := n.Notices(r.Body, "")
		if got != nil || err == nil {
			t.Fatalf("refused sample %q: noticed %+v, %v", r.Name, got, err)
		}
		WantRefused(t, err, r.Status, "*")
	}
}

// noticeID is the webhook-id the suite signs notice i with, "" for a
// scheme whose headers carry none.
func (e *notifierEnv) noticeID(i int, n provider.NoticeSample) string {
	switch {
	case e.scheme != signature.SchemeStandard:
		return ""
	case n.HeaderID != "":
		return n.HeaderID
	}
	return fmt.Sprintf("msg_%s_notice_%d", e.name, i)
}

// headers are the signature headers of body (none when unsigned).
func (e *notifierEnv) headers(id string, body []byte) http.Header {
	if !e.verifier {
		return http.Header{}
	}
	return e.sign(id, body)
}

// tamperedNotice delivers notice i with a byte added, signed as the
// authentic body: 401, nothing fetched or written.
func (e *notifierEnv) tamperedNotice(t *testing.T, i int, n provider.NoticeSample) {
	t.Helper()
	rows, keys := e.written(t)
	fetches := e.api.fetches.Load()
	status, _, raw := e.postAs(t, signedSource, e.headers(e.noticeID(i, n), n.Body), append(append([]byte{}, n.Body...), ' '), n.ContentType)
	if status != http.StatusUnauthorized {
		t.Fatalf("tampered: %d %s, want 401", status, raw)
	}
	if r, k := e.written(t); r != rows || k != keys || e.api.fetches.Load() != fetches {
		t.Fatalf("tampered: %d rows and %d lock keys written, %d fetches", r-rows, k-keys, e.api.fetches.Load()-fetches)
	}
}

// authenticNotice delivers notice i twice: the first records exactly the
// events of the payments it names not recorded yet, the second nothing
// more; each named payment's events are then recorded as the API gave
// them.
func (e *notifierEnv) authenticNotice(t *testing.T, i int, n provider.NoticeSample) {
	t.Helper()
	named := e.named(n)
	for attempt := range 2 {
		rows, _ := e.written(t)
		want := e.unrecorded(t, named)
		status, h, raw := e.postAs(t, signedSource, e.headers(e.noticeID(i, n), n.Body), n.Body, n.ContentType)
		if status != http.StatusOK {
			t.Fatalf("notice %d: %d %s, want 200", attempt+1, status, raw)
		}
		if len(named) == 0 {
			e.wantAnswer(t, h, raw, "ignored", true)
		}
		after, _ := e.written(t)
		if attempt == 0 && after-rows != want {
			t.Fatalf("notice recorded %d payments and events, want %d", after-rows, want)
		} else if attempt == 1 && after != rows {
			t.Fatalf("notice delivered again recorded %d more", after-rows)
		}
		for _, d := range named {
			e.wantRecorded(t, d)
		}
	}
}

// named are the deliveries (API answers) of the payments n names.
func (e *notifierEnv) named(n provider.NoticeSample) []provider.Delivery {
	var out []provider.Delivery
	for _, r := range n.Refs {
		for _, d := range e.samples.Deliveries {
			if d.Ref == r {
				out = append(out, d)
			}
		}
	}
	return out
}

// unrecorded counts the events of ds that are not recorded yet: an earlier
// notice may have named the same payment.
func (e *notifierEnv) unrecorded(t *testing.T, ds []provider.Delivery) int {
	t.Helper()
	seen := map[string]bool{}
	n := 0
	for _, d := range ds {
		for _, ev := range wanted(d) {
			if seen[ev.EventID] {
				continue
			}
			seen[ev.EventID] = true
			if !e.isRecorded(t, ev) {
				n++
			}
		}
	}
	return n
}

// isRecorded reports whether ev is recorded: its payment row for a payment
// that succeeded, its event row for a lifecycle event.
func (e *notifierEnv) isRecorded(t *testing.T, ev provider.Event) bool {
	t.Helper()
	q := `SELECT count(*) FROM payment_events WHERE source = $1 AND event_id = $2`
	args := []any{signedSource, ev.EventID}
	if ev.Succeeded() {
		q = `SELECT count(*) FROM payments WHERE source = $1 AND transaction_id = $2 AND amount IS NOT NULL`
		args = []any{signedSource, ev.TransactionID}
	}
	return testkit.Count(t, e.st.Pool(), q, args...) > 0
}

// answerAsWebhook posts an API answer to the webhook, as the notices are
// sent: it is refused (4xx), and nothing is fetched or written.
func (e *notifierEnv) answerAsWebhook(t *testing.T, d provider.Delivery) {
	t.Helper()
	rows, keys := e.written(t)
	fetches := e.api.fetches.Load()
	ct := e.samples.Notices[0].ContentType
	status, _, raw := e.postAs(t, signedSource, e.headers("msg_"+e.name+"_answer", d.Body), d.Body, ct)
	if status < 400 || status >= 500 || status == http.StatusUnauthorized {
		t.Fatalf("an API answer posted as a webhook: %d %s, want a 4xx refusal", status, raw)
	}
	if r, k := e.written(t); r != rows || k != keys || e.api.fetches.Load() != fetches {
		t.Fatalf("an API answer posted as a webhook: %d rows and %d lock keys written, %d fetches", r-rows, k-keys, e.api.fetches.Load()-fetches)
	}
}

// refusedNotice delivers a refused body: its status as a problem, nothing
// fetched or written, no lock taken.
func (e *notifierEnv) refusedNotice(t *testing.T, r provider.Refusal) {
	t.Helper()
	rows, keys := e.written(t)
	fetches := e.api.fetches.Load()
	status, hdr, raw := e.postAs(t, signedSource, e.headers("msg_"+e.name+"_refused", r.Body), r.Body, r.ContentType)
	if status != r.Status || hdr.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %s (%s), want a %d problem", status, raw, hdr.Get("Content-Type"), r.Status)
	}
	if n, k := e.written(t); n != rows || k != keys || e.api.fetches.Load() != fetches {
		t.Fatalf("%d rows and %d lock keys written, %d fetches", n-rows, k-keys, e.api.fetches.Load()-fetches)
	}
}
