package pipelinetest

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

// The suite of a Notifier provider (provider.Notifier), whose webhooks
// name payments that the pipeline fetches from the provider's API. Its
// Samples.Deliveries are the API's answers, each for its Ref, served by a
// fake of the source's Fetcher, which the replicas share; its
// Samples.Notices are the webhooks. Notice i, and refused body i, go to
// replica i%3, a notice delivered again to the next replica. The suite
// checks that:
//
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
		return nil, "", fmt.Errorf("pipelinetest: no sample delivery for %q: %w", ref, provider.ErrNoSuchPayment)
	}
	return b, "sample", nil
}

// notifierEnv is a notifier provider's pipeline.
type notifierEnv struct {
	*env
	api *sampleAPI
}

// runNotifier is the suite of a Notifier provider.
func runNotifier(t *testing.T, s *providertest.Subject) {
	e := startNotifier(t, s)
	for i, n := range s.Samples.Notices {
		t.Run("notice "+n.Name, func(t *testing.T) {
			if e.Signed {
				e.tamperedNotice(t, i, n)
			}
			e.authenticNotice(t, i, n)
		})
	}
	for i, d := range s.Samples.Deliveries {
		t.Run("API answer "+d.Name+" posted as a webhook", func(t *testing.T) { e.answerAsWebhook(t, i, d) })
	}
	for i, r := range s.Refusals() {
		t.Run("refused "+r.Name, func(t *testing.T) { e.refusedNotice(t, i, r) })
	}
}

// startNotifier builds the notifier provider's pipeline: one source on
// the replicas, signed with Samples.Secret unless the provider signs
// nothing, fetching from the samples' fake API.
func startNotifier(t *testing.T, s *providertest.Subject) *notifierEnv {
	t.Helper()
	api := &sampleAPI{bodies: map[string][]byte{}}
	for _, d := range s.Samples.Deliveries {
		api.bodies[d.Ref] = d.Body
	}
	src := handler.Source{Name: signedSource, Provider: s.Name, Settings: s.Samples.Settings, Fetcher: api}
	if s.Signed {
		src.Verifier = s.Verifier(t)
	}
	e := serve(t, s, handler.Config{
		Sources: []handler.Source{src},
		// The suite fetches as fast as it delivers: the budget is the
		// pipeline's to test (handler), not a provider's.
		FetchRate: 10000,
	})
	return &notifierEnv{env: e, api: api}
}

// tamperedNotice delivers notice i with a byte added, signed as the
// authentic body, to replica i: 401, nothing fetched or written.
func (e *notifierEnv) tamperedNotice(t *testing.T, i int, n provider.NoticeSample) {
	t.Helper()
	rows, keys := e.written(t)
	fetches := e.api.fetches.Load()
	status, _, raw := e.postAs(t, i, signedSource, e.sign(t, e.NoticeID(i), n.Body), append(append([]byte{}, n.Body...), ' '), n.ContentType)
	if status != http.StatusUnauthorized {
		t.Fatalf("tampered: %d %s, want 401", status, raw)
	}
	if r, k := e.written(t); r != rows || k != keys || e.api.fetches.Load() != fetches {
		t.Fatalf("tampered: %d rows and %d lock keys written, %d fetches", r-rows, k-keys, e.api.fetches.Load()-fetches)
	}
}

// authenticNotice delivers notice i twice, to replica i and then to the
// next one: the first records exactly the events of the payments it names
// not recorded yet, the second nothing more; each named payment's events
// are then recorded as the API gave them.
func (e *notifierEnv) authenticNotice(t *testing.T, i int, n provider.NoticeSample) {
	t.Helper()
	named := e.named(n)
	for attempt := range 2 {
		rows, _ := e.written(t)
		want := e.unrecorded(t, named)
		status, h, raw := e.postAs(t, i+attempt, signedSource, e.sign(t, e.NoticeID(i), n.Body), n.Body, n.ContentType)
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
		for _, d := range e.Samples.Deliveries {
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
		for _, ev := range providertest.Wanted(d) {
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

// answerAsWebhook posts API answer i to the webhook of replica i, as the
// notices are sent: it is refused (4xx), and nothing is fetched or
// written.
func (e *notifierEnv) answerAsWebhook(t *testing.T, i int, d provider.Delivery) {
	t.Helper()
	rows, keys := e.written(t)
	fetches := e.api.fetches.Load()
	ct := e.Samples.Notices[0].ContentType
	status, _, raw := e.postAs(t, i, signedSource, e.sign(t, "msg_"+e.Name+"_answer", d.Body), d.Body, ct)
	if status < 400 || status >= 500 || status == http.StatusUnauthorized {
		t.Fatalf("an API answer posted as a webhook: %d %s, want a 4xx refusal", status, raw)
	}
	if r, k := e.written(t); r != rows || k != keys || e.api.fetches.Load() != fetches {
		t.Fatalf("an API answer posted as a webhook: %d rows and %d lock keys written, %d fetches", r-rows, k-keys, e.api.fetches.Load()-fetches)
	}
}

// refusedNotice delivers refused body i to replica i: its status as a
// problem, nothing fetched or written, no lock taken.
func (e *notifierEnv) refusedNotice(t *testing.T, i int, r provider.Refusal) {
	t.Helper()
	rows, keys := e.written(t)
	fetches := e.api.fetches.Load()
	status, hdr, raw := e.postAs(t, i, signedSource, e.sign(t, "msg_"+e.Name+"_refused", r.Body), r.Body, r.ContentType)
	if status != r.Status || hdr.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %s (%s), want a %d problem", status, raw, hdr.Get("Content-Type"), r.Status)
	}
	if n, k := e.written(t); n != rows || k != keys || e.api.fetches.Load() != fetches {
		t.Fatalf("%d rows and %d lock keys written, %d fetches", n-rows, k-keys, e.api.fetches.Load()-fetches)
	}
}
